"""Reading an aiohttp response body under a byte cap, decoding Content-Encoding ourselves.

Why not aiohttp's own decompression: it inflates whole network chunks with no output bound,
so a 64 MiB-of-zeros gzip bomb would cost 64 MiB before any cap could apply. Here each
``decompress`` call is given ``max_length``, so a body costs at most the cap whatever its
compression ratio (the unread input waits in ``unconsumed_tail``). The decoders follow
urllib3's (``decode_content=True``) so both fetchers keep the same bodies: gzip and x-gzip
(later members read, trailing garbage after the first member ignored), deflate (zlib-wrapped,
else raw), a list of codings decoded last-first when one of them is known (unknown ones in it
are tried as deflate), any other coding passed through raw.
"""

from __future__ import annotations

import contextlib
import zlib
from typing import Any

from .response import keep_body, over_cap
from .result import FetchResult

_KNOWN = ("gzip", "x-gzip", "deflate")
_MAX_LINKS = 5  #: urllib3's MultiDecoder.max_decode_links


class BodyDecodeError(Exception):
    """The body does not decode as its Content-Encoding says (``decoding_error``)."""


class _Gzip:
    def __init__(self) -> None:
        self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._later = False  # past the first member: garbage ends the body quietly
        self._dead = False
        self.tail = b""

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._dead:
            return b""
        data = self.tail + data
        out = bytearray()
        while data or not self._obj.eof:
            try:
                out += self._obj.decompress(data, max_length - len(out))
            except zlib.error:
                self._dead, self.tail = True, b""
                if self._later:
                    return bytes(out)
                raise
            self.tail = data = self._obj.unconsumed_tail or self._obj.unused_data
            if len(out) >= max_length or not data:
                break
            if self._obj.eof:  # another member follows
                self._later = True
                self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return bytes(out)


class _Deflate:
    def __init__(self) -> None:
        self._obj = zlib.decompressobj()
        self._first: bytes | None = b""  # input seen while zlib framing is not yet confirmed
        self.tail = b""

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._obj.eof:
            return b""
        data = self.tail + data
        if self._first is not None:
            self._first += data
            try:
                out = self._obj.decompress(data, max_length)
            except zlib.error:  # not zlib-wrapped: raw deflate, from the start
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
                data, self._first = self._first, None
                out = self._obj.decompress(data, max_length)
            else:
                if out:
                    self._first = None
        else:
            out = self._obj.decompress(data, max_length)
        self.tail = b"" if self._obj.eof else self._obj.unconsumed_tail
        return out


class Decoder:
    """The body decoder for a Content-Encoding value (several codings: last applied first)."""

    def __init__(self, codings: list[str]) -> None:
        if len(codings) > _MAX_LINKS:
            raise BodyDecodeError(f"Too many content encodings in the chain: "
                                  f"{len(codings)} > {_MAX_LINKS}")
        self._stages = [_Gzip() if c in ("gzip", "x-gzip") else _Deflate()
                        for c in reversed(codings)]

    @property
    def has_tail(self) -> bool:
        return any(s.tail for s in self._stages)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        """At most ``max_length`` decoded bytes of ``data`` (and of input held back)."""
        if len(self._stages) == 1:
            return self._stages[0].decompress(data, max_length)
        out = bytearray()
        while True:
            progress = False
            for stage in self._stages:
                data = stage.decompress(data, max_length - len(out))
                progress = progress or bool(data)
            out += data
            if not progress or len(out) >= max_length:
                return bytes(out)
            data = b""


def decoder_for(content_encoding: str | None) -> Decoder | None:
    """The decoder urllib3 would use for this header value, None for a raw body."""
    ce = (content_encoding or "").lower()
    if ce in _KNOWN:
        return Decoder([ce])
    if "," in ce:
        codings = [c.strip() for c in ce.split(",")]
        if any(c in _KNOWN for c in codings):
            return Decoder(codings)
    return None


async def read_body(resp: Any, res: FetchResult, max_bytes: int, truncation_is_error: bool,
                    decoder: Decoder | None, encoding: str | None) -> None:
    """Fill ``res.body`` (decoded, at most ``max_bytes``); set the cap's truncation and error.

    Network errors propagate (the caller classifies them); what was decoded before them stays
    in ``res.body``, also when the fetch is cancelled.
    """
    parts: list[bytes] = []
    total = 0
    content = resp.content
    try:
        while total <= max_bytes:
            limit = max_bytes - total + 1
            chunk = b""
            if decoder is not None and decoder.has_tail:  # input held back by the last limit
                chunk = _decode(decoder, b"", limit, encoding)
            if not chunk:
                raw = await content.readany()
                if not raw:
                    break
                chunk = raw if decoder is None else _decode(decoder, raw, limit, encoding)
            parts.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            over_cap(res, max_bytes, truncation_is_error)
    finally:
        keep_body(res, parts, max_bytes)


def _decode(decoder: Decoder, data: bytes, limit: int, encoding: str | None) -> bytes:
    try:
        return decoder.decompress(data, limit)
    except zlib.error as e:
        raise BodyDecodeError(
            f"Received response with content-encoding: {encoding}, but failed to decode it.",
            e) from e


async def drain(resp: Any, max_bytes: int) -> None:
    """Read and drop a body (raw, at most ``max_bytes``), so the connection is kept; over the
    cap, or on any error, the connection is closed instead (it only costs its reuse)."""
    total = 0
    try:
        while total <= max_bytes:
            chunk = await resp.content.readany()
            if not chunk:
                return
            total += len(chunk)
    except Exception:
        pass
    with contextlib.suppress(Exception):
        resp.close()
