"""`trawl revisit-plan` run as a user runs it: a subprocess, its output checked against the
closed forms and the solver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from freshness.closedform import mean_age, mean_delay, mean_freshness
from freshness.policies import plan

ROOT = Path(__file__).resolve().parents[2]


def revisit_plan(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "workers.cli", "revisit-plan", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


@pytest.mark.parametrize("policy", ["uniform", "proportional", "sqrt", "freshness", "age"])
def test_json_matches_the_closed_forms(policy: str) -> None:
    done = revisit_plan("--rates", "1,2,3,4,5", "--budget", "5", "--policy", policy, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    pages = doc["per_page"]
    f = np.array([p["frequency"] for p in pages])
    lam = np.array([p["rate"] for p in pages])
    np.testing.assert_allclose(f, plan(lam, 5.0, policy).frequencies, rtol=1e-9)
    assert doc["budget_used"] == pytest.approx(5.0, rel=1e-8)
    np.testing.assert_allclose([p["freshness"] for p in pages], mean_freshness(f, lam))
    ages = [p["age"] if p["age"] is not None else np.inf for p in pages]
    np.testing.assert_allclose(ages, mean_age(f, lam))
    delays = [p["delay"] if p["delay"] is not None else np.inf for p in pages]
    np.testing.assert_allclose(delays, mean_delay(f, lam))
    assert doc["mean_freshness"] == pytest.approx(float(mean_freshness(f, lam).mean()))
    if policy == "freshness":  # the TODS example: page 5 is never visited, its age unbounded
        assert f[-1] == 0 and doc["mean_age"] is None
        assert [round(x, 2) for x in f] == [1.15, 1.36, 1.35, 1.14, 0.0]


def test_rates_file_and_text_output(tmp_path: Path) -> None:
    rates = tmp_path / "rates.txt"
    rates.write_text("# changes per day\n0.5\n1\n\n2\n")
    done = revisit_plan("--rates-file", str(rates), "--budget", "3", "--policy", "uniform")
    assert done.returncode == 0, done.stderr
    expected = plan([0.5, 1, 2], 3.0, "uniform")
    assert f"mean freshness {expected.mean_freshness:.4f}" in done.stdout
    assert done.stdout.count("\n") == 1 + 3 + 2  # header, 3 pages, 2 summary lines
    fixed = revisit_plan("--rates", "0.5,1,2", "--policy", "fixed", "--interval", "2", "--json",
                         "--summary")
    assert json.loads(fixed.stdout)["budget_used"] == pytest.approx(1.5)


@pytest.mark.parametrize(("args", "message"), [
    (("--rates", "1,x", "--budget", "2"), "not a comma-separated list"),
    (("--rates", "1,-2", "--budget", "2"), "must be finite and >= 0"),
    (("--rates", "1,2", "--policy", "sqrt"), "needs a budget"),
    (("--rates-file", "/nonexistent/rates", "--budget", "2"), "Cannot read --rates-file"),
])
def test_bad_input_is_a_clear_error(args: tuple[str, ...], message: str) -> None:
    done = revisit_plan(*args)
    assert done.returncode == 2 and message in done.stderr and not done.stdout
