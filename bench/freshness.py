"""Every revisit policy on the same changing sandbox web, at the same budget, over the same
simulated time (issue 19): freshness, age and delay per policy from the web's ground truth,
estimator errors against the true rates, the web server's CPU; JSON, PNG plots and a Markdown
report in --out.

    python -m bench.freshness [--seed 1] [--pages 120] [--sim-days 7] [--accel 2400]
                              [--budget 20] [--out bench/results/freshness]

--budget is in visits per simulated hour for the whole page set, per policy. The first
warmup_share of the simulated time is a shared warm-up of uniform visits; then every policy
follows its own rule, the next --unscored-share unscored (learning), and the figures are
measured over the rest. bench/freshness_driver.py drives the visits, bench/freshness_truth.py
measures, bench/freshness_report.py writes the outputs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from bench.freshness_driver import Driver, DriveResult, DriveSpec, Target, new_session
from bench.freshness_truth import Changes, changes_of, estimator_errors, measure
from freshness.explore import ProbeRule
from freshness.policies import plan
from freshness.revisit import RevisitPolicy
from sandbox import SandboxConfig, SandboxSite, SandboxWeb
from sandbox.change_model import ChangeModel

ALL_POLICIES = list(RevisitPolicy)
#: The policies that use rates, run again with the true rates by default.
ORACLE_POLICIES = [RevisitPolicy.PROPORTIONAL, RevisitPolicy.SQRT, RevisitPolicy.FRESHNESS,
                   RevisitPolicy.AGE]
HOUR_S, DAY_S = 3600.0, 86400.0
#: Simulated second 0 under the driver's clock (2025-06-15, a whole second): HTTP dates have a
#: resolution of one wall second, so an epoch taken from the clock would move every
#: Last-Modified by its fraction and a run would not be a function of its seed alone.
VIRTUAL_EPOCH = 1_750_000_000.0


@dataclass(frozen=True)
class BenchSpec:
    seed: int = 1
    pages: int = 120
    sim_days: float = 7.0
    accel: float = 2400.0
    budget_per_sim_h: float = 20.0
    warmup_share: float = 0.25
    #: Share of the simulated time, right after the warm-up, that every policy runs its own
    #: rule unscored (learning), so that the figures are of the policies, not their start.
    unscored_share: float = 0.25
    replan_sim_h: float = 6.0
    min_interval_s: float = 60.0
    max_interval_s: float = 2 * DAY_S
    use_last_modified: bool = True
    #: Probe censored histories (freshness/explore.py) under the rate-driven policies.
    probe: bool = True

    def drive_spec(self) -> DriveSpec:
        total = self.sim_days * DAY_S
        return DriveSpec(budget_per_sim_s=self.budget_per_sim_h / HOUR_S,
                         warmup_sim_s=self.warmup_share * total,
                         run_sim_s=(1 - self.warmup_share) * total,
                         replan_sim_s=self.replan_sim_h * HOUR_S,
                         min_interval_s=self.min_interval_s, max_interval_s=self.max_interval_s,
                         use_last_modified=self.use_last_modified, seed=self.seed,
                         probe=ProbeRule() if self.probe else None,
                         unscored_sim_s=self.unscored_share * total)


def web_config(spec: BenchSpec) -> SandboxConfig:
    """A changing web with enough ordinary pages; slow pages and the hanging host are left
    out of the page set, and answer quickly anyway."""
    return SandboxConfig(seed=spec.seed, hosts=max(12, spec.pages // 20), pages_per_host=30,
                         ips=4, changes=True, change_share=0.7, time_acceleration=spec.accel,
                         virtual_clock=True, change_epoch=VIRTUAL_EPOCH,
                         slow_page_s=0.05, robots_slow_s=0.05, hang_s=1.0, page_cache=8192)


@dataclass(frozen=True)
class WebAddress:
    """What a driver process needs of a running web: where it listens and its epoch."""

    port: int
    resolver_map: dict[str, str]
    epoch: float


def target_of(spec: BenchSpec, address: WebAddress) -> Target:
    """The page set (seeded sample of the ordinary pages) and the web's ground truth,
    rebuilt from the config (a driver process has no SandboxWeb)."""
    config = web_config(spec)
    site = SandboxSite(config, address.port)
    model = ChangeModel(config, address.epoch, site.layout)
    excluded = set(site.slow_urls())
    hang = site.hang_host
    urls = [u for u in site.page_urls() if u not in excluded and f"//{hang}" not in u]
    if len(urls) < spec.pages:
        raise ValueError(f"the web has {len(urls)} usable pages, fewer than {spec.pages}")
    return Target(model, tuple(sorted(random.Random(spec.seed).sample(urls, spec.pages))),
                  address.port, address.resolver_map)


async def _drive(target: Target, spec: BenchSpec, policies: list[RevisitPolicy],
                 oracles: list[RevisitPolicy]) -> DriveResult:
    async with new_session() as session:
        return await Driver(target, spec.drive_spec(), session).drive(policies, oracles)


def drive_in_process(spec: BenchSpec, address: WebAddress, policies: list[RevisitPolicy],
                     oracles: list[RevisitPolicy]) -> DriveResult:
    """One web's driver, in a process of its own (webs driven at once then use every core
    instead of sharing one event loop)."""
    return asyncio.run(_drive(target_of(spec, address), spec, policies, oracles))


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (/proc/<pid>/stat, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summarise(result: DriveResult, model: ChangeModel, spec: BenchSpec,
              changes: Changes | None = None) -> dict[str, Any]:
    """Per policy: the measured figures, visits made, outcomes, errors, and the closed-form
    expectation of the policy's plan on the true rates (an oracle's view, for scale)."""
    changes = changes or changes_of(model, result)
    budget = spec.budget_per_sim_h / HOUR_S
    span = result.end_sim - result.fork_sim
    out: dict[str, Any] = {}
    for name, run in result.runs.items():
        m = measure(result, run, changes)
        outcomes: dict[str, int] = {}
        for _, _, o in run.visits:
            outcomes[o.value] = outcomes.get(o.value, 0) + 1
        row: dict[str, Any] = {**m.summary(), "visits": len(run.visits),
                               "budget_used": len(run.visits) / (budget * span),
                               "outcomes": outcomes, "errors": dict(run.errors),
                               "replans": run.replans, "probes": run.probes}
        policy = run.planner.settings.policy
        if policy is not RevisitPolicy.ADAPTIVE:
            kind = "uniform" if policy is RevisitPolicy.FIXED else policy.value
            oracle = plan(changes.sim_rates, budget, kind)
            row["oracle_freshness"] = oracle.mean_freshness
            row["oracle_age_s"] = oracle.mean_age if np.isfinite(oracle.mean_age) else None
        out[name] = row
    return out


def estimator_tables(result: DriveResult, changes: Changes) -> dict[str, Any]:
    regular = [result.runs[p] for p in ("uniform", "fixed") if p in result.runs]
    irregular = [r for n, r in result.runs.items() if n in ("proportional", "sqrt", "freshness",
                                                             "age", "adaptive", "freshness+oracle",
                                                             "age+oracle", "sqrt+oracle",
                                                             "proportional+oracle")]
    return {"regular": estimator_errors(regular, changes.sim_rates),
            "irregular": estimator_errors(irregular, changes.sim_rates)}


def numbers_of(result: DriveResult, model: ChangeModel, spec: BenchSpec,
               server: dict[str, float], changes: Changes | None = None) -> dict[str, Any]:
    """Everything the JSON reports of one run."""
    t1 = time.process_time()
    changes = changes or changes_of(model, result)
    return {"spec": asdict(spec), "policies": summarise(result, model, spec, changes),
            "estimators": estimator_tables(result, changes), "server": server,
            "requests": len(result.warmup.visits) + sum(len(r.visits)
                                                        for r in result.runs.values()),
            "pages": {"count": len(result.urls),
                      "changing": int((changes.sim_rates > 0).sum())},
            "truth_cpu_s": round(time.process_time() - t1, 2)}


def run_benches(specs: list[BenchSpec], policies: list[RevisitPolicy], log_dir: Path,
                oracles: list[RevisitPolicy] | None = None
                ) -> list[tuple[DriveResult, dict[str, Any], Changes]]:
    """One web per spec, all driven at once (a driver process per web); each web's CPU is read
    before it stops (on a shared machine the webs compete with the drivers and each other)."""
    with ExitStack() as stack:
        webs = [stack.enter_context(SandboxWeb(web_config(s), log_dir / f"web-{k}.log"))
                for k, s in enumerate(specs)]
        cpu0, t0 = [cpu_seconds(w.pid) for w in webs], time.time()
        with ProcessPoolExecutor(len(specs), mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(drive_in_process, s,
                                   WebAddress(w.port, w.resolver_map, w.change_epoch),
                                   policies, oracles or [])
                       for w, s in zip(webs, specs, strict=True)]
            results = [f.result() for f in futures]
        wall = time.time() - t0
        servers = [{"cpu_s": round(cpu_seconds(w.pid) - c, 2), "wall_s": round(wall, 2),
                    "cpu_share": round((cpu_seconds(w.pid) - c) / wall, 3)}
                   for w, c in zip(webs, cpu0, strict=True)]
        models = [w.changes for w in webs]
    out = []
    for result, model, spec, server in zip(results, models, specs, servers, strict=True):
        assert model is not None
        changes = changes_of(model, result)
        out.append((result, numbers_of(result, model, spec, server, changes), changes))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = BenchSpec()
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--pages", type=int, default=d.pages)
    ap.add_argument("--sim-days", type=float, default=d.sim_days)
    ap.add_argument("--accel", type=float, default=d.accel,
                    help="simulated seconds per wall second of the web's HTTP dates (their "
                         "resolution); the driver's own clock sets the pace")
    ap.add_argument("--budget", type=float, default=d.budget_per_sim_h,
                    help="visits per simulated hour for the page set, per policy")
    ap.add_argument("--unscored-share", type=float, default=d.unscored_share,
                    help="share of the simulated time after the warm-up that every policy "
                         "runs unscored (learning)")
    ap.add_argument("--no-last-modified", action="store_true",
                    help="estimate from visit intervals only")
    ap.add_argument("--no-probe", action="store_true",
                    help="do not probe censored histories (plan on the lower bounds)")
    ap.add_argument("--policies", default=",".join(p.value for p in ALL_POLICIES))
    ap.add_argument("--oracles", default=",".join(p.value for p in ORACLE_POLICIES),
                    help="policies also run with the true rates (a control); '' for none")
    ap.add_argument("--out", type=Path, default=Path("bench/results/freshness"))
    args = ap.parse_args(argv)
    spec = BenchSpec(seed=args.seed, pages=args.pages, sim_days=args.sim_days, accel=args.accel,
                     budget_per_sim_h=args.budget, unscored_share=args.unscored_share,
                     use_last_modified=not args.no_last_modified,
                     probe=not args.no_probe)
    policies = [RevisitPolicy(p) for p in args.policies.split(",")]
    oracles = [RevisitPolicy(p) for p in args.oracles.split(",") if p]
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as logs:
        [(result, numbers, changes)] = run_benches([spec], policies, Path(logs), oracles)
    from bench.freshness_report import write_outputs  # matplotlib only when writing

    numbers["command"] = "python -m bench.freshness " + " ".join(argv or sys.argv[1:])
    measures = {name: measure(result, run, changes) for name, run in result.runs.items()}
    write_outputs(args.out, result, numbers, measures)
    print((args.out / "report.md").read_text())
    (args.out / "freshness.json").write_text(json.dumps(numbers, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
