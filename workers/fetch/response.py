"""Reading a response: the media type, the body under a byte cap and the deadline, disposal.

Bodies are read in 64 KiB ``read1`` steps, decoded as they come, so a decompression bomb or an
endless body costs at most the cap; a connection whose body was not read to the end is closed
rather than returned to its pool.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from .deadline import _Deadline
from .result import FetchResult

_CHUNK = 64 * 1024
_HTTP_VERSIONS = {9: "HTTP/0.9", 10: "HTTP/1.0", 11: "HTTP/1.1", 20: "HTTP/2"}


def _media_type(value: str | None) -> str | None:
    if not value:
        return None
    mt = value.split(";", 1)[0].strip().lower()
    return mt or None


def _discard(resp: Any) -> None:
    """Close the response's connection and hand the (closed) slot back to its pool."""
    with contextlib.suppress(Exception):
        resp.close()
    with contextlib.suppress(Exception):
        resp.release_conn()


def _drain(resp: Any, max_bytes: int) -> None:
    """Read and drop a body (raw bytes, at most ``max_bytes``); errors only cost reuse."""
    total = 0
    try:
        while True:
            chunk = resp.read1(_CHUNK, decode_content=False)
            if not chunk:
                return
            total += len(chunk)
            if total > max_bytes:
                break
    except Exception:
        pass
    _discard(resp)


def _read_body(
    raw: Any,
    res: FetchResult,
    max_bytes: int,
    deadline: _Deadline,
    truncation_is_error: bool,
    total_timeout_s: float,
) -> None:
    """Fill ``res.body`` (decoded, at most ``max_bytes``); set truncation and its error.

    A body shorter than its Content-Length raises (urllib3's ``enforce_content_length``,
    on by default, turns the early EOF into IncompleteRead), as does a reset; the caller
    marks those bodies cut (``disconnect``)."""
    parts: list[bytes] = []
    total = 0
    try:
        while True:
            chunk = raw.read1(min(_CHUNK, max_bytes - total + 1), decode_content=True)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                over_cap(res, max_bytes, truncation_is_error)
                break
            if time.monotonic() > deadline.at:
                res.cut("time")
                res.error = "timeout"
                res.error_detail = f"total timeout {total_timeout_s}s"
                break
    finally:
        keep_body(res, parts, max_bytes)


def over_cap(res: FetchResult, max_bytes: int, truncation_is_error: bool) -> None:
    """The body went past ``max_bytes``: cut (``length``), and for a page an error."""
    res.cut("length")
    if truncation_is_error:
        res.error = "too_large"
        res.error_detail = f"body exceeds {max_bytes} bytes"


def keep_body(res: FetchResult, parts: list[bytes], max_bytes: int) -> None:
    """``res.body``: what was read (decoded), at most ``max_bytes`` of it."""
    body = b"".join(parts)
    res.body = body[:max_bytes] if len(body) > max_bytes else body
