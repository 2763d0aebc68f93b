"""Mapping a failed fetch's exception to one of the short ``ERROR_CLASSES`` names.

urllib3 wraps the real cause (a refused connect, an SSL error, a reset) in its own exceptions
and http.client's; the cause may sit in ``reason``, ``__cause__``, ``__context__`` or ``args``,
so the whole chain is searched and the most specific class wins.
"""

from __future__ import annotations

import http.client
import socket
import ssl

import urllib3.exceptions


def exception_chain(exc: BaseException,
                    links: tuple[str, ...] = ("reason",)) -> list[BaseException]:
    """``exc`` and every exception it wraps (through the attributes ``links``, ``__cause__``,
    ``__context__`` and ``args``), breadth first, at most 20."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 20:
        e = todo.pop(0)
        if any(e is s for s in seen):
            continue
        seen.append(e)
        for nxt in (*(getattr(e, link, None) for link in links), e.__cause__, e.__context__,
                    *e.args):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return seen


def bad_chunk_size(chain: list[BaseException]) -> ValueError | None:
    """In an :func:`exception_chain`, http.client's error for a chunk size that is no hex
    number: an ``IncompleteRead`` raised while handling the ``ValueError`` of the parse
    (urllib3 wraps it again). That is bytes that are no HTTP, as aiohttp reports it, not a
    cut connection."""
    if not any(isinstance(e, http.client.IncompleteRead) for e in chain):
        return None
    # The connection ending where a chunk size was due fails the same parse, on an empty
    # line: that one is a cut (``disconnect``). http.client tells the two apart only in the
    # ValueError's text, int()'s repr of the line.
    return next((e for e in chain
                 if type(e) is ValueError and not str(e).endswith(": b''")), None)


def describe(exc: BaseException) -> str:
    """The ``error_detail`` of a failed fetch's exception (at most 500 characters)."""
    bad = bad_chunk_size(exception_chain(exc))
    text = (f"invalid chunk size ({bad})" if bad is not None
            else f"{type(exc).__name__}: {exc}")
    return text[:500]


def _classify(exc: BaseException) -> str:
    chain = exception_chain(exc)

    def has(*types: type) -> bool:
        return any(isinstance(e, types) for e in chain)

    if has(urllib3.exceptions.NewConnectionError, ConnectionRefusedError) and not has(
        socket.timeout, TimeoutError
    ):
        return "connect_error"
    if has(
        urllib3.exceptions.ConnectTimeoutError,
        urllib3.exceptions.ReadTimeoutError,
        TimeoutError,
    ):
        return "timeout"
    if has(ssl.SSLError, urllib3.exceptions.SSLError):
        return "tls_error"
    if has(urllib3.exceptions.NewConnectionError, OSError) and has(
        urllib3.exceptions.NewConnectionError
    ):
        return "connect_error"
    if has(urllib3.exceptions.InvalidChunkLength, urllib3.exceptions.HeaderParsingError) or (
            bad_chunk_size(chain) is not None):
        return "invalid_response"
    if has(
        http.client.RemoteDisconnected,
        ConnectionResetError,
        BrokenPipeError,
        ConnectionAbortedError,
        http.client.IncompleteRead,
    ):
        return "connection_reset"
    # urllib3's InvalidHeader: conflicting Content-Length values (raised building the response)
    if has(http.client.HTTPException, urllib3.exceptions.InvalidHeader):
        return "invalid_response"
    if has(urllib3.exceptions.DecodeError):
        return "decoding_error"
    # MaxRetryError (other reasons) and ClosedPoolError: what requests called ConnectionError
    if has(
        urllib3.exceptions.ProtocolError,
        urllib3.exceptions.MaxRetryError,
        urllib3.exceptions.ClosedPoolError,
    ):
        return "connection_reset"
    if has(urllib3.exceptions.LocationParseError):
        return "invalid_url"
    return "fetch_error"
