"""What the report plots, derived from the records alone.

Each record carries its fetch's start (``fetched_at``) and, for a response, its duration
(``elapsed_s``): fetches in flight over time is the count of [start, start + elapsed)
intervals covering each instant; the politeness wait is the gap between consecutive fetch
starts on one host."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from workers.report.records import CrawlRecords

#: Outcomes that sent a request (robots-blocked and refused URLs never did).
SENT = frozenset({"fetched", "truncated", "failed"})


@dataclass
class Series:
    t: np.ndarray            # bin starts, seconds since the first fetch
    pages_per_s: np.ndarray  # responses ending the URL, per second, per bin
    in_flight: np.ndarray    # mean fetches in flight over each bin
    statuses: Counter[str]
    outcomes: Counter[str]
    host_pages: Counter[str]
    host_errors: Counter[str]
    waits_s: np.ndarray      # per-host gaps between consecutive fetch starts
    depths: Counter[int]
    dup_kinds: Counter[str]
    mirrors: Counter[tuple[str, str]]


def derive(crawl: CrawlRecords, bins: int = 120) -> Series:
    recs = crawl.records
    sent = [r for r in recs if r.get("outcome") in SENT and r.get("fetched_at")]
    starts = np.array([float(r["fetched_at"]) for r in sent])
    ends = starts + np.array([float(r.get("elapsed_s") or 0.0) for r in sent])
    t0 = float(starts.min()) if len(starts) else 0.0
    span = max(float(ends.max()) - t0, 1e-3) if len(ends) else 1.0
    width = max(span / bins, 0.05)
    edges = np.arange(0.0, span + width, width)
    done = ends[[r.get("outcome") != "failed" for r in sent]] - t0 if len(sent) else ends
    counts, _ = np.histogram(done, bins=edges)
    busy = _busy_seconds(np.sort(starts - t0), edges) - _busy_seconds(np.sort(ends - t0), edges)
    by_host: dict[str, list[float]] = {}
    for r in sent:
        by_host.setdefault(str(r.get("host")), []).append(float(r["fetched_at"]))
    waits = [g for ts in by_host.values() for g in np.diff(sorted(ts))]
    return Series(
        t=edges[:-1], pages_per_s=counts / width, in_flight=np.diff(busy) / width,
        statuses=Counter(str(r.get("status") or r.get("error") or "none") for r in sent),
        outcomes=Counter(str(r.get("outcome")) for r in recs),
        host_pages=Counter(str(r.get("host")) for r in recs if r.get("outcome") == "fetched"),
        host_errors=Counter(str(r.get("host")) for r in recs if _is_error(r)),
        waits_s=np.array(waits, dtype=float),
        depths=Counter(int(r.get("depth") or 0) for r in recs),
        dup_kinds=Counter(str(r["dup_kind"]) for r in recs if r.get("dup_kind")),
        mirrors=Counter((str(r.get("host")), str(r["mirror_of"]))
                        for r in recs if r.get("mirror_of")),
    )


def _is_error(r: dict) -> bool:
    """A URL that failed, or whose final answer was a 4xx/5xx."""
    return r.get("outcome") == "failed" or int(r.get("status") or 0) >= 400


def _busy_seconds(points: np.ndarray, at: np.ndarray) -> np.ndarray:
    """For each instant in ``at``: the sum over sorted ``points`` p <= t of (t - p).

    Starts minus ends gives the integral of fetches-in-flight up to t, so a bin's mean is
    exact even when every fetch is far shorter than a bin (sampling would miss them)."""
    k = np.searchsorted(points, at, side="right")
    prefix = np.concatenate(([0.0], np.cumsum(points)))
    return k * at - prefix[k]
