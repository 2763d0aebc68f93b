"""Crawl ordering against the sandbox's PageRank ground truth (issue 6), small scale.

The full figure (3 generator seeds, 200 hosts x 100 pages) is ``bench/ordering``; this runs
the same script on one smaller web so a change that breaks a priority fails CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent


def test_indegree_and_opic_beat_bfs_which_beats_random(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ordering.py"), "--seeds", "5", "--hosts", "60",
         "--pages-per-host", "50", "--out", str(tmp_path), "--timeout", "120"],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads((tmp_path / "ordering.json").read_text())
    per = res["seeds"]["5"]["orderings"]
    share = {o: per[o]["top10_share_at"] for o in per}
    print(share)
    assert all(per[o]["complete"] for o in per), per
    assert share["indegree"] > share["bfs"] + 0.05
    assert share["opic"] > share["bfs"] + 0.05
    assert share["bfs"] > share["random"] + 0.05
