"""The scoring of bench/freshness_crawl.py: freshness, age, delay and decision matching from a
crawl's JSONL visit records, checked on a hand-made record list whose figures are worked out by
hand, and against the changing web's own ground truth (ChangeModel.is_current / age on a grid)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from bench.freshness_crawl_score import Window, score
from sandbox import SandboxConfig, SandboxSite
from sandbox.change_model import ChangeModel


class HandTruth:
    """Real change times per URL, written by hand."""

    def __init__(self, changes: dict[str, list[float]]) -> None:
        self.changes = changes

    def change_times(self, url: str, t0: float, t1: float) -> Sequence[float]:
        return [c for c in self.changes.get(url, []) if t0 < c <= t1]


def _rec(url: str, t: float, status: int | None = 200, changed: bool | None = None,
         by: str = "changed", revisit: bool = False) -> dict[str, Any]:
    r: dict[str, Any] = {"url": url, "fetched_at": t, "status": status}
    if status in (200, 304):
        r["change"] = {"changed": bool(changed), "by": by}
    if revisit:
        r["revisit"] = True
    return r


RECORDS = [
    _rec("a", 0.0), _rec("a", 10.0, changed=True, revisit=True),
    _rec("a", 20.0, changed=False, by="similar", revisit=True),  # misses the change at 15
    _rec("b", 2.0), _rec("b", 28.0, changed=True, revisit=True),
    _rec("c", 15.0),  # first found inside the window: left out
    _rec("d", 1.0),  # never changes
    _rec("d", 5.0, status=None, revisit=True),  # a failed revisit: no visit, still spent
    {"url": "e", "fetched_at": 3.0, "status": 404},  # not a tracked page
]
TRUTH = HandTruth({"a": [5.0, 15.0, 25.0], "b": [12.0], "c": [16.0]})


def test_figures_worked_out_by_hand() -> None:
    s = score(RECORDS, TRUTH, Window(10.0, 30.0))
    assert (s.pages, s.late_pages, s.window_s) == (3, 1, 20.0)
    # fresh seconds a 5 + 5, b 2 + 2, d 20, over 3 pages x 20 s
    assert s.mean_freshness == pytest.approx(34 / 60)
    # ∫ age: a (15..20) 12.5 + (25..30) 12.5, b (12..28) 128
    assert s.mean_age_s == pytest.approx(153 / 60)
    # a's change at 15 seen at 20, at 25 never (5 to the end, censored); b's at 12 seen at 28
    assert (s.changes, s.censored_changes) == (3, 1)
    assert s.mean_delay_s == pytest.approx(26 / 3)
    assert s.visits_in_window == 2
    assert (s.revisits, s.fetches) == (4, 9)
    d = s.decisions
    assert (d.true_changed, d.false_changed, d.missed, d.true_unchanged) == (2, 0, 1, 0)
    assert d.accuracy == pytest.approx(2 / 3)
    assert d.by_basis["similar"] == {"missed": 1}


def test_a_visit_at_the_change_sees_it_and_renews_the_copy() -> None:
    """Negative control on the rules: move b's revisit onto its change and the delay is 0;
    drop it and b stays stale to the end, its change censored."""
    at = [r if r["url"] != "b" or r["fetched_at"] < 20 else _rec("b", 12.0, changed=True,
                                                                   revisit=True)
          for r in RECORDS]
    s = score(at, TRUTH, Window(10.0, 30.0))
    assert s.mean_delay_s == pytest.approx((5 + 5 + 0) / 3)
    assert s.mean_freshness == pytest.approx((10 + 20 + 20) / 60)
    dropped = [r for r in RECORDS if not (r["url"] == "b" and r["fetched_at"] > 20)]
    s = score(dropped, TRUTH, Window(10.0, 30.0))
    assert (s.changes, s.censored_changes) == (3, 2)
    assert s.mean_age_s == pytest.approx((25 + 18**2 / 2) / 60)


def test_agrees_with_the_change_model_on_a_grid() -> None:
    """On a real changing web's truth and random visits, the exact integrals match the mean of
    ChangeModel.is_current / age over a fine grid."""
    config = SandboxConfig(seed=5, hosts=12, pages_per_host=10, ips=2, changes=True,
                           change_share=0.8, time_acceleration=60.0,
                           change_min_interval_s=60.0, change_max_interval_s=3600.0)
    site = SandboxSite(config, 8080)
    model = ChangeModel(config, 0.0, site.layout)
    rng = random.Random(1)
    urls = site.page_urls()[:20]
    records = [_rec(u, t, changed=False, revisit=k > 0) for u in urls
               for k, t in enumerate(sorted([rng.uniform(0, 20)]
                                            + [rng.uniform(0, 60) for _ in range(4)]))]
    w = Window(20.0, 60.0)
    s = score(records, model, w)
    copies = {u: sorted(r["fetched_at"] for r in records if r["url"] == u) for u in urls}
    grid = [w.start + (i + 0.5) * (w.end - w.start) / 400 for i in range(400)]
    fresh = age = 0.0
    for u, times in copies.items():
        for t in grid:
            last = max(v for v in times if v <= t)
            fresh += model.is_current(u, last, t)
            age += model.age(u, last, t)
    assert s.pages == len(urls)
    assert s.mean_freshness == pytest.approx(fresh / (len(urls) * len(grid)), abs=0.01)
    assert s.mean_age_s == pytest.approx(age / (len(urls) * len(grid)), rel=0.02, abs=0.01)
    assert 0.05 < s.mean_freshness < 0.95, "the web should be neither frozen nor always stale"
