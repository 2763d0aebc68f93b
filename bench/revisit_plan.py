"""Planning time of every revisit policy for 1,000,000 URLs (issue 19: "it must plan a million
URLs in seconds"). Not a test; prints a table and writes bench/results/revisit-plan-*.json.

Rates are log-uniform from one change a week to one a minute (per second), the budget is a
fraction of the total change rate; each figure is the best of --rounds wall-clock runs.

    .venv/bin/python bench/revisit_plan.py [--urls 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from freshness.policies import Policy, plan

WEEK_S, MINUTE_S = 7 * 86400.0, 60.0


def timed(rates: np.ndarray, budget: float, policy: Policy, weights: np.ndarray | None,
          rounds: int) -> dict[str, Any]:
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        result = plan(rates, budget, policy, weights, interval=rates.size / budget)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    assert result is not None
    return {"policy": policy.value, "weighted": weights is not None, "seconds": round(best, 3),
            "cpu_seconds": round(best_cpu, 3), "budget_used": result.budget_used,
            "visited": int((result.frequencies > 0).sum()),
            "mean_freshness": result.mean_freshness,
            "mean_age_s": result.mean_age if np.isfinite(result.mean_age) else None,
            "mean_delay_s": result.mean_delay if np.isfinite(result.mean_delay) else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-share", type=float, default=0.05,
                    help="budget as a share of the total change rate (default 0.05)")
    args = ap.parse_args()
    rng = np.random.default_rng(19)
    rates = np.exp(rng.uniform(np.log(1 / WEEK_S), np.log(1 / MINUTE_S), args.urls))
    weights = rng.lognormal(0.0, 1.0, args.urls)
    budget = args.budget_share * float(rates.sum())
    rows = [timed(rates, budget, p, None, args.rounds) for p in Policy]
    rows += [timed(rates, budget, p, weights, args.rounds)
             for p in (Policy.FRESHNESS, Policy.AGE)]
    print(f"{args.urls:,} URLs, budget {budget:.1f} visits/s "
          f"({args.budget_share:.0%} of {rates.sum():.1f} changes/s), best of {args.rounds}")
    print(f"{'policy':<14}{'weights':>8}{'seconds':>9}{'cpu s':>8}{'visited':>10}"
          f"{'freshness':>11}{'age s':>10}{'delay s':>10}")
    for r in rows:
        age = f"{r['mean_age_s']:.0f}" if r["mean_age_s"] is not None else "inf"
        delay = f"{r['mean_delay_s']:.0f}" if r["mean_delay_s"] is not None else "inf"
        print(f"{r['policy']:<14}{'yes' if r['weighted'] else 'no':>8}{r['seconds']:>9.3f}"
              f"{r['cpu_seconds']:>8.3f}{r['visited']:>10,}{r['mean_freshness']:>11.4f}"
              f"{age:>10}{delay:>10}")
    out = Path(__file__).resolve().parent / "results" / \
        f"revisit-plan-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"urls": args.urls, "budget": budget, "rounds": args.rounds,
                               "cores": os.cpu_count(), "python": platform.python_version(),
                               "numpy": np.__version__, "rows": rows}, indent=1))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
