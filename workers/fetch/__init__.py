"""HTTP fetching for the crawler: one GET, bounded in size and time, to a pre-resolved IP.

:meth:`Fetcher.fetch` (and :meth:`AsyncFetcher.fetch`) never raises for network or HTTP
problems: it returns a :class:`FetchResult` whose ``error`` is a short machine-readable
class (see ``ERROR_CLASSES``).

Thread safety: a :class:`Fetcher` may be used from many threads (a Celery threads pool); its
one urllib3 ``PoolManager`` is thread-safe. Requests go straight to urllib3 (no ``requests``
layer: it cost more CPU per page than urllib3 itself, see ``bench/fetch_cost.py``). Cookies
are never stored or sent (a crawler that keeps cookies walks into session-id traps and leaks
state between hosts), and nothing is taken from the environment (no proxies, no netrc, no CA
bundle variables).

Modules: :mod:`.result` (the result type, error vocabulary, limits), :mod:`.fetcher` (the
fetch itself), :mod:`.pinned` (urllib3 connections pinned to an IP), :mod:`.tls` (trusted
CAs), :mod:`.deadline` (the total-time watchdog), :mod:`.prepare` (URL and headers as
requests sent them), :mod:`.request` (settings, address checks, headers and response head
shared by both fetchers), :mod:`.response` (body reading), :mod:`.classify` (exception ->
error). The asyncio + aiohttp fetcher, same behaviour and result: :mod:`.aio`
(:class:`AsyncFetcher`, :class:`FetchControl` to abort a fetch), :mod:`.aio_body` (capped
body reading and Content-Encoding decoding), :mod:`.aio_errors` (aiohttp exception -> error),
:mod:`.loop` (:class:`NetworkLoop`, an event loop on a thread, and :class:`LoopFetcher`,
Fetcher's blocking API over it).
Relative imports throughout, so a copy of the package can be loaded under another name
(``bench/fetch_cost.py --fetch-module``).
"""

from __future__ import annotations

from .aio import AsyncFetcher, FetchControl
from .deadline import abort_fetch_in_thread
from .fetcher import Fetcher
from .loop import LoopFetcher, NetworkLoop
from .result import (
    ERROR_CLASSES,
    HTML_TYPES,
    ROBOTS_FETCH_BYTES,
    ROBOTS_MAX_BYTES,
    ROBOTS_MAX_REDIRECTS,
    TRUNCATIONS,
    FetchResult,
)

__all__ = [
    "ERROR_CLASSES",
    "HTML_TYPES",
    "ROBOTS_FETCH_BYTES",
    "ROBOTS_MAX_BYTES",
    "ROBOTS_MAX_REDIRECTS",
    "TRUNCATIONS",
    "AsyncFetcher",
    "FetchControl",
    "FetchResult",
    "Fetcher",
    "LoopFetcher",
    "NetworkLoop",
    "abort_fetch_in_thread",
]
