"""What partition leases and heartbeats cost (issue 4): Redis ops/s idle and under load, and
how long a partition takeover takes.

    .venv/bin/python bench/lease_cost.py [--members 1,2,4] [--window-s 20] [--trials 3]

Every phase runs real ``trawl worker`` processes (``workers.cli.crawl.WorkerPool``: member +
Celery worker, concurrency 4) on a fresh EmbeddedRedis (loopback; Redis is the broker too),
default ``partition_ttl_s`` (15 s), 64 partitions:

  1. idle: N members of a crawl with nothing to fetch (no seeds). Once the N members own every
     partition: INFO commandstats / stats / CPU deltas over ``--window-s`` -> commands/s
     executed by Redis (Lua-internal calls included, as Redis counts them), Redis CPU, the
     workers' CPU; then a MONITOR sample (``--monitor-s``, after the window so it does not
     skew it) that splits commands sent by clients from those run inside scripts and names
     every EVALSHA's script, to attribute the client commands to heartbeats (member set,
     claim), the scheduler's lease polling (acquire, reap, in-flight reads), URL leases of
     fetches (begin, complete, admit), the Celery broker and the rest.
  2. load: the same N members crawling a sandbox web (200 hosts, delay 0.05 s): the same
     deltas over the window once 300 pages are fetched, plus pages fetched in it -> per page.
  3. takeover: 3 members crawling; one is SIGKILLed (its whole process group). Polled every
     50 ms: when each of its partitions has a new owner; from the sandbox log: when the first
     request to one of its hosts starts after that host's partition got its new owner. A new
     member replaces it, the assignment settles, next trial (``--trials``).

Writes bench/results/lease-cost-<stamp>.json and prints a summary. Like the other benches it
runs the source in ``TRAWL_SRC`` if set (a snapshot: see bench/run), else this checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("TRAWL_SRC") or BENCH.parent).resolve()
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from frontier.config import CrawlConfig  # noqa: E402
from frontier.frontier import Frontier  # noqa: E402
from frontier.redisserver import EmbeddedRedis  # noqa: E402
from sandbox import SandboxConfig, SandboxWeb  # noqa: E402
from workers.cli.crawl import WorkerPool, init_crawl  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")
NS = "lease"
CONCURRENCY = 4
WEB = SandboxConfig(seed=3, hosts=200, pages_per_host=100, ips=50, crawl_delay_s=0.3,
                    robots_slow_s=0.3, slow_page_s=0.3, hang_s=4.0)
BROKER_KEYS = ("unacked", "unacked_index", "unacked_mutex", "_kombu.", f"{NS}.fetch")


def crawl_config(web: SandboxWeb | None, out: Path) -> CrawlConfig:
    settings: dict[str, Any] = dict(
        namespace=NS, host_delay_s=0.05, allow_private_ips=True, ip_concurrency=0,
        connect_timeout_s=1.0, read_timeout_s=2.0, total_timeout_s=3.0, retry_backoff_s=0.2,
        lease_ttl_s=30.0, output_dir=str(out), store_warc=False)
    if web is not None:
        settings.update(static_hosts=web.resolver_map, allowed_domains=[web.config.domain])
    return CrawlConfig(**settings).validate()


def proc_cpu(pid: int) -> float:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / CLK


def script_names() -> dict[str, str]:
    """SHA1 -> script name for every Lua script of the source under test (as redis-py hashes)."""
    out = {}
    for path in [*(ROOT / "frontier" / "lua").glob("*.lua"), *(ROOT / "dedup" / "lua").glob("*.lua")]:
        out[hashlib.sha1(path.read_text().encode()).hexdigest()] = path.stem
    return out


#: Which part of the system a client command belongs to (first match wins).
HEARTBEAT_SCRIPTS = {"claim", "release_partition"}
SCHEDULER_SCRIPTS = {"acquire", "reap", "ip_acquire"}


def category(cmd: str, args: list[str], scripts: dict[str, str]) -> str:
    if cmd == "evalsha" and args:
        name = scripts.get(args[0], "unknown-script")
        if name in HEARTBEAT_SCRIPTS:
            return f"heartbeat:{name}"
        if name in SCHEDULER_SCRIPTS:
            return f"scheduler:{name}"
        return f"fetch:{name}"
    key = args[0] if args else ""
    if key == f"{NS}:members":
        return f"heartbeat:{cmd}"
    if cmd == "hget" and key.endswith(":s") and args[1:2] == ["inflight"]:
        return "scheduler:hget-inflight"
    if cmd in ("brpop", "lpush", "multi", "exec", "zrevrangebyscore", "setnx", "publish") \
            or any(key.startswith(k) for k in BROKER_KEYS):
        return f"broker:{cmd}"
    if cmd == "hincrby" and key.endswith(":s"):
        return "fetch:hincrby-stats"
    if cmd == "script":
        return "redis-py:script-exists"
    if cmd in ("ping", "info", "client", "hello", "auth", "select", "monitor"):
        return f"connection:{cmd}"
    return f"other:{cmd}"


def monitor_sample(url: str, seconds: float, scripts: dict[str, str]) -> dict[str, Any]:
    """Client commands by category and Lua-internal calls over ``seconds`` (MONITOR)."""
    counts: Counter[str] = Counter()
    lua = 0
    done = threading.Event()
    t_start = [0.0]

    def run() -> None:
        nonlocal lua
        try:
            with redis.Redis.from_url(url).monitor() as m:
                t_start[0] = time.time()
                for item in m.listen():
                    if item.get("time", 0.0) > t_start[0] + seconds or done.is_set():
                        break
                    if item.get("client_type") == "lua":
                        lua += 1
                        continue
                    parts = str(item.get("command", "")).split(" ")
                    counts[category(parts[0].lower(), parts[1:], scripts)] += 1
        except (redis.RedisError, OSError, ValueError):
            return

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds + 30)
    done.set()
    client_total = sum(counts.values())
    groups: Counter[str] = Counter()
    for k, v in counts.items():
        groups[k.split(":")[0]] += v
    return {
        "seconds": seconds,
        "client_commands_per_s": round(client_total / seconds, 1),
        "lua_internal_per_s": round(lua / seconds, 1),
        "by_group_per_s": {k: round(v / seconds, 1) for k, v in groups.most_common()},
        "by_command_per_s": {k: round(v / seconds, 1) for k, v in counts.most_common()},
    }


def redis_counters(client: redis.Redis) -> dict[str, float]:
    stats = client.info("commandstats")
    cpu = client.info("cpu")
    return {"commands": float(sum(v["calls"] for v in stats.values())),
            "processed": float(client.info("stats")["total_commands_processed"]),
            "cpu": float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
            **{f"cmd:{k.removeprefix('cmdstat_')}": float(v["calls"]) for k, v in stats.items()}}


def measure(client: redis.Redis, frontier: Frontier, pool: WorkerPool,
            window_s: float) -> dict[str, Any]:
    pids = [p.pid for p in pool.procs]
    a, fa = redis_counters(client), frontier.stats()["fetched"]
    wa, t0 = sum(proc_cpu(p) for p in pids), time.monotonic()
    time.sleep(window_s)
    b, fb = redis_counters(client), frontier.stats()["fetched"]
    wb, dt = sum(proc_cpu(p) for p in pids), time.monotonic() - t0
    by_cmd = {k[4:]: (b[k] - a.get(k, 0.0)) / dt for k in b if k.startswith("cmd:")}
    pages = fb - fa
    out: dict[str, Any] = {
        "window_s": round(dt, 2),
        # The two INFO calls of each snapshot are in the deltas (a handful over the window).
        "redis_commands_per_s": round((b["commands"] - a["commands"]) / dt, 1),
        "redis_cpu_pct": round(100 * (b["cpu"] - a["cpu"]) / dt, 1),
        "workers_cpu_pct": round(100 * (wb - wa) / dt, 1),
        "pages": pages, "pages_per_s": round(pages / dt, 1),
        "top_commands_per_s": {k: round(v, 1) for k, v in
                               sorted(by_cmd.items(), key=lambda kv: -kv[1])[:12] if v > 0},
    }
    if pages:
        out["redis_commands_per_page"] = round((b["commands"] - a["commands"]) / pages, 1)
    return out


def settle(frontier: Frontier, members: int, timeout_s: float = 90.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    loads: list[int] = []
    while time.monotonic() < deadline:
        owners = Counter(frontier.partition_owners())
        loads = sorted(owners.values())
        if None not in owners and len(owners) == members and loads[-1] - loads[0] <= 1:
            return loads
        time.sleep(0.2)
    raise RuntimeError(f"assignment did not settle on {members} members: {loads}")


def phase(work: Path, members: int, web: SandboxWeb | None, window_s: float,
          monitor_s: float, scripts: dict[str, str]) -> dict[str, Any]:
    kind = "load" if web else "idle"
    run_dir = work / f"{kind}-{members}"
    with EmbeddedRedis(run_dir / "redis") as server:
        client = redis.Redis.from_url(server.url)
        config = crawl_config(web, run_dir / "out")
        frontier = init_crawl(client, config, list(web.seeds) if web else [])
        pool = WorkerPool(server.url, NS, members, CONCURRENCY, run_dir / "logs").start()
        try:
            loads = settle(frontier, members)
            if web:
                deadline = time.monotonic() + 120
                while frontier.stats()["fetched"] < 300 and time.monotonic() < deadline:
                    time.sleep(0.2)
            else:
                time.sleep(3.0)  # past the start-up transients (first claims, Celery boot)
            result = measure(client, frontier, pool, window_s)
            result["monitor"] = monitor_sample(server.url, monitor_s, scripts)
            st = frontier.stats()
            result.update(members=members, kind=kind, loads=loads, queued_after=st["queued"])
            if pool.alive() != members:
                result["warning"] = f"only {pool.alive()} of {members} workers alive"
        finally:
            pool.stop()
            client.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f"{kind} {members}: {result['redis_commands_per_s']} commands/s, "
          f"{result['monitor']['client_commands_per_s']} client commands/s, "
          f"redis CPU {result['redis_cpu_pct']}%, {result['pages_per_s']} pages/s", flush=True)
    return result


def own_values(frontier: Frontier, parts: list[int]) -> list[str]:
    pipe = frontier.pipeline()
    for p in parts:
        pipe.command("get", frontier.keys.owner(p))
    return [v.decode() if v else "" for v in pipe.execute()]


def takeover(work: Path, web: SandboxWeb, trials: int) -> dict[str, Any]:
    run_dir = work / "takeover"
    results: list[dict[str, Any]] = []
    with EmbeddedRedis(run_dir / "redis") as server:
        client = redis.Redis.from_url(server.url)
        config = crawl_config(web, run_dir / "out")
        frontier = init_crawl(client, config, list(web.seeds))
        pool = WorkerPool(server.url, NS, 3, CONCURRENCY, run_dir / "logs").start()
        started = 3
        host_part = {h: frontier.partition(f"{h}:{web.port}") for h in web.resolver_map}
        try:
            settle(frontier, 3)
            while frontier.stats()["fetched"] < 300:
                time.sleep(0.2)
            for _trial in range(trials):
                victim = next(p for p in pool.procs if p.poll() is None)
                argv = [str(a) for a in victim.args]  # type: ignore[union-attr]
                name = argv[argv.index("--name") + 1]
                parts = [p for p, o in enumerate(frontier.partition_owners()) if o == name]
                os.killpg(victim.pid, signal.SIGKILL)
                t0 = time.time()
                victim.wait()
                moved: dict[int, float] = {}
                while len(moved) < len(parts) and time.time() - t0 < 60:
                    now = time.time()
                    for p, v in zip(parts, own_values(frontier, parts), strict=True):
                        if p not in moved and v and not v.startswith(name + "|"):
                            moved[p] = now - t0
                    time.sleep(0.05)
                time.sleep(5.0)  # let fetches happen and the log flush
                first_fetch = None
                for e in web.read_log():
                    p = host_part.get(e.host)
                    if p in moved and e.start - t0 > moved[p] and e.ua.startswith("Trawl/"):
                        d = e.start - t0
                        first_fetch = d if first_fetch is None else min(first_fetch, d)
                res = {"partitions": len(parts), "moved": len(moved),
                       "first_partition_moved_s": round(min(moved.values()), 2) if moved else None,
                       "all_partitions_moved_s": round(max(moved.values()), 2)
                       if len(moved) == len(parts) else None,
                       "first_fetch_of_its_hosts_s": round(first_fetch, 2)
                       if first_fetch is not None else None}
                results.append(res)
                print(f"takeover: {res}", flush=True)
                pool.start_one(started)
                started += 1
                settle(frontier, 3)
        finally:
            pool.stop()
            client.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    done = [r for r in results if r["all_partitions_moved_s"] is not None]
    fetch = [r["first_fetch_of_its_hosts_s"] for r in results
             if r["first_fetch_of_its_hosts_s"] is not None]
    return {
        "members": 3, "partition_ttl_s": config.partition_ttl_s,
        "heartbeat_interval_s": round(config.partition_ttl_s / 3, 2), "trials": results,
        "median_all_partitions_moved_s":
            statistics.median(r["all_partitions_moved_s"] for r in done) if done else None,
        "median_first_fetch_s": statistics.median(fetch) if fetch else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", default="1,2,4", help="member counts for idle and load")
    ap.add_argument("--window-s", type=float, default=20.0)
    ap.add_argument("--monitor-s", type=float, default=5.0)
    ap.add_argument("--trials", type=int, default=3, help="takeover trials")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: idle,load,takeover")
    ap.add_argument("--out", default=str(BENCH / "results"))
    args = ap.parse_args()
    os.chdir(ROOT)  # `python -m workers.cli` of the workers must find the source under test
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    skip = set(filter(None, args.skip.split(",")))
    members = [int(x) for x in args.members.split(",")]
    scripts = script_names()
    work = Path(tempfile.mkdtemp(prefix="lease-cost-"))
    t_start = time.monotonic()
    result: dict[str, Any] = {
        "bench": "lease_cost", "commit": os.environ.get("TRAWL_COMMIT", ""),
        "source": str(ROOT), "host": platform.node(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "partitions": 64,
        "worker_concurrency": CONCURRENCY, "window_s": args.window_s,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_at_start": os.getloadavg(),  # the machine is shared: context for the figures
    }
    try:
        if "idle" not in skip:
            result["idle"] = [phase(work, n, None, args.window_s, args.monitor_s, scripts)
                              for n in members]
        if "load" not in skip or "takeover" not in skip:
            with SandboxWeb(WEB, work / "requests.log") as web:
                if "load" not in skip:
                    result["load"] = [phase(work, n, web, args.window_s, args.monitor_s,
                                            scripts) for n in members]
                if "takeover" not in skip:
                    result["takeover"] = takeover(work, web, args.trials)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["elapsed_s"] = round(time.monotonic() - t_start, 1)
    result["loadavg_at_end"] = os.getloadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"lease-cost-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path} ({result['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
