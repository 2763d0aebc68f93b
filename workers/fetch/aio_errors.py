"""Mapping an aiohttp fetch's exception to the ``ERROR_CLASSES`` name urllib3's path gives.

Why: a page's outcome (retry, truncated, failed) must not depend on the transport, so the
same server behaviour gets the same name from both fetchers (tests/workers/test_fetch.py runs
the hostile servers against both). aiohttp wraps the cause (a refused connect, an SSL error, a
body short of its Content-Length) in its own exceptions, in ``__cause__``, ``os_error``,
``certificate_error`` or ``args``; the whole chain is searched, the most specific class wins.
"""

from __future__ import annotations

import re
import ssl

import aiohttp
from aiohttp import http_exceptions as hx

from .aio_body import BodyDecodeError
from .classify import exception_chain

#: Where aiohttp keeps the exception it wraps, besides ``__cause__`` and ``args``.
_LINKS = ("os_error", "certificate_error")


def _chain(exc: BaseException) -> list[BaseException]:
    return exception_chain(exc, _LINKS)


def classify_aio(exc: BaseException) -> str:
    chain = _chain(exc)

    def has(*types: type) -> bool:
        return any(isinstance(e, types) for e in chain)

    if has(ConnectionRefusedError) and not has(TimeoutError):
        return "connect_error"
    if has(TimeoutError):  # connect, read (sock_read) timeouts; asyncio's is TimeoutError
        return "timeout"
    if has(ssl.SSLError, ssl.CertificateError, aiohttp.ClientSSLError):
        return "tls_error"
    if has(aiohttp.ClientConnectorError):  # unreachable, no route: nothing was sent
        return "connect_error"
    if has(BodyDecodeError):
        return "decoding_error"
    # the body cut off: fewer bytes than Content-Length, chunked framing ended by EOF
    if has(hx.ContentLengthError, hx.TransferEncodingError):
        return "connection_reset"
    # bad status line, header, chunk size: http.client's HTTPException / InvalidChunkLength
    if has(hx.HttpProcessingError, aiohttp.ClientResponseError):
        return "invalid_response"
    if has(aiohttp.ServerDisconnectedError, ConnectionResetError, BrokenPipeError,
           ConnectionAbortedError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
        return "connection_reset"
    if has(aiohttp.InvalidURL):
        return "invalid_url"
    return "fetch_error"


_RECEIVED = re.compile(r"received (\d+) of (\d+) bytes")


def detail_of(exc: BaseException) -> str:
    """``error_detail``: the exception, and for a body short of its Content-Length the
    words urllib3 uses (``IncompleteRead(n bytes read, m more expected)``, raw bytes)."""
    for e in _chain(exc):
        if isinstance(e, hx.ContentLengthError):
            m = _RECEIVED.search(str(e))
            if m:
                got, want = int(m.group(1)), int(m.group(2))
                return (f"{type(exc).__name__}: Connection broken: "
                        f"IncompleteRead({got} bytes read, {want - got} more expected)")
    return f"{type(exc).__name__}: {exc}"[:500]
