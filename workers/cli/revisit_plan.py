"""``trawl revisit-plan``: each page's visit frequency under a revisit policy, and the
freshness, age and delay the whole set can expect (freshness/, the closed forms of TODS 2003).

Rates and the budget share one time unit (changes and visits per day, say); age and delay come
out in it. The tool sizes a crawl: how many visits per day keep a set of pages how fresh.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, TextIO

from frontier.config import ConfigError

POLICIES = ("fixed", "uniform", "proportional", "sqrt", "freshness", "age")


def add_revisit_plan_parser(sub: Any) -> None:
    p = sub.add_parser("revisit-plan", help="visit frequencies of pages with known change "
                       "rates under a budget, and the expected freshness, age and delay")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--rates", help="change rates, comma-separated (changes per time unit)")
    src.add_argument("--rates-file", help="file with one change rate per line "
                     "('#' comments and blank lines skipped)")
    p.add_argument("--weights", help="importance weights, comma-separated (default all 1)")
    p.add_argument("--budget", type=float, help="visits per time unit for the whole set")
    p.add_argument("--policy", choices=POLICIES, default="freshness")
    p.add_argument("--interval", type=float,
                   help="the fixed policy's interval between visits (time units)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--summary", action="store_true", help="only the set's figures, no pages")


def _numbers(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ConfigError(f"--{what}: not a comma-separated list of numbers ({exc})") from exc


def _rates_file(path: str) -> list[float]:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"Cannot read --rates-file {path}: {exc}") from exc
    rates = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            rates.append(float(text))
        except ValueError as exc:
            raise ConfigError(f"--rates-file {path}, line {number}: {line!r} is not a "
                              "number") from exc
    return rates


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None  # JSON has no infinity: null = never seen


def plan_document(plan: Any, pages: bool) -> dict[str, Any]:
    """The plan as a JSON-ready dict (infinite age or delay as null)."""
    doc: dict[str, Any] = {
        "policy": plan.policy.value, "pages": int(plan.rates.size),
        "budget_used": plan.budget_used, "mean_freshness": plan.mean_freshness,
        "mean_age": _finite(plan.mean_age), "mean_delay": _finite(plan.mean_delay),
        "mu": plan.mu}
    if pages:
        fresh, age, delay = plan.page_figures()
        doc["per_page"] = [
            {"rate": float(r), "weight": float(w), "frequency": float(f),
             "freshness": float(fr), "age": _finite(float(a)), "delay": _finite(float(d))}
            for r, w, f, fr, a, d in zip(plan.rates, plan.weights, plan.frequencies, fresh,
                                         age, delay, strict=True)]
    return doc


def print_plan(plan: Any, pages: bool, out: TextIO) -> None:
    if pages:
        fresh, age, delay = plan.page_figures()
        out.write(f"{'page':>6} {'rate':>10} {'frequency':>10} {'interval':>10} "
                  f"{'freshness':>9} {'age':>10} {'delay':>10}\n")
        for i, (r, f, fr, a, d) in enumerate(zip(plan.rates, plan.frequencies, fresh, age,
                                                 delay, strict=True)):
            interval = 1.0 / f if f > 0 else math.inf
            out.write(f"{i:>6} {r:>10.4g} {f:>10.4g} {interval:>10.4g} {fr:>9.4f} "
                      f"{a:>10.4g} {d:>10.4g}\n")
    out.write(f"policy {plan.policy.value}: {plan.rates.size} pages, {plan.budget_used:.6g} "
              f"visits per time unit\n")
    out.write(f"mean freshness {plan.mean_freshness:.4f}  mean age {plan.mean_age:.4g}  "
              f"mean delay per change {plan.mean_delay:.4g}\n")


def cmd_revisit_plan(args: argparse.Namespace) -> int:
    from freshness.policies import PlanError, plan

    rates = _numbers(args.rates, "rates") if args.rates else _rates_file(args.rates_file)
    weights = _numbers(args.weights, "weights") if args.weights else None
    interval = args.interval
    if args.policy == "fixed" and interval is None and args.budget:
        interval = len(rates) / args.budget  # the budget spread evenly
    try:
        result = plan(rates, args.budget, args.policy, weights, interval)
    except PlanError as exc:
        raise ConfigError(str(exc)) from exc
    if args.json:
        json.dump(plan_document(result, not args.summary), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print_plan(result, not args.summary, sys.stdout)
    return 0
