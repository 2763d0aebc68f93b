"""The fetch engine's open-file limit: raised to what fetch_concurrency needs, or the
capacity cut to what the hard limit allows (each case in its own process: a lowered hard
limit cannot be raised again)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from workers.runtime.fdlimit import fds_needed

CHILD = textwrap.dedent("""
    import json, logging, resource, sys
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from workers.runtime.fdlimit import fit_capacity_to_fd_limit
    soft, hard = int(sys.argv[1]), int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    capacity = fit_capacity_to_fd_limit(int(sys.argv[3]))
    print(json.dumps({"capacity": capacity,
                      "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))
""")


def _run(soft: int, hard: int, capacity: int) -> tuple[dict, str]:
    res = subprocess.run([sys.executable, "-c", CHILD, str(soft), str(hard), str(capacity)],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(res.stdout), res.stderr


def test_soft_limit_is_raised_to_what_the_capacity_needs():
    out, err = _run(1024, fds_needed(1000) + 100, 1000)
    assert out == {"capacity": 1000, "soft": fds_needed(1000)}
    assert "open files" not in err


def test_a_low_hard_limit_cuts_the_capacity_and_says_which_limit():
    out, err = _run(1024, 2048, 1000)
    assert out["soft"] == 2048
    assert fds_needed(out["capacity"]) <= 2048 < fds_needed(out["capacity"] + 1)
    assert "fetch_concurrency 1000 needs about" in err and "ulimit -Hn" in err


def test_a_sufficient_limit_is_left_alone():
    need = fds_needed(10)
    out, err = _run(need + 7, need + 7, 10)
    assert out == {"capacity": 10, "soft": need + 7}
    assert err == ""
