"""How late the server's event loop runs: the check that the benchmark's web is not the
bottleneck.

A server that answers late because its own loop is busy (or starved of CPU by the crawler
beside it on a 2-core machine) adds its lag to every response time it models, and a crawler
measured against it looks slower than it is. The monitor sleeps ``PERIOD_S`` again and again
and records how much later than asked each sleep ended; every second it rewrites a small JSON
file (``<request log>.lag.json``) with the counts, so a bench can read the lag of any window
(the counts are cumulative; subtract two snapshots) without stopping the server.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import time
from pathlib import Path

PERIOD_S = 0.02
#: Upper bounds (ms) of the lag histogram's buckets; the last bucket is everything above.
BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def lag_path(log_path: str | Path) -> Path:
    return Path(f"{log_path}.lag.json")


class LoopLagMonitor:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.counts = [0] * (len(BUCKETS_MS) + 1)
        self.total_lag_s = 0.0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def record(self, lag_s: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS_MS, lag_s * 1000)] += 1
        self.total_lag_s += lag_s
        self.samples += 1

    async def _run(self) -> None:
        written = time.monotonic()
        while True:
            asked = time.monotonic() + PERIOD_S
            await asyncio.sleep(PERIOD_S)
            now = time.monotonic()
            self.record(max(0.0, now - asked))
            if now - written >= 1.0:
                written = now
                self.write()

    def snapshot(self) -> dict[str, object]:
        return {"at": time.time(), "period_s": PERIOD_S, "buckets_ms": list(BUCKETS_MS),
                "counts": list(self.counts), "samples": self.samples,
                "total_lag_s": round(self.total_lag_s, 6)}

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.snapshot()), encoding="utf-8")
        tmp.replace(self.path)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.write()


def read_lag(path: str | Path) -> dict[str, object] | None:
    """The last snapshot written, or None (no monitor ran, or a server without one)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def lag_between(before: dict | None, after: dict | None) -> dict[str, float] | None:
    """Loop lag over the window between two snapshots: mean and the 50th/90th/99th
    percentiles of the samples (upper bucket bounds, in ms), the share of samples over 100 ms,
    and ``late_share``, the share of the window's time the loop spent late."""
    if not after:
        return None
    counts = [a - (before["counts"][i] if before else 0) for i, a in enumerate(after["counts"])]
    n = sum(counts)
    if n <= 0:
        return None
    total = after["total_lag_s"] - (before["total_lag_s"] if before else 0.0)
    tops = [*after["buckets_ms"], float("inf")]

    def pct(p: float) -> float:
        seen = 0
        for top, c in zip(tops, counts, strict=True):
            seen += c
            if seen >= p * n:
                return top
        return tops[-1]

    over_100 = sum(c for top, c in zip(tops, counts, strict=True) if top > 100)
    # the share of the window the loop ran late: a few long stalls hide in the percentiles
    # (few samples are taken during a stall) but not here
    late_share = total / (n * after["period_s"] + total)
    return {"samples": n, "mean_ms": round(1000 * total / n, 2), "p50_ms": pct(0.5),
            "p90_ms": pct(0.9), "p99_ms": pct(0.99), "share_over_100ms": round(over_100 / n, 4),
            "late_share": round(late_share, 3)}
