"""Revisit policies measured through the crawler itself (issue 19): for each policy, a real
`trawl crawl --continuous` (its own embedded Redis, real Celery worker processes, host queues,
politeness, the Redis revisit schedule, the real change detection) on a fresh changing
sandbox web of the same seed; the crawl's JSONL visit records are scored against the web's
ground truth (bench/freshness_crawl_score.py). JSON and a Markdown table in --out.

    python -m bench.freshness_crawl [--seed 1] [--minutes 2] [--budget 8]
        [--policies uniform,proportional,sqrt,freshness,age,adaptive]
        [--out bench/results/freshness-crawl]

Fairness: the change model is a function of simulated time since the web's epoch, and each
policy gets a web started just before its crawl (its epoch), so every policy faces the same
change realisation over the same window relative to its start; the measurement window is the
same span after the epoch for every policy.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.freshness_crawl_score import Window, score
from freshness.revisit import RevisitPolicy
from sandbox import SandboxConfig, SandboxWeb

DEFAULT_POLICIES = "uniform,proportional,sqrt,freshness,age,adaptive"


@dataclass(frozen=True)
class CrawlBenchSpec:
    seed: int = 1
    minutes: float = 2.0
    #: revisits a second, crawl-wide (revisit_budget_pages_s)
    budget: float = 8.0
    accel: float = 60.0
    #: a changing page's mean time between changes, simulated s (1 min to 10 h: 1 s to 10 min
    #: wall at 60x)
    change_min_s: float = 60.0
    change_max_s: float = 36000.0
    hosts: int = 12
    pages_per_host: int = 10
    host_delay_s: float = 0.2
    workers: int = 1
    partitions: int = 4
    replan_s: float = 10.0
    #: the window starts at this share of the run (see the report for the rule)
    window_from: float = 0.5

    @property
    def seconds(self) -> float:
        return self.minutes * 60.0


def web_config(spec: CrawlBenchSpec) -> SandboxConfig:
    return SandboxConfig(seed=spec.seed, hosts=spec.hosts, pages_per_host=spec.pages_per_host,
                         ips=3, changes=True, change_share=0.7, cosmetic_share=0.2,
                         time_acceleration=spec.accel, change_min_interval_s=spec.change_min_s,
                         change_max_interval_s=spec.change_max_s, slow_page_s=0.05,
                         robots_slow_s=0.05, hang_s=1.0, crawl_delay_s=0.2)


def crawl_settings(spec: CrawlBenchSpec, web: SandboxWeb, policy: str) -> dict[str, Any]:
    """The crawl's settings (docs/freshness.md); intervals in wall seconds: the crawler knows
    nothing of the web's acceleration."""
    return dict(
        allow_private_ips=True, static_hosts=web.resolver_map,
        allowed_domains=[web.config.domain], soft404_probe=False, ip_concurrency=0,
        host_delay_s=spec.host_delay_s, adaptive_delay_factor=0.0, max_delay_s=1.0,
        connect_timeout_s=1.0, read_timeout_s=1.5, total_timeout_s=2.0, max_retries=0,
        revisit_policy=policy, revisit_budget_pages_s=spec.budget, revisit_burst_s=2.0,
        revisit_min_interval_s=0.5, revisit_max_interval_s=spec.seconds / 2,
        revisit_fixed_interval_s=10.0, revisit_replan_s=spec.replan_s,
        revisit_expected_urls=1000)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (/proc/<pid>/stat, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(glob.glob(str(out / "records" / "*.jsonl")))
            for line in Path(f).read_text().splitlines() if line.strip()]


