"""Scoring a continuous crawl's JSONL visit records against the changing web's ground truth
(bench/freshness_crawl.py): mean freshness, mean age and mean delay over a measurement window,
the visits spent, and how often the crawler's change decision matched the truth.

Kept apart from the runner so it can be checked on a hand-made record list. The truth is
anything with ``change_times(url, t0, t1)``: the real (content) change times in (t0, t1], wall
seconds, as ``sandbox.change_model.ChangeModel`` gives them. Cosmetic (date-line) changes are
not changes, as in bench/freshness_truth.py.

The rules:
- A *visit* is a record of a tracked page (it has a ``change`` field) with status 200 or 304;
  it renews the copy to the version current at its ``fetched_at``.
- The *page set* is the pages whose first visit came before the window's start: a page first
  found later has no copy for part of the window and is left out (and counted).
- F and A are exact time averages over [start, end] (not a grid): a copy is stale from the
  first change after its visit until the next visit; A(t) is t minus that change.
- Delay: each change in (start, end] waits until the first visit at or after it; a change no
  visit saw counts with the time to ``end`` (a lower bound) and is counted as censored.
- Decisions: a revisit (``revisit`` true) whose ``change.changed`` is compared with whether a
  real change happened between the page's previous visit and this one.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


class Truth(Protocol):
    def change_times(self, url: str, t0: float, t1: float) -> Sequence[float]: ...


@dataclass(frozen=True)
class Window:
    """The measurement window, wall seconds."""

    start: float
    end: float


@dataclass
class Decisions:
    """The crawler's change decisions on revisits against the truth."""

    true_changed: int = 0  # said changed, a real change happened
    false_changed: int = 0  # said changed, none happened (a cosmetic change, a lying host)
    missed: int = 0  # said unchanged, a real change happened
    true_unchanged: int = 0
    by_basis: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.true_changed + self.false_changed + self.missed + self.true_unchanged

    @property
    def accuracy(self) -> float:
        return (self.true_changed + self.true_unchanged) / self.total if self.total else 0.0

    def add(self, said: bool, real: bool, basis: str) -> None:
        key = ("true_changed" if real else "false_changed") if said else \
            ("missed" if real else "true_unchanged")
        setattr(self, key, getattr(self, key) + 1)
        row = self.by_basis.setdefault(basis, {})
        row[key] = row.get(key, 0) + 1


@dataclass
class Score:
    pages: int
    late_pages: int  # first visited after the window's start: left out
    window_s: float
    mean_freshness: float
    mean_age_s: float
    mean_delay_s: float
    changes: int
    censored_changes: int
    visits_in_window: int  # successful visits of the page set in the window
    revisits: int  # revisit records of the whole run (every status)
    fetches: int  # records of the whole run
    decisions: Decisions

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["decisions"]["accuracy"] = self.decisions.accuracy
        out["decisions"]["total"] = self.decisions.total
        return out


def visits_by_url(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each tracked page's successful visits, in time order."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if "change" in r and r.get("status") in (200, 304):
            out[r["url"]].append(r)
    for visits in out.values():
        visits.sort(key=lambda r: r["fetched_at"])
    return dict(out)


def _page_integrals(visits: list[float], changes: list[float], w: Window
                    ) -> tuple[float, float]:
    """(fresh seconds, ∫ age dt) of one page over the window; ``visits`` sorted, the first
    before the window's start; ``changes`` sorted, covering (first visit, end]."""
    fresh = age = 0.0
    for k, v in enumerate(visits):
        s = max(v, w.start)
        e = min(visits[k + 1] if k + 1 < len(visits) else w.end, w.end)
        if e <= s:
            continue
        j = bisect.bisect_right(changes, v)  # first change strictly after the visit
        stale_from = changes[j] if j < len(changes) else float("inf")
        fresh += max(0.0, min(stale_from, e) - s)
        a = max(stale_from, s)
        if a < e:
            age += ((e - stale_from) ** 2 - (a - stale_from) ** 2) / 2
    return fresh, age


def score(records: list[dict[str, Any]], truth: Truth, window: Window) -> Score:
    by_url = visits_by_url(records)
    span = window.end - window.start
    if span <= 0:
        raise ValueError(f"empty window {window}")
    fresh_total = age_total = 0.0
    delays: list[float] = []
    censored = pages = late = in_window = 0
    decisions = Decisions()
    for url, visits in sorted(by_url.items()):
        times = [float(r["fetched_at"]) for r in visits]
        changes = [float(c) for c in truth.change_times(url, times[0], window.end)]
        for prev, cur, rec in zip(times[:-1], times[1:], visits[1:], strict=True):
            if rec.get("revisit"):
                real = bisect.bisect_right(changes, cur) > bisect.bisect_right(changes, prev)
                decisions.add(bool(rec["change"].get("changed")), real,
                              str(rec["change"].get("by", "?")))
        if times[0] > window.start:
            late += 1
            continue
        pages += 1
        f, a = _page_integrals([t for t in times if t <= window.end], changes, window)
        fresh_total += f
        age_total += a
        in_window += sum(1 for t in times if window.start < t <= window.end)
        for c in changes:
            if not window.start < c <= window.end:
                continue
            m = bisect.bisect_left(times, c)
            if m < len(times) and times[m] <= window.end:
                delays.append(times[m] - c)
            else:
                delays.append(window.end - c)
                censored += 1
    return Score(pages=pages, late_pages=late, window_s=span,
                 mean_freshness=fresh_total / (pages * span) if pages else 0.0,
                 mean_age_s=age_total / (pages * span) if pages else 0.0,
                 mean_delay_s=sum(delays) / len(delays) if delays else 0.0,
                 changes=len(delays), censored_changes=censored, visits_in_window=in_window,
                 revisits=sum(1 for r in records if r.get("revisit")), fetches=len(records),
                 decisions=decisions)
