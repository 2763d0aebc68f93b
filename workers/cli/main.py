"""The ``trawl`` command: demo, crawl, worker, scheduler, seed, drop, status, robots."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from frontier.config import ORDERINGS, ConfigError, CrawlConfig
from frontier.keys import task_queue
from frontier.redisclient import is_cluster_url, redacted
from workers.cli.config_cmd import add_config_parser, cmd_config
from workers.cli.crawl import url_arguments
from workers.cli.drop import add_drop_parser, cmd_drop
from workers.cli.flower import add_flower_arguments, cmd_flower
from workers.cli.inspect_url import add_inspect_parser, cmd_inspect
from workers.cli.metrics import add_metrics_arguments, serve_metrics
from workers.cli.options import job_seeds, load_from_args
from workers.cli.revisit_plan import add_revisit_plan_parser, cmd_revisit_plan
from workers.report.cli import add_report_parsers, cmd_export, cmd_report, report_after_crawl

log = logging.getLogger("trawl")

DEMO_MARKER = ".trawl-demo"

#: Celery task slots of a worker process: tasks are handed over to the fetch engine at once.
HANDOFF_THREADS = 4


def _common_crawl_args(p: argparse.ArgumentParser) -> None:
    url_arguments(p, redis_required=False)  # --broker: required with a redis-cluster:// --redis
    p.add_argument("--namespace", help="crawl name (Redis key prefix; default trawl)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                   help="Celery worker processes to start here (default: cores)")
    p.add_argument("--concurrency", type=int,
                   help="fetches in flight per worker process (fetch_concurrency, default 2500)")
    p.add_argument("--partitions", type=int, help="partitions P (default 64)")
    p.add_argument("--max-pages", type=int, help="stop admitting after N URLs (default: no cap)")
    p.add_argument("--max-depth", type=int, help="link depth limit (default 50)")
    p.add_argument("--delay", type=float, help="minimum seconds between requests to a host")
    p.add_argument("--ip-concurrency", type=int, help="requests in flight per IP (0 = no limit)")
    p.add_argument("--ordering", choices=ORDERINGS,
                   help="front-queue priority: bfs (default), random, indegree or opic")
    p.add_argument("--output", help="output directory (WARC, JSONL records, logs)")
    p.add_argument("--summary-json", help="write the final summary as JSON here")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar")
    p.add_argument("--events", action="store_true", help="send task events (for Flower)")
    p.add_argument("--continuous", action="store_true", help="keep revisiting fetched pages "
                   "(docs/freshness.md); ends on --time-limit or Ctrl-C")
    p.add_argument("--time-limit", type=float, help="stop the crawl after this many seconds")
    p.add_argument("--set", action="append", default=[], metavar="NAME=JSON",
                   help="any crawl setting (docs/settings.md), e.g. --set max_retries=3; wins "
                   "over TRAWL_* variables and the job file (repeatable)")
    add_metrics_arguments(p, pool=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trawl", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_crawl_commands(sub)
    _add_cluster_commands(sub)
    _add_inspection_commands(sub)
    add_drop_parser(sub)
    add_revisit_plan_parser(sub)
    add_inspect_parser(sub)
    add_report_parsers(sub)
    add_config_parser(sub)
    return parser


def _add_crawl_commands(sub: Any) -> None:
    """demo and crawl: a whole crawl from this command."""
    demo = sub.add_parser("demo", help="crawl the built-in sandbox web on an embedded Redis")
    _common_crawl_args(demo)
    demo.add_argument("--hosts", type=int, default=200)
    demo.add_argument("--pages-per-host", type=int, default=100)
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument("--ips", type=int, default=50)

    crawl = sub.add_parser("crawl", help="crawl from seed URLs")
    _common_crawl_args(crawl)
    crawl.add_argument("seeds", nargs="*", help="seed URLs")
    crawl.add_argument("--seeds", dest="seed_file", help="file with one seed URL per line")
    crawl.add_argument("--config", metavar="FILE", help="crawl-job file: TOML (examples/"
                       "crawl.toml: seeds and settings) or a JSON object of settings")
    crawl.add_argument("--allow", action="append", default=[], metavar="DOMAIN",
                       help="allowed host or domain (repeatable; default: the seeds' hosts)")
    crawl.add_argument("--resume", action="store_true", help="continue the crawl in Redis")
    crawl.add_argument("--fresh", action="store_true", help="delete that crawl's state first")


def _add_cluster_commands(sub: Any) -> None:
    """worker and scheduler: the processes of a cluster."""
    worker = sub.add_parser("worker", help="join a running crawl as a Celery worker")
    url_arguments(worker)
    worker.add_argument("--namespace", default="trawl")
    worker.add_argument("--concurrency", type=int,
                        help="fetches in flight in this worker (default: the crawl's "
                        "fetch_concurrency)")
    worker.add_argument("--name", default=None)
    worker.add_argument("--events", action="store_true")
    worker.add_argument("--loglevel", default="WARNING")
    worker.add_argument("--no-schedule", action="store_true",
                        help="fetch only; own no partitions (with fetch_affinity, such a "
                        "worker gets the tasks of `trawl scheduler` members only)")
    add_metrics_arguments(worker)

    sched = sub.add_parser("scheduler", help="run the scheduler of a crawl (until it is done)")
    url_arguments(sched)
    sched.add_argument("--namespace", default="trawl")
    sched.add_argument("--forever", action="store_true", help="keep running when idle")
    sched.add_argument("--name", default=None, help="member name (default host-pid-random)")
    add_metrics_arguments(sched)


def _add_inspection_commands(sub: Any) -> None:
    """seed, status, flower, dedup-report, robots: working with a crawl."""
    seed = sub.add_parser("seed", help="add URLs to a running crawl")
    url_arguments(seed, broker=False)
    seed.add_argument("--namespace", default="trawl")
    seed.add_argument("urls", nargs="*")
    seed.add_argument("--file")

    status = sub.add_parser("status", help="queue sizes, in-flight, errors per partition")
    url_arguments(status, broker=False)
    status.add_argument("--namespace", default="trawl")
    status.add_argument("--json", action="store_true")
    status.add_argument("--partitions", action="store_true", help="one row per partition")

    add_flower_arguments(sub.add_parser("flower", help="Flower (monitoring UI) on the crawl's "
                                        "broker, with basic auth"))

    report = sub.add_parser("dedup-report", help="near-duplicate clusters and mirrors of a "
                            "finished crawl, from its JSONL records")
    report.add_argument("records", help="the crawl's records/ directory (or its output dir)")
    report.add_argument("--json", dest="json_out", help="write the report as JSON here")
    report.add_argument("--all-pairs", action="store_true",
                        help="also cross-check by an all-pairs sketch comparison (small crawls)")

    robots = sub.add_parser("robots", help="check URLs against a robots.txt file or URL")
    robots.add_argument("source", help="robots.txt file path or http(s) URL")
    robots.add_argument("urls", nargs="+")
    robots.add_argument("--agent", default="trawl")
    robots.add_argument("--json", action="store_true")
    robots.add_argument("--allow-private", action="store_true",
                        help="fetch a robots.txt on a private, loopback or link-local address")


def cmd_demo(args: argparse.Namespace) -> int:
    from sandbox import SandboxConfig, SandboxWeb

    out = Path(args.output or "trawl-demo-out")
    if out.exists() and (out / DEMO_MARKER).exists():
        shutil.rmtree(out)
    elif out.exists() and any(out.iterdir()):
        raise ConfigError(f"--output {out} exists and is not a demo directory: choose another")
    out.mkdir(parents=True, exist_ok=True)
    (out / DEMO_MARKER).write_text("")
    web_cfg = SandboxConfig(seed=args.seed, hosts=args.hosts, pages_per_host=args.pages_per_host,
                            ips=min(args.ips, args.hosts))
    with SandboxWeb(web_cfg, out / "sandbox-requests.log") as web:
        preset = {"host_delay_s": 0.05, "adaptive_delay_factor": 0.0, "allow_private_ips": True,
                  "ip_concurrency": 0, "static_hosts": web.resolver_map,
                  "allowed_domains": [web_cfg.domain], "connect_timeout_s": 2.0,
                  "read_timeout_s": 3.0, "total_timeout_s": 5.0, "retry_backoff_s": 0.5,
                  "robots_error_ttl_s": 3600.0}
        config = load_from_args(args, preset).config
        config.output_dir = str(out)
        return run_crawl(args, config, list(web.seeds), out)


def cmd_crawl(args: argparse.Namespace) -> int:
    raw = list(args.seeds)
    if args.seed_file:
        try:
            raw += Path(args.seed_file).read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"Cannot read --seeds {args.seed_file}: {exc}") from exc
    effective = load_from_args(args)
    seeds = job_seeds(effective, raw, resume=args.resume)
    config = effective.config
    return run_crawl(args, config, seeds, Path(config.output_dir),
                     resume=args.resume, fresh=args.fresh)


def run_crawl(args: argparse.Namespace, config: CrawlConfig, seeds: list[str], out: Path,
              resume: bool = False, fresh: bool = False) -> int:
    """Embedded Redis (unless --redis), workers, scheduler + progress, summary."""
    from frontier.redisserver import EmbeddedRedis
    from workers.cli.crawl import (
        CrawlWatcher,
        WorkerPool,
        check_broker,
        connect,
        init_crawl,
        summarize,
        terminate_on_sigterm,
        write_summary,
    )
    from workers.cli.progress import print_summary
    from workers.components.loader import check_components

    config.validate()
    check_components(config)  # every class path imports and is of its kind
    embedded = None
    pool = None
    with terminate_on_sigterm():
        try:
            if args.redis:
                redis_url = args.redis
            else:
                embedded = EmbeddedRedis(out / "redis").start()
                redis_url = embedded.url
            client = connect(redis_url)
            check_broker(args.broker)
            frontier = init_crawl(client, config, seeds, resume=resume, fresh=fresh)
            config = frontier.config
            if is_cluster_url(redis_url) and not args.broker:
                raise ConfigError("A redis-cluster:// state URL needs --broker redis://HOST:PORT "
                                  "(Celery's broker cannot be a Redis Cluster).")
            pool = WorkerPool(redis_url, config.namespace, args.workers, None,
                              out / "logs", events=args.events, broker_url=args.broker,
                              metrics=(args.metrics_port, args.metrics_addr)).start()
            watcher = CrawlWatcher(frontier, args.time_limit)
            start = time.monotonic()
            # The workers own the partitions and schedule them (workers/cluster/member.py); this
            # process seeds, watches and summarizes.
            _watch(frontier, watcher, pool, not args.no_progress, out / "logs")
            elapsed = time.monotonic() - start
            summary = summarize(watcher.poll(), elapsed, args.workers, config.partitions)
            summary["bloom_backend"] = config.bloom_backend
        except KeyboardInterrupt:
            print("interrupted: stopping workers", file=sys.stderr)
            return 130
        finally:
            if pool:
                pool.stop()
            if embedded:
                embedded.stop()
    print_summary(summary)
    write_summary(args.summary_json or (out / "summary.json"), summary)
    report_after_crawl(out, summary)
    return 0


def _watch(frontier: Any, watcher: Any, pool: Any, show_progress: bool, logs: Path) -> None:
    """Until the crawl is done: the progress bar (with what limits the crawl, read once a
    second), and a check that some worker is still alive."""
    from workers.cli.load import measure
    from workers.cli.progress import CrawlProgress

    with CrawlProgress(enabled=show_progress) as progress:
        load, looked = None, 0.0
        while not watcher.done():
            if show_progress and time.monotonic() - looked >= 1.0:
                load = measure(frontier, watcher.last.get("inflight", 0))
                looked = time.monotonic()
            progress.update(watcher.last, load)
            if pool.count and pool.alive() == 0:
                raise RuntimeError(f"all workers exited: see {logs}")
            time.sleep(0.25)
        progress.update(watcher.last)


def cmd_worker(args: argparse.Namespace) -> int:
    from workers.app.celery_app import configure
    from workers.cli.crawl import check_broker, connect
    from workers.runtime.context import load_config

    client = connect(args.redis)
    config = load_config(client, args.namespace, redacted(args.redis))  # fail fast, before Celery
    check_broker(args.broker)  # Celery would retry a broker it cannot reach for ever
    app = configure(args.redis, args.namespace, config.lease_ttl_s, events=args.events,
                    broker_url=args.broker)
    from celery.signals import worker_ready, worker_shutdown

    import workers.app.tasks  # noqa: F401 - registers the tasks
    from workers.cluster.member import Member

    member = (None if args.no_schedule
              else Member(client, config, app, name=args.name, fetches_here=True))
    serve_metrics(args, "worker", member.id if member else args.name or "", args.namespace,
                  member)

    if member:  # joins once Celery consumes; leaves once it has stopped consuming
        worker_ready.connect(lambda **_kw: member.start(), weak=False)
        worker_shutdown.connect(lambda **_kw: member.stop(), weak=False)

    # Celery's threads only hand tasks over to the fetch engine (workers/runtime/engine.py), which
    # runs the fetches; a few suffice, and each blocks while the engine is full.
    app.conf.trawl_fetch_concurrency = args.concurrency
    queues = member.task_queues if member else [task_queue(args.namespace)]
    argv = ["worker", "-P", "threads", "-c", str(HANDOFF_THREADS), "-Q",
            ",".join(queues), "--without-gossip", "--without-mingle",
            "-l", args.loglevel]
    if args.name:
        argv += ["-n", f"{args.name}@%h"]
    if args.events:
        argv.append("-E")
    app.worker_main(argv)
    return 0


def cmd_scheduler(args: argparse.Namespace) -> int:
    from workers.app.celery_app import configure
    from workers.cli.crawl import CrawlWatcher, check_broker, connect, terminate_on_sigterm
    from workers.cluster.member import Member
    from workers.runtime.context import load_config

    client = connect(args.redis)
    check_broker(args.broker)
    while True:
        try:
            config = load_config(client, args.namespace, redacted(args.redis))
            break
        except ConfigError as exc:
            if not args.forever:
                raise
            log.warning("%s (waiting)", exc)
            time.sleep(2.0)
    app = configure(args.redis, args.namespace, config.lease_ttl_s, broker_url=args.broker)
    member = Member(client, config, app, name=args.name)
    serve_metrics(args, "scheduler", member.id, args.namespace, member)
    member.start()
    watcher = CrawlWatcher(member.frontier)
    try:
        with terminate_on_sigterm():
            while args.forever or not watcher.done(settle_s=2.0):
                time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        member.stop()
    return 0


def cmd_seed(args: argparse.Namespace) -> int:
    from frontier.frontier import Frontier
    from workers.cli.crawl import admit_seeds, canonical_seeds, connect
    from workers.runtime.context import load_config

    raw = list(args.urls) + (Path(args.file).read_text().splitlines() if args.file else [])
    client = connect(args.redis)
    frontier = Frontier(client, load_config(client, args.namespace, redacted(args.redis)))
    n = admit_seeds(frontier, canonical_seeds(raw))
    print(f"admitted {n} new URLs ({len(raw) - n} already seen or blank)")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from workers.cli.status import print_status

    return print_status(args.redis, args.namespace, as_json=args.json,
                        per_partition=args.partitions)


def cmd_dedup_report(args: argparse.Namespace) -> int:
    from dedup.report import report_command

    path = Path(args.records)
    if (path / "records").is_dir():
        path = path / "records"
    return report_command(path, Path(args.json_out) if args.json_out else None, args.all_pairs,
                          out=sys.stdout)


def cmd_robots(args: argparse.Namespace) -> int:
    from workers.pipeline.robots import robots_command

    return robots_command(args.source, args.urls, args.agent, args.json, out=sys.stdout,
                          allow_private=args.allow_private)


COMMANDS = {"demo": cmd_demo, "crawl": cmd_crawl, "worker": cmd_worker, "scheduler": cmd_scheduler,
            "seed": cmd_seed, "status": cmd_status, "robots": cmd_robots, "flower": cmd_flower,
            "dedup-report": cmd_dedup_report, "revisit-plan": cmd_revisit_plan,
            "inspect": cmd_inspect, "report": cmd_report, "export": cmd_export,
            "config": cmd_config, "drop": cmd_drop}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        print(f"trawl: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
