"""A counting semaphore for many threads, cheap enough to take once per page."""

from __future__ import annotations

import queue


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

    def __enter__(self) -> TokenGate:
        self._tokens.get()
        return self

    def __exit__(self, *exc: object) -> None:
        self._tokens.put(None)
