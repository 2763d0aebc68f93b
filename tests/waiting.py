"""Polling for a condition with a deadline, shared by the tests that wait on live processes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(pred: Callable[[], T], timeout_s: float, what: str = "condition",
             interval_s: float = 0.05) -> T:
    """Call ``pred`` until it returns something truthy, and return that; raise AssertionError
    naming ``what`` (and ``pred``'s last answer) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}: last {last!r}")
        time.sleep(interval_s)
