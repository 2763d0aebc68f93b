"""A URL in a worker's fetch engine (:class:`Job`) and the gate that bounds how many there are.

Kept apart from the engine so its two runners (``thread_runner``, ``loop_runner``) share them
without importing the engine.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass

from workers.fetch.order import FetchOrder


class TokenGate:
    """A counting semaphore on ``queue.SimpleQueue`` (C): acquire and release cost no Python
    Condition, and waiters block without holding the GIL."""

    def __init__(self, tokens: int) -> None:
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(tokens):
            self._tokens.put(None)

    def acquire(self) -> None:
        self._tokens.get()

    def release(self) -> None:
        self._tokens.put(None)


@dataclass(slots=True)
class Job:
    order: FetchOrder
    #: time.monotonic() when a runner took it (0.0: waiting for a free slot)
    started: float = 0.0
    #: time.monotonic() when its lease was last known current (begin, then each renewal)
    renewed: float = 0.0
    #: the keeper found its lease expired (reaped): it must not be fetched
    stale: bool = False
    #: ends its fetch in progress (error ``aborted``, the reason as detail); True if one
    #: was running. Set by the runner once the job's fetch can start.
    abort: Callable[[str], bool] | None = None
    #: the keeper ended its fetch because its lease lapsed
    aborted: bool = False
