"""Running a crawl: store its config and seeds, start workers, schedule, watch, summarize."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from frontier.config import ConfigError, CrawlConfig
from frontier.counters import ERRORS, SUMMARY_TOTALS, Shown, accounted, shown_in
from frontier.frontier import AdmitLink, Entry, Frontier
from frontier.keys import Keys, host_name, task_queue
from frontier.redisclient import client_from_url, redacted
from frontier.urls import InvalidURL, canonicalize, host_of
from workers.cli.metrics import pool_arguments

log = logging.getLogger(__name__)

E_SEED = "Seed URL {url!r} is not crawlable: {why}. Give absolute http(s) URLs."
E_EXISTS = ("A crawl named {ns!r} already exists in this Redis. Use --resume to continue it, "
            "--fresh to delete it and start over, or another --namespace.")
E_REDIS = "Cannot reach Redis at {url}: {why}. Check --redis (format redis://HOST:PORT/DB)."
E_BROKER = ("Cannot reach the Celery broker at {url}: {why}. Check --broker (format "
            "redis://HOST:PORT/DB or rediss://...?ssl_ca_certs=CA.pem).")
#: The defaults of --redis and --broker (workers/cli/main.py): how this process hands its
#: URLs to its workers, so that no password is in their argv.
ENV_REDIS, ENV_BROKER = "TRAWL_REDIS", "TRAWL_BROKER"


def connect(url: str) -> redis.Redis:
    try:
        client = client_from_url(url, socket_connect_timeout=5)
        client.ping()
    except (redis.RedisError, ValueError) as exc:
        raise ConfigError(E_REDIS.format(url=redacted(url), why=exc)) from exc
    return client


def url_arguments(p: argparse.ArgumentParser, redis_required: bool = True,
              broker: bool = True) -> None:
    """--redis (required unless TRAWL_REDIS is set) and --broker, their defaults from the
    environment: a URL with a password given so stays out of the process list (``ps`` shows
    every process's argv to every user); ``trawl crawl`` hands its URLs to its workers so."""
    env_redis = os.environ.get(ENV_REDIS) or None
    p.add_argument("--redis", default=env_redis, required=redis_required and not env_redis,
                   help=f"the crawl's redis://, rediss:// or redis-cluster:// URL (default: "
                   f"${ENV_REDIS}{'' if redis_required else ', else an embedded Redis'})")
    if broker:
        p.add_argument("--broker", default=os.environ.get(ENV_BROKER) or None,
                       help=f"Celery broker URL (default: ${ENV_BROKER}, else --redis)")


def check_broker(url: str | None) -> None:
    """Fail fast (ConfigError, exit 2) on a Redis broker that cannot be reached or whose TLS
    certificate is not trusted: Celery itself retries a broker connection for ever, so a
    wrong CA would leave a worker waiting with nothing said. Other transports are Celery's."""
    if not url or not url.startswith(("redis://", "rediss://", "unix://")):
        return
    try:
        connect(url).close()
    except ConfigError as exc:
        raise ConfigError(E_BROKER.format(url=redacted(url), why=exc.__cause__ or exc)) from exc


def canonical_seeds(seeds: Iterable[str]) -> list[str]:
    out = []
    for raw in seeds:
        raw = raw.strip()
        if not raw or raw.startswith("#"):
            continue
        try:
            out.append(canonicalize(raw))
        except InvalidURL as exc:
            raise ConfigError(E_SEED.format(url=raw, why=exc.reason)) from exc
    if not out:
        raise ConfigError("No seed URLs given: pass URLs as arguments or --seeds FILE.")
    return out


def init_crawl(client: redis.Redis, config: CrawlConfig, seeds: list[str],
               resume: bool = False, fresh: bool = False) -> Frontier:
    """Store the crawl's config in Redis and admit the seeds (depth 0)."""
    keys = Keys(config.namespace)
    exists = client.exists(keys.config)
    if exists and fresh:
        delete_crawl(client, config.namespace)
    elif exists and not resume:
        raise ConfigError(E_EXISTS.format(ns=config.namespace))
    if exists and resume and not fresh:
        config = CrawlConfig.from_json(client.get(keys.config).decode())
    # The Frontier resolves bloom_backend ("auto") for this server; stored resolved, so a
    # worker joining later tests URLs against the same filter.
    frontier = Frontier(client, config)
    if not (exists and resume and not fresh):
        client.set(keys.config, frontier.config.to_json())
    client.set(keys.started, repr(time.time()), nx=True)
    admit_seeds(frontier, seeds)
    return frontier


def admit_seeds(frontier: Frontier, seeds: list[str]) -> int:
    res = frontier.admit([AdmitLink(host_of(u), u, Entry(u, 0)) for u in seeds])
    if frontier.config.max_pages and res.admitted:
        frontier.r.incrby(frontier.keys.admitted_total, res.admitted)
    return res.admitted


def delete_crawl(client: redis.Redis, namespace: str) -> int:
    n = 0
    for key in client.scan_iter(f"{namespace}:*", count=1000):
        n += client.delete(key)
    for key in client.scan_iter(task_queue(namespace) + "*", count=1000):
        n += client.delete(key)
    return n


def default_domains(seeds: list[str]) -> list[str]:
    return sorted({host_name(host_of(u)) for u in seeds})


@dataclass
class WorkerPool:
    """``trawl worker`` child processes of this machine, stopped without leftovers."""

    redis_url: str
    namespace: str
    count: int
    #: fetch_concurrency for these workers (None: the crawl's setting)
    concurrency: int | None
    log_dir: Path
    events: bool = False
    broker_url: str | None = None
    #: (first port, address) of the workers' metrics endpoints (workers/cli/metrics.py)
    metrics: tuple[int, str] = (0, "127.0.0.1")
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> WorkerPool:
        for i in range(self.count):
            self.start_one(i)
        return self

    def start_one(self, i: int) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "workers.cli", "worker",
               "--namespace", self.namespace, "--name", f"w{i}-{os.getpid()}"]
        if self.concurrency:
            cmd += ["--concurrency", str(self.concurrency)]
        if self.events:
            cmd.append("--events")
        cmd += pool_arguments(*self.metrics, i)
        # The URLs (a password in them) by environment, not argv: ps shows argv to everyone.
        env = {**os.environ, ENV_REDIS: self.redis_url}
        env.pop(ENV_BROKER, None)
        if self.broker_url:
            env[ENV_BROKER] = self.broker_url
        logf = open(self.log_dir / f"worker-{i}.log", "ab")  # noqa: SIM115 - child owns it
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        self.procs.append(proc)
        return proc

    def stop(self, timeout_s: float = 15.0) -> None:
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()

    def alive(self) -> int:
        return sum(1 for p in self.procs if p.poll() is None)


