"""The Prometheus endpoint of a ``trawl worker`` or ``trawl scheduler`` process: its flags, and
serving workers/runtime/metrics.py on them.

A port is a property of a process and its host, not of the crawl, so it is a flag (or
``$TRAWL_METRICS_PORT``), not a crawl setting stored in Redis: in a container every worker can
use the same port; ``trawl crawl --metrics-port N`` gives its i-th worker N + i.
"""

from __future__ import annotations

import argparse
import logging
import os

from frontier.config import ConfigError

log = logging.getLogger(__name__)

ENV_METRICS_PORT = "TRAWL_METRICS_PORT"
E_PORT = ("Cannot serve metrics on {addr}:{port}: {why}. Choose another --metrics-port (0 "
          "turns the endpoint off) or --metrics-addr.")


def add_metrics_arguments(p: argparse.ArgumentParser, pool: bool = False) -> None:
    """--metrics-port and --metrics-addr (``pool``: for the workers a command starts)."""
    default = os.environ.get(ENV_METRICS_PORT) or "0"
    whose = ("the first worker's port, the i-th worker's is PORT + i" if pool
             else "this process's port")
    p.add_argument("--metrics-port", type=int, default=int(default) if default.isdigit() else 0,
                   help=f"serve Prometheus metrics at /metrics: {whose} (default "
                   f"${ENV_METRICS_PORT}, else 0: no endpoint)")
    p.add_argument("--metrics-addr", default="127.0.0.1",
                   help="address the metrics endpoint binds (0.0.0.0 in a container)")


def pool_arguments(base: int, addr: str, index: int) -> list[str]:
    """The metrics flags of the ``index``-th worker a command starts."""
    if not base:
        return []
    return ["--metrics-port", str(base + index), "--metrics-addr", addr]


def serve_metrics(args: argparse.Namespace, role: str, name: str, crawl: str,
                  member: object | None = None) -> object | None:
    """Start this process's endpoint if --metrics-port asks for one; returns its
    ``WorkerMetrics`` (None: off). A port that cannot be bound is a ConfigError (exit 2)."""
    port = getattr(args, "metrics_port", 0) or 0
    if not port:
        return None
    if not 0 < port < 65536:
        raise ConfigError(E_PORT.format(addr=args.metrics_addr, port=port,
                                        why="not a TCP port (1-65535)"))
    from prometheus_client import disable_created_metrics, start_http_server

    from workers.runtime.metrics import (
        EngineCollector,
        PartitionCollector,
        WorkerMetrics,
        activate,
    )

    # No *_created series: they double the families and Prometheus does not need them.
    disable_created_metrics()
    metrics = WorkerMetrics(role, name, crawl)
    if role == "worker":
        metrics.registry.register(EngineCollector())
    if member is not None:
        metrics.registry.register(PartitionCollector(member))
    try:
        start_http_server(port, addr=args.metrics_addr, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(E_PORT.format(addr=args.metrics_addr, port=port, why=exc)) from exc
    activate(metrics)
    log.info("metrics at http://%s:%d/metrics", args.metrics_addr, port)
    return metrics
