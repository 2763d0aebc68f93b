"""Outputs of bench/freshness.py: PNG plots (freshness, age and delay over simulated time per
policy; estimator error per rate bucket) and a Markdown report embedding them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.freshness_driver import DriveResult
from bench.freshness_truth import Measures, binned_delay

HOUR_S = 3600.0
ESTIMATORS = ("naive", "bias_reduced", "mle", "planner")


def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Running mean over ``window`` points (shorter at the ends), so that 11 noisy lines
    stay readable."""
    if window <= 1 or y.size < window:
        return y
    kernel = np.ones(window)
    return np.convolve(y, kernel, "same") / np.convolve(np.ones_like(y), kernel, "same")


def _over_time(out: Path, name: str, ylabel: str, series: dict[str, tuple[Any, Any]],
               fork_sim: float, window: int = 1, log: bool = False) -> str:
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for k, (policy, (x, y)) in enumerate(series.items()):
        ax.plot((x - fork_sim) / HOUR_S, _smooth(np.asarray(y, dtype=float), window),
                label=policy, lw=1.2, ls="--" if "+oracle" in policy else "-",
                color=f"C{k % 10}")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("simulated hours after the warm-up" + (f" (running mean of {window} points)"
                                                         if window > 1 else ""))
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=110)
    plt.close(fig)
    return f"{name}.png"


def _estimators(out: Path, tables: dict[str, dict[str, dict[str, float]]]) -> str:
    fig, axes = plt.subplots(1, len(tables), figsize=(11, 4.2), sharey=True)
    for ax, (kind, table) in zip(axes, tables.items(), strict=True):
        buckets = [b for b in table if b not in ("never", "other")]
        width = 0.8 / len(ESTIMATORS)
        for k, est in enumerate(ESTIMATORS):
            ax.bar([i + k * width for i in range(len(buckets))],
                   [table[b][est] for b in buckets], width, label=est)
        ax.set_xticks([i + 0.3 for i in range(len(buckets))], buckets, fontsize=8)
        ax.set_title(f"{kind} visits (pages: {sum(table[b]['pages'] for b in buckets)})")
        ax.set_xlabel("true mean time between changes")
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("mean |estimate − λ| / λ")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "estimators.png", dpi=110)
    plt.close(fig)
    return "estimators.png"


def table_md(policies: dict[str, dict[str, Any]]) -> str:
    rows = ["| policy | mean freshness | mean age (sim h) | mean delay (sim h) | censored "
            "changes | visits (share of budget) | probes | closed-form F̄ on true λ |",
            "|---|---|---|---|---|---|---|---|"]
    for name, r in policies.items():
        oracle = r.get("oracle_freshness")
        rows.append(f"| {name} | {r['mean_freshness']:.3f} | {r['mean_age_s'] / HOUR_S:.2f} | "
                    f"{r['mean_delay_s'] / HOUR_S:.2f} | {r['censored_changes']} of "
                    f"{r['changes']} | {r['visits']} ({r['budget_used']:.2f}) | {r.get('probes', 0)} | "
                    f"{'' if oracle is None else f'{oracle:.3f}'} |")
    return "\n".join(rows)


def estimator_md(tables: dict[str, dict[str, dict[str, float]]]) -> str:
    rows = []
    for kind, table in tables.items():
        rows += [f"\n{kind} visits: mean relative error (pages that never change: mean "
                 "estimate in changes per simulated day)\n",
                 "| true interval | pages | " + " | ".join(ESTIMATORS) + " |",
                 "|---|---|" + "---|" * len(ESTIMATORS)]
        rows += [f"| {b} | {r['pages']} | " + " | ".join(f"{r[e]:.2f}" for e in ESTIMATORS)
                 + " |" for b, r in table.items()]
    return "\n".join(rows)


def write_outputs(out: Path, result: DriveResult, numbers: dict[str, Any],
                  measures: dict[str, Measures]) -> None:
    fork = result.fork_sim
    fresh = _over_time(out, "freshness", "freshness F(t)",
                       {p: (m.grid, m.freshness) for p, m in measures.items()}, fork, 15)
    age = _over_time(out, "age", "mean age A(t), simulated hours",
                     {p: (m.grid, m.age / HOUR_S) for p, m in measures.items()}, fork, 15,
                     log=True)
    delay = _over_time(out, "delay", "mean delay of the changes, simulated hours",
                       {p: (x, y / HOUR_S) for p, m in measures.items()
                        for x, y in [binned_delay(m, m.grid)]}, fork, log=True)
    est = _estimators(out, numbers["estimators"])
    spec, server = numbers["spec"], numbers["server"]
    text = f"""# Revisit policies on the changing sandbox web

`{numbers.get('command', 'python -m bench.freshness')}`

{numbers['pages']['count']} pages ({numbers['pages']['changing']} really changing), seed
{spec['seed']}, {spec['sim_days']} simulated days on the driver's own clock (HTTP dates to
{spec['accel']:g} simulated seconds; the first
{spec['warmup_share']:.0%} a shared warm-up of uniform visits, the next
{spec.get('unscored_share', 0):.0%} every policy on its own rule, unscored), budget
{spec['budget_per_sim_h']:g} visits per simulated hour per policy, replanning every
{spec['replan_sim_h']:g} simulated hours. Figures are measured over the rest against the web's
ground truth (only content changes make a copy stale); the plots count hours from the
warm-up's end. {numbers['requests']} HTTP requests; the web server used
{server['cpu_s']} s of CPU in {server['wall_s']} s ({server['cpu_share']:.0%} of a core).

{table_md(numbers['policies'])}

![freshness]({fresh})

![age]({age})

![delay]({delay})

## Estimators against the true rates

![estimators]({est})
{estimator_md(numbers['estimators'])}
"""
    (out / "report.md").write_text(text)
