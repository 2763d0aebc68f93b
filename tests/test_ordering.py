"""Crawl ordering against the sandbox's PageRank ground truth (issue 6), small scale.

The full figure (3 generator seeds, 200 hosts x 100 pages) is ``bench/ordering``; this runs
the same script on smaller webs so a change that breaks a priority fails CI. A crawl's order
depends on timing (two workers, eight threads), so one seed's figures move from run to run:
the test compares means over two seeds with a margin that a broken priority (one that behaves
like bfs or random) cannot clear. The webs are 100 hosts x 60 pages: on 60 x 50, OPIC (which
keeps no cash for pages already fetched) sometimes locked onto a poor cluster early (one run
in ~8 of seed 5: opic 0.20 against bfs 0.41, in CI and here); on 100 x 60, six runs of seeds
5 and 7 gave opic 0.598-0.658 against bfs 0.495-0.566 (2026-12-03).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent
SEEDS = ["5", "7"]
MARGIN = 0.03


def test_indegree_and_opic_beat_bfs_which_beats_random(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ordering.py"), "--seeds", *SEEDS, "--hosts", "100",
         "--pages-per-host", "60", "--out", str(tmp_path), "--timeout", "120"],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads((tmp_path / "ordering.json").read_text())
    runs = [res["seeds"][s]["orderings"] for s in SEEDS]
    for per in runs:
        assert all(per[o]["complete"] for o in per), per
    share = {o: sum(per[o]["top10_share_at"] for per in runs) / len(runs) for o in runs[0]}
    print(share)
    assert share["indegree"] > share["bfs"] + MARGIN
    assert share["opic"] > share["bfs"] + MARGIN
    assert share["bfs"] > share["random"] + MARGIN
