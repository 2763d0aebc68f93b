"""One asyncio event loop on a daemon thread (:class:`NetworkLoop`), and :class:`LoopFetcher`,
the blocking ``Fetcher`` API over an :class:`~workers.fetch.aio.AsyncFetcher` running on it.

Why: synchronous callers (tests, tools, a thread-based pipeline) can use the aiohttp fetcher
without owning a loop; many threads may block on it at once while one loop does all the
network work.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from workers.dns.resolver import Resolver

from .aio import AsyncFetcher
from .result import FetchResult

T = TypeVar("T")


class NetworkLoop:
    """An asyncio event loop running in its own daemon thread until :meth:`stop`."""

    def __init__(self, name: str = "trawl-network-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("NetworkLoop not started")
        return self._loop

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> NetworkLoop:
        """Start the thread (idempotent); returns when the loop runs."""
        with self._lock:
            if self._thread is not None:
                return self
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            self._loop = loop
            self._thread = threading.Thread(target=run, name=self._name, daemon=True)
            self._thread.start()
            ready.wait()
        return self

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop (from any thread other than the loop's); its future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Call ``fn(*args)`` in the loop's thread, soon (thread-safe)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel what still runs, shut the executor and async generators, stop and close."""
        with self._lock:
            loop, thread = self._loop, self._thread
            if loop is None or thread is None:
                return

            async def shutdown() -> None:
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await loop.shutdown_asyncgens()
                await loop.shutdown_default_executor()

            if thread.is_alive():
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout_s)
                loop.call_soon_threadsafe(loop.stop)
                thread.join(timeout_s)
            if not thread.is_alive():
                loop.close()
            self._loop = self._thread = None


class LoopFetcher:
    """``Fetcher``'s blocking API (``fetch``, ``fetch_robots``, ``close``,
    ``content_type_allowed``) over an :class:`AsyncFetcher` on a :class:`NetworkLoop` (its
    own, started here, unless one is given). Thread-safe: each call blocks on its future."""

    def __init__(self, resolver: Resolver, user_agent: str, *,
                 network_loop: NetworkLoop | None = None, **settings: Any) -> None:
        """``settings``: :class:`AsyncFetcher`'s keywords (limits, trust, pool size)."""
        self.aio = AsyncFetcher(resolver, user_agent, **settings)
        self._own_loop = network_loop is None
        self.network = network_loop if network_loop is not None else NetworkLoop()
        self.network.start()

    def __getattr__(self, name: str) -> Any:  # settings: max_bytes, user_agent, ...
        if name == "aio":
            raise AttributeError(name)
        return getattr(self.aio, name)

    def content_type_allowed(self, media_type: str | None) -> bool:
        return self.aio.content_type_allowed(media_type)

    def fetch(self, url: str, ip: str | None = None,
              extra_headers: Mapping[str, str] | None = None,
              any_type: bool = False) -> FetchResult:
        return self._run(self.aio.fetch(url, ip, extra_headers, any_type=any_type))

    def fetch_robots(self, url: str, ip: str | None = None,
                     hop_delay_s: float = 0.0) -> FetchResult:
        return self._run(self.aio.fetch_robots(url, ip, hop_delay_s))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._own_loop:
            self.network.start()  # again after close()
        return self.network.submit(coro).result()

    def close(self) -> None:
        """Close the pooled connections; the loop too if it is this fetcher's own (the
        fetcher then starts a new one on its next use)."""
        if not self.network.running:
            return
        self.network.submit(self.aio.close()).result(10)
        if self._own_loop:
            self.network.stop()

    def __enter__(self) -> LoopFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
