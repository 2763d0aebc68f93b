"""The internet-like bench with real round-trip times (``bench/run --web internet --rtt-ms MS``).

On loopback a TCP or TLS handshake costs no time, and the sandbox's ``handshake_rtts`` can
only wait before a connection's first answer. With ``--rtt-ms`` the bench runs on the netns
harness instead (``deploy/netns-cluster``, a prefix ``b<pid>`` of its own): the web in its node on 60
addresses, every packet it sends through the delay line (sandbox/delayline.py: a seeded
round-trip time per web address, lognormal around MS), and the harness itself run again
inside the w1 node (environment ``TRAWL_BENCH_NETNS``), where every crawler and its Redis run
as on loopback. So each crawler's handshakes, requests and TCP slow start pay the round trip.
The server-side ``handshake_rtts`` and per-host base delay are turned off (the line does
them for real; runs before 2026-12-08 01:00 kept the base delay, 0-50 ms a request), and the
latency-off run sets the line's round trip to 0 (the same packet path and CPU, no wait).
Each run reports the line's CPU and packets.
Needs root and network namespaces (as tests/test_netns_rtt.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sandbox import SandboxConfig, SandboxWeb

NETNS_ENV = "TRAWL_BENCH_NETNS"
WEB_IPS = 60  # deploy/netns-cluster's most


def add_args(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--rtt-ms", type=float, default=None,
                   help="run on the netns harness with this median round-trip time between "
                        "the crawlers and the web (bench/internet_rtt.py; needs root)")
    g.add_argument("--rtt-spread", type=float, default=0.5,
                   help="lognormal sigma of the per-address round-trip time (default 0.5)")


def inside() -> bool:
    """True in the harness run again inside the w1 node."""
    return bool(os.environ.get(NETNS_ENV))


def _cluster() -> Any:
    from tests.netns import NetnsCluster

    # a prefix of this run's own: a second bench's teardown cannot take this one's namespaces
    prefix = os.environ.get(NETNS_ENV) or f"b{os.getpid() % 100000}"
    return NetnsCluster(prefix=prefix, workers=1, web_ips=WEB_IPS)


def run_outside(a: argparse.Namespace) -> int:
    """Sets up the harness and the line, runs this same command inside w1, tears it down."""
    from tests.netns import netns_unavailable

    reason = netns_unavailable()
    if reason:
        print(f"--rtt-ms needs the netns harness: {reason}")
        return 2
    net = _cluster()
    with net:
        net.rtt("web", a.rtt_ms, a.rtt_spread)
        print(f"netns harness {net.prefix}: web on {WEB_IPS} addresses, round trips "
              f"{a.rtt_ms:g} ms median (spread {a.rtt_spread:g}); the crawlers run in w1",
              flush=True)
        env = dict(os.environ, **{NETNS_ENV: net.prefix})
        return subprocess.run(net.argv("w1", [sys.executable, *sys.argv]), env=env).returncode


def web_config(cfg: SandboxConfig) -> SandboxConfig:
    """The line charges the network's round trips for real, so the server's stand-ins for
    them go: the handshakes' waits and each host's base delay (its RTT on loopback). The
    server then waits only its own time (the lognormal, slow hosts, trickles, failures)."""
    if inside():
        return dataclasses.replace(cfg, handshake_rtts=False, latency_max_base_s=0.0)
    return cfg


def make_web(cfg: SandboxConfig, log: Path, **kw: Any) -> SandboxWeb:
    """The sandbox web: on loopback, or (inside) in the harness's web node."""
    if not inside():
        return SandboxWeb(cfg, log, **kw)
    from tests.netns import NetnsWeb

    return NetnsWeb(_cluster(), cfg, log, **kw)


def line_off() -> None:
    """No round trips from now on (the latency-off run measures CPU alone). The line stays
    with a round trip of 0 ms: its packets take the same path and cost the same CPU, which
    the crawler would otherwise have for itself."""
    if inside():
        _cluster().rtt("web", 0.0)


def line_stats() -> dict[str, Any] | None:
    """The line's counters now (written every 2 s), or None off the harness."""
    return _cluster().rtt_stats("web") if inside() else None


def line_delta(before: dict[str, Any] | None) -> dict[str, Any] | None:
    """CPU seconds and packets of the line since ``before`` (+-2 s of counters)."""
    after = line_stats()
    if before is None or not after:
        return None

    def grew(key: str) -> float:
        return after.get(key, 0) - before.get(key, 0)

    released = grew("released")
    return {"cpu_s": round(grew("cpu_s"), 2), "packets": grew("packets"),
            "dropped_full": grew("dropped_full"),
            # how late the line let this run's packets go (its own lag on a busy machine:
            # each round trip was that much longer than the model's)
            "late_mean_ms": round(grew("late_total_ms") / released, 3) if released else None,
            "late_max_ms_so_far": after.get("late_max_ms")}


def figures(a: argparse.Namespace) -> dict[str, Any] | None:
    """What the results file records of the round trips (None off the harness)."""
    if not inside():
        return None
    return {"rtt_ms_median": a.rtt_ms, "rtt_spread": a.rtt_spread, "web_ips": WEB_IPS,
            "line": line_stats()}