def run_policy(spec: CrawlBenchSpec, policy: str, work: Path) -> dict[str, Any]:
    """One policy: a fresh web, a `trawl crawl --continuous` subprocess for ``spec.seconds``,
    then its records scored from the web's start (its epoch)."""
    out = work / policy
    with SandboxWeb(web_config(spec), work / f"web-{policy}.log") as web:
        assert web.changes is not None
        epoch = web.change_epoch
        cmd = [sys.executable, "-m", "workers.cli", "crawl", "--namespace", f"fc-{policy}",
               "--workers", str(spec.workers), "--concurrency", "16",
               "--partitions", str(spec.partitions), "--continuous",
               "--time-limit", str(spec.seconds), "--output", str(out), "--no-progress",
               *(a for k, v in crawl_settings(spec, web, policy).items()
                 for a in ("--set", f"{k}={json.dumps(v)}")), *web.seeds]
        cpu0, t0 = cpu_seconds(web.pid), time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=spec.seconds + 120)
        wall = time.time() - t0
        server = {"cpu_s": round(cpu_seconds(web.pid) - cpu0, 2), "wall_s": round(wall, 1)}
        server["cpu_share"] = round(server["cpu_s"] / wall, 3)
        if proc.returncode != 0:
            raise RuntimeError(f"crawl for {policy} failed ({proc.returncode}): "
                               f"{proc.stderr[-2000:]}")
        records = read_records(out)
        if not records:
            raise RuntimeError(f"crawl for {policy} wrote no records: {proc.stderr[-2000:]}")
        first = min(r["fetched_at"] for r in records)
        window = Window(epoch + spec.window_from * spec.seconds, epoch + spec.seconds)
        s = score(records, web.changes, window)
    summary = json.loads((out / "summary.json").read_text()) \
        if (out / "summary.json").exists() else {}
    statuses: dict[str, int] = {}
    for r in records:
        statuses[str(r.get("status"))] = statuses.get(str(r.get("status")), 0) + 1
    first_pass_end = max(min(r["fetched_at"] for r in records if r["url"] == u)
                         for u in {r["url"] for r in records if "change" in r})
    return {**s.as_dict(), "server": server, "statuses": statuses,
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
            "first_fetch_after_epoch_s": round(first - epoch, 2),
            "first_pass_end_after_epoch_s": round(first_pass_end - epoch, 2),
            "last_fetch_after_epoch_s": round(max(r["fetched_at"] for r in records) - epoch, 2),
            "revisits_per_s": round(s.revisits / (max(r["fetched_at"] for r in records)
                                                  - first), 3),
            "crawl_summary": {k: v for k, v in summary.items() if isinstance(v, (int, float))}}


def table(results: dict[str, dict[str, Any]], spec: CrawlBenchSpec) -> str:
    rows = ["| policy | mean freshness | mean age (s) | mean delay (s) | censored changes | "
            "visits in window | revisits (per s) | change decision right | web CPU |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        d = r["decisions"]
        rows.append(
            f"| {name} | {r['mean_freshness']:.3f} | {r['mean_age_s']:.2f} | "
            f"{r['mean_delay_s']:.2f} | {r['censored_changes']} of {r['changes']} | "
            f"{r['visits_in_window']} | {r['revisits']} ({r['revisits_per_s']:.2f}) | "
            f"{d['accuracy']:.3f} of {d['total']} (missed {d['missed']}, false "
            f"{d['false_changed']}) | {r['server']['cpu_s']:.1f} s "
            f"({100 * r['server']['cpu_share']:.0f}%) |")
    return "\n".join(rows) + (
        f"\n\nSeed {spec.seed}, {spec.minutes:g} min a policy, budget {spec.budget:g} "
        f"revisits/s, {spec.hosts}x{spec.pages_per_host} pages at {spec.accel:g}x; window "
        f"from {spec.window_from:g} of the run to its end; times in wall seconds "
        f"(x{spec.accel:g} for simulated).\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = CrawlBenchSpec()
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--minutes", type=float, default=d.minutes, help="wall minutes per policy")
    ap.add_argument("--budget", type=float, default=d.budget, help="revisits a second")
    ap.add_argument("--policies", default=DEFAULT_POLICIES)
    ap.add_argument("--out", type=Path, default=Path("bench/results/freshness-crawl"))
    args = ap.parse_args(argv)
    policies = [RevisitPolicy(p).value for p in args.policies.split(",") if p]
    spec = CrawlBenchSpec(seed=args.seed, minutes=args.minutes, budget=args.budget)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for policy in policies:
            t = time.time()
            results[policy] = run_policy(spec, policy, Path(tmp))
            print(f"{policy}: F={results[policy]['mean_freshness']:.3f} "
                  f"({time.time() - t:.0f} s)", file=sys.stderr, flush=True)
    command = "python -m bench.freshness_crawl " + " ".join(argv or sys.argv[1:])
    (args.out / "freshness-crawl.json").write_text(json.dumps(
        {"spec": asdict(spec), "command": command, "mode": "trawl crawl --continuous subprocess",
         "policies": results}, indent=2))
    md = table(results, spec)
    (args.out / "report.md").write_text(f"# Policies through the crawler\n\n`{command}`\n\n{md}")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
