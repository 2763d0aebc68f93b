"""`trawl demo` as a user runs it: a subprocess that crawls, summarizes, leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frontier.redisbloom import module_path

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent

SUMMARY_KEYS = {"pages_fetched", "pages_failed", "urls_admitted", "urls_seen_rejected",
                "robots_blocked", "redirects", "elapsed_s", "pages_per_s", "workers", "partitions"}


def descendants(pid: int) -> set[int]:
    """All live descendants of ``pid``, from the parent links in /proc/<pid>/stat."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    return {p for p in pids if Path(f"/proc/{p}").exists()
            and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]}


def demo(out: Path | None, *extra: str, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """``trawl demo`` on a small web; ``out=None``: its default output dir, relative to cwd."""
    where = ["--output", str(out)] if out is not None else []
    return subprocess.Popen(
        [sys.executable, "-m", "workers.cli", "demo", *where, "--hosts", "16",
         "--pages-per-host", "20", "--ips", "8", "--workers", "2", "--no-progress", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_demo_crawls_and_summarizes(tmp_path: Path) -> None:
    out = tmp_path / "demo-out"
    proc = demo(out, "--summary-json", str(tmp_path / "s.json"))
    time.sleep(3)
    children = descendants(proc.pid)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert "Trawl crawl summary" in stdout.decode()
    summary = json.loads((tmp_path / "s.json").read_text())
    assert set(summary) >= SUMMARY_KEYS
    assert summary["pages_fetched"] > 200
    assert summary["accounted"] == summary["urls_admitted"]
    # The embedded Redis loads RedisBloom when installed (the test extra installs it).
    assert summary["bloom_backend"] == ("redisbloom" if module_path() else "lua")
    assert len(children) >= 4
    assert alive(children) == set()


def test_demo_with_its_default_relative_output_dir(tmp_path: Path) -> None:
    """As the README runs it: no --output, so trawl-demo-out/ relative to the working directory
    (redis-server changes into its --dir before it opens its log: a relative data dir broke)."""
    proc = demo(None, cwd=tmp_path)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert "Trawl crawl summary" in stdout.decode()
    assert (tmp_path / "trawl-demo-out" / "redis" / "redis.log").exists()
    assert list((tmp_path / "trawl-demo-out" / "records").iterdir())


def test_demo_interrupted_leaves_no_process(tmp_path: Path) -> None:
    out = tmp_path / "demo-int"
    proc = demo(out, "--delay", "0.5")
    deadline = time.monotonic() + 60
    records = out / "records"
    while time.monotonic() < deadline:  # wait until workers are really crawling
        if records.exists() and any(p.stat().st_size for p in records.glob("*.jsonl")):
            break
        time.sleep(0.2)
    children = descendants(proc.pid)
    assert len(children) >= 4  # sandbox, redis, two workers (and their threads' processes)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    deadline = time.monotonic() + 20
    while alive(children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive(children) == set()