#: The summary's revisit lines of a continuous crawl: (line, counter or watcher figure).
REVISIT_SUMMARY = (("scheduled", "revisits_scheduled"), ("due", "revisits_due"),
                   ("done", "revisits"), ("unchanged", "revisit_unchanged"),
                   ("not_modified_304", "revisit_not_modified"),
                   ("similar", "revisit_similar"), ("changed", "revisit_changed"),
                   ("failed", "revisit_failed"), ("dropped", "revisit_dropped"))


def summarize(stats: dict[str, int], elapsed_s: float, workers: int,
              partitions: int) -> dict[str, Any]:
    """The crawl's summary from its counters; what each line means: frontier/counters.py."""
    fetched = stats.get("fetched", 0)
    summary: dict[str, Any] = {key: stats.get(name, 0) for key, name in SUMMARY_TOTALS}
    summary.update({
        "elapsed_s": round(elapsed_s, 3),
        "pages_per_s": round(fetched / elapsed_s, 2) if elapsed_s > 0 else 0.0,
        "workers": workers,
        "partitions": partitions,
    })
    if "revisits_scheduled" in stats:  # a continuous crawl
        summary["revisits"] = {k: stats.get(name, 0) for k, name in REVISIT_SUMMARY}
    summary["errors"] = ERRORS.members(stats)
    summary["links"] = shown_in(stats, Shown.LINKS)
    summary["accounted"] = accounted(stats)
    return summary


class CrawlWatcher:
    """Polls the crawl's counters; the crawl is done when nothing is queued or leased, or at
    its time limit. A continuous crawl is never done before its time limit (revisits come
    due while the frontier is empty)."""

    def __init__(self, frontier: Frontier, time_limit_s: float | None = None) -> None:
        self.frontier = frontier
        self._idle_since: float | None = None
        self.last: dict[str, int] = {}
        self._deadline = (time.monotonic() + time_limit_s) if time_limit_s else None

    def poll(self) -> dict[str, int]:
        self.last = self.frontier.stats()
        if self.frontier.config.continuous:
            sched = self.frontier.revisits.status()
            self.last["revisits_scheduled"] = sched.scheduled
            self.last["revisits_due"] = sched.due
        return self.last

    def done(self, settle_s: float = 0.5) -> bool:
        """True once queued == inflight == 0 has held for ``settle_s`` (links in transit)."""
        st = self.poll()
        now = time.monotonic()
        if self._deadline is not None and now >= self._deadline:
            return True
        if self.frontier.config.continuous:
            return False
        if st.get("queued", 0) == 0 and st.get("inflight", 0) == 0:
            if self._idle_since is None:
                self._idle_since = now
            return now - self._idle_since >= settle_s
        self._idle_since = None
        return False


def write_summary(path: str | os.PathLike[str] | None, summary: dict[str, Any]) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into KeyboardInterrupt so cleanup runs as on Ctrl-C.

    SIGINT is set explicitly: a process started in the background by a shell inherits it
    ignored, and would otherwise leave its workers behind.
    """
    def handler(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
