"""The per-fetch wall-time deadline and the one watchdog thread that enforces it.

Read and connect timeouts bound each socket call, not the whole fetch: a server trickling a
byte per read timeout would hold a fetch for ever. The watchdog shuts the fetch's socket when
its total time is up, which wakes the thread blocked in ``recv``.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from typing import Any


class _Deadline:
    """A fetch's wall-time deadline; when it passes, the fetch's socket is shut down.

    A blocked ``recv`` (a server trickling one byte per read timeout) cannot otherwise be
    interrupted. The connection is registered by :meth:`_PinnedMixin.request` under the
    watchdog lock, and ``owner`` is checked under the same lock, so a deadline never shuts a
    pooled connection that another fetch has taken over.
    """

    __slots__ = ("at", "conn", "done", "fired", "why")

    def __init__(self, at: float) -> None:
        self.at = at
        self.conn: Any = None
        self.done = False
        self.fired = False
        #: why it fired before its time ("" when its time was simply up)
        self.why = ""

    def _abort(self) -> None:  # called with the watchdog lock held
        self.fired = True
        conn = self.conn
        if conn is None or getattr(conn, "_trawl_owner", None) is not self:
            return
        sock = getattr(conn, "sock", None)
        if sock is not None:
            # socket.socket.shutdown, not SSLSocket.shutdown: the latter drops the SSL
            # object under the feet of the thread blocked in recv.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watchdog:
    """One daemon thread per process firing deadlines in time order (lazy, fork-aware)."""

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        #: the deadline of the fetch each thread is running (by thread ident)
        self._by_thread: dict[int, _Deadline] = {}

    def arm(self, timeout_s: float) -> _Deadline:
        d = _Deadline(time.monotonic() + timeout_s)
        with self._cond:
            self._by_thread[threading.get_ident()] = d
            heapq.heappush(self._heap, (d.at, next(self._seq), d))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="trawl-fetch-watchdog", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is d:
                self._cond.notify()
        return d

    def disarm(self, d: _Deadline) -> None:
        with self.lock:
            d.done = True
            if self._by_thread.get(threading.get_ident()) is d:
                del self._by_thread[threading.get_ident()]

    def abort_thread(self, ident: int, why: str) -> bool:
        """End the fetch thread ``ident`` is running now, as if its time were up (the fetch
        engine's lease keeper: a fetch must not outlive its lease). False if none runs."""
        with self.lock:
            d = self._by_thread.get(ident)
            if d is None or d.done or d.fired:
                return False
            d.why = why
            d._abort()
            return True

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait(60.0)
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, _, d = heapq.heappop(self._heap)
                d._abort()


_WATCHDOG = _Watchdog()


def abort_fetch_in_thread(ident: int, why: str) -> bool:
    """End the fetch that thread ``ident`` is running now (error ``aborted``, ``why`` as its
    detail); False if it runs none."""
    return _WATCHDOG.abort_thread(ident, why)
_current = threading.local()  # .deadline: the _Deadline of the fetch running in this thread
