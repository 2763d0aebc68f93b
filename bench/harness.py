"""Trawl against Scrapy, scrapy-redis and a bare loop on one sandbox web (issue 7).

Started by ``bench/run`` (which prepares bench/.venv-peers); see docs/benchmarks.md.

Everything is judged from the sandbox server's request log: distinct pages fetched, duplicate
fetches, politeness. CPU is read from /proc (utime + stime of every process of the crawler, its
descendants and its Redis), and cross-checked against getrusage(RUSAGE_CHILDREN).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
#: Trawl's source under test: a snapshot of a commit (bench/run exports TRAWL_SRC, made by
#: `git archive`), so edits in progress in the work tree cannot break or skew a run.
ROOT = Path(os.environ.get("TRAWL_SRC") or BENCH.parent).resolve()
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from frontier.redisserver import EmbeddedRedis  # noqa: E402
from sandbox import LogEntry, RobotsKind, SandboxConfig, SandboxSite, SandboxWeb  # noqa: E402
from sandbox.looplag import lag_between, lag_path, read_lag  # noqa: E402

sys.path.insert(0, str(BENCH))  # bench/internet.py, bench/profile_summary.py
from logcounts import repeats_after_an_answer  # noqa: E402

PEER_PY = BENCH / ".venv-peers" / "bin" / "python"
TRAWL_PY = Path(sys.executable)


def ensure_py_spy() -> None:
    """--profile needs py-spy next to this interpreter: install it (pip) on a fresh machine."""
    if not (TRAWL_PY.parent / "py-spy").exists():
        print("installing py-spy for --profile", flush=True)
        subprocess.run([str(TRAWL_PY), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", "py-spy"], check=True)
CLK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
TOL_S = 0.002  # same tolerance as tests/checks.py
ROBOTS_PATHS = ("/robots.txt", "/robots-real.txt")
#: Trawl's soft-404 probe of a host (workers/pipeline/soft404.py PROBE_PREFIX): like robots.txt
#: a request a crawler makes for itself, not a page of the web, so not counted as one (peers
#: make none; counting them gave Trawl ~1 page in 5 for free on the internet-like web).
PROBE_PATH_PREFIX = "/trawl-probe-"


# --------------------------------------------------------------------------------- /proc
def _stat(pid: int) -> tuple[int, float, int] | None:
    """(ppid, cpu seconds, rss bytes) of a live process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK, int(fields[21]) * PAGE


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
    except OSError:
        return ""


@dataclass
class Sampler:
    """Polls the process trees under ``roots`` (plus ``extra`` pids) every ``interval_s``."""

    roots: list[int]
    extra: list[int] = field(default_factory=list)
    interval_s: float = 0.2
    cpu: dict[int, float] = field(default_factory=dict)  # last seen cpu seconds per pid
    cmd: dict[int, str] = field(default_factory=dict)
    series: list[tuple[float, float]] = field(default_factory=list)  # (time.time, total cpu)
    peak_rss: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def pids(self) -> list[int]:
        children: dict[int, list[int]] = defaultdict(list)
        for d in os.listdir("/proc"):
            if d.isdigit():
                st = _stat(int(d))
                if st:
                    children[st[0]].append(int(d))
        out, todo = [], list(self.roots)
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(children.get(p, []))
        return out + [p for p in self.extra if p not in out]

    def sample(self) -> None:
        rss = 0
        for pid in self.pids():
            st = _stat(pid)
            if st is None:
                continue
            self.cpu[pid] = st[1]
            rss += st[2]
            if pid not in self.cmd:
                self.cmd[pid] = _cmd(pid)
        self.peak_rss = max(self.peak_rss, rss)
        self.series.append((time.time(), sum(self.cpu.values())))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def cpu_between(self, t0: float, t1: float) -> float:
        def at(t: float) -> float:
            best = self.series[0][1]
            for ts, c in self.series:
                if ts > t:
                    break
                best = c
            return best
        return at(t1) - at(t0) if self.series else 0.0


def cpu_of(pid: int) -> float:
    st = _stat(pid)
    return st[1] if st else 0.0


# ----------------------------------------------------------------------------- log analysis
def reachable_pages(cfg: SandboxConfig, port: int = 80) -> int:
    """Pages a crawler obeying no robots.txt can reach from the seeds (the coverage base)."""
    site = SandboxSite(cfg, port)
    return sum(1 for k in site.expected_fetches(site.seeds(), "*").values() if k == "page")


def analyze(entries: list[LogEntry], web: SandboxWeb, token: str, delay_s: float,
            obeys_robots: bool, oracle: bool = True) -> dict[str, Any]:
    """``oracle`` False skips the walk of expected fetches (~50 s for 100,000 pages): coverage
    is then None."""
    site = web.site
    port = web.port
    robots = [e for e in entries if e.path in ROBOTS_PATHS]
    probes = [e for e in entries if e.path.startswith(PROBE_PATH_PREFIX)]
    pages = [e for e in entries
             if e.path not in ROBOTS_PATHS and not e.path.startswith(PROBE_PATH_PREFIX)]
    counts = Counter(f"{e.host}{e.path}" for e in pages)
    ok200 = {f"{e.host}{e.path}" for e in pages if e.status == 200}
    by_host: dict[str, list[LogEntry]] = defaultdict(list)
    for e in entries:
        by_host[e.host].append(e)
    overlaps = short_start = short_end = 0
    for group in by_host.values():
        group.sort(key=lambda e: e.start)
        for a, b in itertools.pairwise(group):
            if b.start < a.end - TOL_S:
                overlaps += 1
            if b.start - a.start < delay_s - TOL_S:
                short_start += 1
            if b.start - a.end < delay_s - TOL_S:
                short_end += 1
    disallowed = 0
    disallowed_kinds: Counter[str] = Counter()
    rules: dict[str, Any] = {}
    for e in pages:
        if site.robots_kind(e.host) is RobotsKind.HANG:
            continue  # hang_s is below every timeout here: its robots.txt does answer (allow)
        r = rules.get(e.host) or rules.setdefault(e.host, site.robots_rules(e.host))
        if not r.allowed(f"http://{e.host}:{port}{e.path}", token):
            disallowed += 1
            disallowed_kinds[str(site.robots_kind(e.host))] += 1
    expected = site.expected_fetches(web.seeds, token) if oracle else {}
    expected_pages = {re.sub(r":\d+(?=/|$)", "", u.split("://", 1)[1], count=1)
                      for u, k in expected.items() if k not in ("robots", "timeout")}
    t0 = min((e.start for e in entries), default=0.0)
    t1 = max((e.end for e in entries), default=0.0)
    return {
        "requests": len(entries),
        "robots_requests": len(robots),
        "probe_requests": len(probes),
        "page_requests": len(pages),
        "distinct_pages": len(counts),
        "distinct_200": len(ok200),
        "duplicate_fetches": len(pages) - len(counts),
        "urls_fetched_more_than_once": sum(1 for n in counts.values() if n > 1),
        "duplicates_after_an_answer": repeats_after_an_answer(pages),
        "hosts": len(by_host),
        "expected_pages_for_token": len(expected_pages),
        "coverage_of_expected": round(len(set(counts) & expected_pages)
                                      / max(1, len(expected_pages)), 4) if oracle else None,
        "bytes_served": sum(e.bytes for e in entries),
        "first_request": t0,
        "last_request_end": t1,
        "window_s": round(t1 - t0, 3),
        "politeness": {
            "host_overlaps": overlaps,
            "gaps_start_to_start_under_delay": short_start,
            "gaps_end_to_start_under_delay": short_end,
            "robots_disallowed_fetched": disallowed if obeys_robots else None,
            "robots_disallowed_by_robots_kind": dict(disallowed_kinds),
            "ok": overlaps == 0 and short_start == 0 and (not obeys_robots or disallowed == 0),
        },
    }


def redis_figures(client: redis.Redis) -> dict[str, Any]:
    stats = client.info("commandstats")
    calls = {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()}
    net = client.info("stats")
    mem = client.info("memory")
    return {
        "commands": sum(calls.values()),
        "by_command": dict(sorted(calls.items(), key=lambda kv: -kv[1])),
        "net_bytes": int(net["total_net_input_bytes"]) + int(net["total_net_output_bytes"]),
        "used_memory_peak": int(mem["used_memory_peak"]),
    }


# ---------------------------------------------------------------------------------- runs
@dataclass
class Bench:
    web: SandboxWeb
    work: Path
    delay_s: float
    procs: int
    threads: int
    scrapy_concurrency: int
    cap_s: float
    profile_path: Path | None = None
    profile_s: float = 20.0
    monitor: bool = False
    oracle: bool = True  # coverage against the sandbox's oracle (off on big webs: slow)

    def extra_figures(self, entries: list[LogEntry], a: dict[str, Any]) -> dict[str, Any]:
        """More figures from a run's log entries (bench/internet.py adds fetches in flight)."""
        return {}

    def _start_redis(self, name: str) -> tuple[EmbeddedRedis, redis.Redis]:
        r = EmbeddedRedis(self.work / f"redis-{name}").start()
        client = redis.Redis(host=r.host, port=r.port)
        client.config_resetstat()
        return r, client

    def _run(self, name: str, argv: list[str], token: str, obeys_robots: bool,
             use_redis: bool, env_extra: dict[str, str] | None = None,
             setup=None, procs_argv: list[list[str]] | None = None) -> dict[str, Any]:
        red, client = self._start_redis(name) if use_redis else (None, None)
        ctx: dict[str, Any] = {"redis_url": red.url if red else ""}
        if setup:
            argvs = setup(ctx)
        else:
            argvs = [argv]
        t_start = time.time()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        web_cpu0 = cpu_of(self.web.pid)
        lag0 = read_lag(lag_path(self.web.log_path))
        logf = open(self.work / f"{name}.log", "ab")
        env = {**os.environ, **(env_extra or {}),
               "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        ps = [subprocess.Popen(a, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=env, cwd=ROOT, start_new_session=True) for a in argvs]
        sampler = Sampler([p.pid for p in ps], [red.pid] if red and red.pid else []).start()
        mon: dict[str, int] = Counter()
        if self.monitor and red:
            threading.Thread(target=_monitor, args=(red.url, mon), daemon=True).start()
        prof = None
        if self.profile_path is not None and name == "trawl":
            prof = threading.Thread(target=self._profile, args=(sampler,), daemon=True)
            prof.start()
        deadline = time.monotonic() + self.cap_s
        capped = False
        for p in ps:
            left = deadline - time.monotonic()
            try:
                p.wait(max(0.1, left))
            except subprocess.TimeoutExpired:
                capped = True
        if capped:
            for p in ps:
                if p.poll() is None:
                    with _suppress():
                        os.kill(p.pid, signal.SIGINT)
            for p in ps:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        sampler.sample()
        # anything left of the tree, also orphans re-parented to init (Trawl's workers run in
        # their own sessions): every pid seen, if it still runs the same command line; never
        # the web or our Redis
        for pid in set(sampler.pids()) | set(sampler.cmd):
            if (red is None or pid != red.pid) and pid != self.web.pid \
                    and _cmd(pid) == sampler.cmd.get(pid, _cmd(pid)) and _cmd(pid):
                with _suppress():
                    os.kill(pid, signal.SIGKILL)
        for p in ps:
            with _suppress():
                p.wait(5)
        sampler.stop()
        if prof:
            prof.join(self.profile_s + 30)
        t_end = time.time()
        rfig = redis_figures(client) if client else None
        if red:
            red.stop()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        logf.close()
        time.sleep(0.3)  # the server's log flushes every 0.1 s
        entries = [e for e in self.web.read_log()
                   if e.start >= t_start - 0.01 and e.ua.startswith(token)]
        a = analyze(entries, self.web, token.split("/")[0].lower(), self.delay_s, obeys_robots,
                    self.oracle)
        window = a["window_s"] or (t_end - t_start)
        cpu_proc = sum(sampler.cpu.values())
        cpu_rusage = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        cpu_window = sampler.cpu_between(a["first_request"], a["last_request_end"])
        n = a["distinct_pages"]
        per_proc: dict[str, float] = defaultdict(float)
        for pid, c in sampler.cpu.items():
            per_proc[_label(sampler.cmd.get(pid, ""), red.pid if red else None, pid)] += c
        out: dict[str, Any] = {
            "crawler": name,
            "capped": capped,
            "exit_codes": [p.returncode for p in ps],
            "wall_s": round(t_end - t_start, 2),
            **a,
            "pages_per_s": round(n / window, 2) if window > 0 else 0.0,
            "cpu_s": round(cpu_proc, 2),
            "cpu_s_in_window": round(cpu_window, 2),
            "cpu_s_rusage_children": round(cpu_rusage, 2),
            "cpu_by_process": {k: round(v, 2) for k, v in sorted(per_proc.items())},
            "pages_per_cpu_s": round(n / cpu_proc, 2) if cpu_proc else 0.0,
            "pages_per_cpu_s_in_window": round(n / cpu_window, 2) if cpu_window else 0.0,
            "peak_rss_mb": round(sampler.peak_rss / 2**20, 1),
            "processes_seen": len(sampler.cpu),
            "server_cpu_s": round(cpu_of(self.web.pid) - web_cpu0, 2),
        }
        out["server_cpu_share_of_core"] = round(out["server_cpu_s"] / window, 3) if window else 0
        # how late the web's event loop ran over the run: a web that lags is the bottleneck
        out["server_loop_lag"] = lag_between(lag0, read_lag(lag_path(self.web.log_path)))
        out.update(self.extra_figures(entries, a))
        if mon:
            out["monitor"] = dict(mon)
            out["redis_client_commands_per_page"] = round(mon["client"] / max(1, n), 2)
            out["redis_lua_commands_per_page"] = round(mon["lua"] / max(1, n), 2)
        if rfig:
            out["redis"] = rfig
            out["redis_commands_per_page"] = round(rfig["commands"] / max(1, n), 2)
            out["redis_bytes_per_page"] = round(rfig["net_bytes"] / max(1, n), 1)
        else:
            out["redis"] = None
            out["redis_commands_per_page"] = 0.0
            out["redis_bytes_per_page"] = 0.0
        print(f"  {name}: {n} distinct pages in {window:.1f} s = {out['pages_per_s']:.1f} pages/s, "
              f"{out['pages_per_cpu_s']:.1f} pages/CPU-s, dup {a['duplicate_fetches']}, "
              f"polite={a['politeness']['ok']}, capped={capped}", flush=True)
        return out

    def _profile(self, sampler: Sampler) -> None:
        """py-spy one Trawl worker for profile_s seconds once it is busy."""
        time.sleep(6.0)
        workers = [p for p, c in sampler.cmd.items() if "workers.cli" in c and " worker" in c]
        if not workers:
            print("  (profile: no worker process found)", flush=True)
            return
        assert self.profile_path is not None
        raw = self.work / f"{self.profile_path.stem}.pyspy.raw"
        cmd = [str(TRAWL_PY.parent / "py-spy"), "record", "-p", str(workers[0]), "-d",
               str(int(self.profile_s)), "-f", "raw", "-o", str(raw), "--nonblocking", "--gil", "-r", "100"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0 or not raw.exists():
            print(f"  (profile failed: {res.stderr.strip()[-300:]})", flush=True)
            return
        sys.path.insert(0, str(BENCH))
        from profile_summary import summarize

        assert self.profile_path is not None
        self.profile_path.write_text(summarize(raw.read_text(), header=(
            f"py-spy record of one Trawl worker ({self.profile_s:.0f} s, 100 Hz, --nonblocking --gil: only the thread holding the GIL is sampled, so samples are CPU, not waits) "
            f"during bench/run on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}.\n"
            f"Trawl: {self.procs} workers, defaults, delay {self.delay_s} s.\n")))
        print(f"  profile summary written to {self.profile_path}", flush=True)

    # -- the four crawlers --------------------------------------------------------------
    def scrapy(self, concurrency: int | None = None) -> dict[str, Any]:
        cfg = self._scrapy_cfg("scrapy", concurrency or self.scrapy_concurrency, "")
        path = self.work / "scrapy.json"
        path.write_text(json.dumps(cfg))
        res = self._run("scrapy", [str(PEER_PY), str(BENCH / "peers" / "scrapy_crawl.py"),
                                   str(path)], "ScrapyBench/", True, False)
        res["concurrent_requests"] = cfg["concurrent_requests"]
        return res

    def _scrapy_cfg(self, mode: str, concurrency: int, redis_url: str, i: int = 0) -> dict:
        return {
            "mode": mode, "seeds": self.web.seeds, "resolver_map": self.web.resolver_map,
            "allowed_domains": [self.web.config.domain], "delay_s": self.delay_s,
            "concurrent_requests": concurrency,
            "user_agent": ("ScrapyBench/1.0" if mode == "scrapy" else "ScrapyRedisBench/1.0")
            + " (+https://example.org/bench)",
            "redis_url": redis_url, "redis_key": "bench:start_urls", "seed_redis": i == 0,
            # a scrapy-redis process idle this long ends: long enough that one starved in the
            # first seconds (3 seeds, all taken by the other) stays; a run is capped anyway
            "idle_close_s": 30, "timeout_s": int(self.cap_s),
            "stats_path": str(self.work / f"{mode}-{i}.stats.json"),
        }

    def scrapy_redis(self) -> dict[str, Any]:
        def setup(ctx: dict[str, Any]) -> list[list[str]]:
            argvs = []
            for i in range(self.procs):
                cfg = self._scrapy_cfg("scrapy-redis", self.scrapy_concurrency, ctx["redis_url"], i)
                path = self.work / f"scrapy-redis-{i}.json"
                path.write_text(json.dumps(cfg))
                argvs.append([str(PEER_PY), str(BENCH / "peers" / "scrapy_crawl.py"), str(path)])
            # seed first (process 0 pushes on start; pushing here avoids an idle race)
            r = redis.Redis.from_url(ctx["redis_url"])
            r.lpush("bench:start_urls", *self.web.seeds)
            for i in range(self.procs):
                p = self.work / f"scrapy-redis-{i}.json"
                c = json.loads(p.read_text())
                c["seed_redis"] = False
                p.write_text(json.dumps(c))
            return argvs

        res = self._run("scrapy-redis", [], "ScrapyRedisBench/", True, True, setup=setup)
        res["processes"] = self.procs
        res["concurrent_requests"] = self.scrapy_concurrency
        return res

    def bare(self) -> dict[str, Any]:
        cfg = {"seeds": self.web.seeds, "resolver_map": self.web.resolver_map,
               "domain": self.web.config.domain, "delay_s": self.delay_s, "procs": self.procs,
               "threads": self.threads, "user_agent": "BareLoop/1.0", "timeout_s": self.cap_s}
        path = self.work / "bare.json"
        path.write_text(json.dumps(cfg))
        res = self._run("bare-loop", [str(TRAWL_PY), str(BENCH / "bare_loop.py"), str(path)],
                        "BareLoop/", False, False)
        res["processes"] = self.procs
        return res

    def trawl_args(self) -> list[str]:
        """Trawl's arguments specific to this web: none, Trawl runs with its defaults.

        Until 2026-12-05 this passed ``--concurrency THREADS`` (8), which meant threads per
        worker before the fetch engine and means fetches in flight per worker since: 16 URLs
        in the engines at once, each holding its slot through the batched write-back, held
        Trawl at ~110 pages/s on this web (bench/results/quick-20261205-193344.json)."""
        return []

    def trawl(self, run: int) -> dict[str, Any]:
        out = self.work / f"trawl-out-{run}"
        argv_holder: dict[str, list[str]] = {}

        # The sandbox's host map in a file: 5,000 hosts are too long for a command line.
        settings = self.work / f"trawl-settings-{run}.json"
        settings.write_text(json.dumps({"allow_private_ips": True,
                                        "static_hosts": self.web.resolver_map}))

        def setup(ctx: dict[str, Any]) -> list[list[str]]:
            argv = [str(TRAWL_PY.parent / "trawl"), "crawl", *self.web.seeds,
                    "--redis", ctx["redis_url"], "--workers", str(self.procs),
                    "--allow", self.web.config.domain,
                    "--output", str(out), "--summary-json", str(out / "summary.json"),
                    "--no-progress", "--delay", str(self.delay_s), "--ip-concurrency", "0",
                    "--config", str(settings),
                    "--set", "adaptive_delay_factor=0", *self.trawl_args(), *trawl_sets()]
            argv_holder["argv"] = argv
            return [argv]

        res = self._run("trawl", [], "Trawl/", True, True, setup=setup)
        res["processes"] = self.procs
        summary = out / "summary.json"
        res["trawl_summary"] = json.loads(summary.read_text()) if summary.exists() else None
        # the WARC files only: the CDXJ index beside each one is not archive bytes
        res["warc_bytes"] = sum(p.stat().st_size for p in (out / "warc").glob("*.warc*"))
        res["cdxj_bytes"] = sum(p.stat().st_size for p in (out / "warc").glob("*.cdxj"))
        return res


def trawl_sets() -> list[str]:
    """``--set`` arguments from ``--trawl-set`` (kept in the environment, so bench/internet.py
    and every run see them): the same Trawl commit with one setting changed, for A/B runs."""
    out: list[str] = []
    for kv in json.loads(os.environ.get("TRAWL_BENCH_SET") or "[]"):
        out += ["--set", kv]
    return out


def _monitor(url: str, counts: Counter[str]) -> None:
    """Count commands sent by clients vs run inside Lua scripts (MONITOR marks them 'lua')."""
    try:
        with redis.Redis.from_url(url).monitor() as m:
            for cmd in m.listen():
                kind = "lua" if cmd.get("client_type") == "lua" else "client"
                counts[kind] += 1
                if kind == "client":
                    counts["client:" + str(cmd.get("command", "")).split(" ")[0].lower()] += 1
    except (redis.RedisError, OSError, ValueError):
        return


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], (OSError, ProcessLookupError))


def _label(cmd: str, redis_pid: int | None, pid: int) -> str:
    if redis_pid is not None and pid == redis_pid:
        return "redis-server"
    if "workers.cli" in cmd and " worker" in cmd:
        return "trawl worker"
    if "trawl crawl" in cmd or cmd.endswith("crawl") or "/trawl crawl" in cmd:
        return "trawl crawl (scheduler)"
    if "scrapy_crawl.py" in cmd:
        return "scrapy process"
    if "bare_loop.py" in cmd:
        return "bare-loop process"
    return cmd.split(" ")[0].rsplit("/", 1)[-1] or "other"


# ---------------------------------------------------------------------------------- main
def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median pages/s (its other figures kept together)."""
    ordered = sorted(runs, key=lambda r: r["pages_per_s"])
    med = dict(ordered[len(ordered) // 2])
    med["runs_pages_per_s"] = [r["pages_per_s"] for r in runs]
    med["median_pages_per_s"] = statistics.median(r["pages_per_s"] for r in runs)
    return med


def paired_ratios(allruns: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Trawl's ratio to each peer within each round (the runs minutes apart), then the median
    over rounds: on a shared machine whose speed drifts during a long run, pairs taken in one
    round compare like with like better than the ratio of two medians of different rounds."""
    out: dict[str, dict[str, Any]] = {}
    trawl = allruns.get("trawl", [])
    for name, runs in allruns.items():
        if name == "trawl":
            continue
        pairs = list(zip(trawl, runs, strict=False))
        fig: dict[str, Any] = {"rounds": len(pairs)}
        for key in ("pages_per_s", "pages_per_cpu_s"):
            vals = [t[key] / r[key] for t, r in pairs if r.get(key)]
            fig[key] = round(statistics.median(vals), 2) if vals else 0.0
            fig[f"{key}_by_round"] = [round(v, 2) for v in vals]
        out[name] = fig
    return out


def print_ratios(ratios: dict[str, dict[str, Any]], paired: dict[str, dict[str, Any]]) -> None:
    """Trawl's pages/s and pages/CPU-s against each other crawler: medians, then by round."""
    for k, r in ratios.items():
        print(f"trawl/{k}: pages/s x{r['pages_per_s']:.2f}, pages/CPU-s x{r['pages_per_cpu_s']:.2f}")
    for k, r in paired.items():
        print(f"trawl/{k} paired by round (median of {r['rounds']}): pages/s "
              f"x{r['pages_per_s']:.2f}, pages/CPU-s x{r['pages_per_cpu_s']:.2f}")


def table(results: dict[str, dict[str, Any]]) -> str:
    cols = [("crawler", "crawler", "{}"), ("pages/s", "pages_per_s", "{:.1f}"),
            ("pages/CPU-s", "pages_per_cpu_s", "{:.1f}"), ("CPU s", "cpu_s", "{:.1f}"),
            ("distinct", "distinct_pages", "{}"), ("dup", "duplicate_fetches", "{}"),
            ("cover", "coverage_of_expected", "{:.3f}"), ("peak RSS MB", "peak_rss_mb", "{:.0f}"),
            ("redis cmd/pg", "redis_commands_per_page", "{:.1f}"),
            ("redis B/pg", "redis_bytes_per_page", "{:.0f}"),
            ("srv core", "server_cpu_share_of_core", "{:.2f}"), ("polite", None, "{}"),
            ("capped", "capped", "{}")]
    rows = [[c[0] for c in cols]]
    for r in results.values():
        row = []
        for _h, key, fmt in cols:
            row.append(str(r["politeness"]["ok"]) if key is None else fmt.format(r[key]))
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


#: The zero-latency web is made big enough that a crawler this fast does not fetch all of it
#: within the cap. With 100 pages a host (the web until 2026-12-07) Trawl fetched 99% of it
#: in 39 s of a 60 s cap; the rest of the window went on the one host that answers after
#: 0.5 s, fetched politely one page at a time (1-2 requests/s), so its pages/s measured the
#: size of the web, not the crawler (docs/benchmarks.md, "Zero-latency web with the fetch
#: engine, and a web sized to the cap").
ZERO_WEB_RATE = 1000
ZERO_WEB_MIN_PAGES = 100


def zero_web_pages(cap_s: float, hosts: int) -> int:
    """Pages per host of the zero-latency web for runs of ``cap_s`` seconds."""
    return max(ZERO_WEB_MIN_PAGES, math.ceil(ZERO_WEB_RATE * cap_s / hosts))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--web", choices=("zero", "internet", "all"), default="all",
                    help="zero: the zero-latency web; internet: the internet-like web "
                         "(bench/internet.py); all (default): both, the internet-like last")
    ap.add_argument("--quick", action="store_true", help="1 run each, short caps (< 3 min)")
    ap.add_argument("--runs", type=int, help="runs per crawler (default 3, quick 1)")
    ap.add_argument("--cap", type=float, help="seconds per crawler run (default 150, quick 25)")
    ap.add_argument("--delay", type=float, default=0.02, help="per-host delay for all (s)")
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 2,
                    help="Trawl workers = scrapy-redis processes = bare-loop processes")
    ap.add_argument("--threads", type=int, default=8, help="bare-loop threads per process")
    ap.add_argument("--scrapy-concurrency", type=int, default=32)
    ap.add_argument("--tune-scrapy", default="", help="comma list: sweep CONCURRENT_REQUESTS")
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages-per-host", type=int, default=None,
                    help="zero-latency web: pages per host (default: enough that "
                         f"{ZERO_WEB_RATE} pages/s for the whole cap does not exhaust it, "
                         f"at least {ZERO_WEB_MIN_PAGES})")
    ap.add_argument("--only", default="scrapy,scrapy-redis,bare-loop,trawl")
    ap.add_argument("--profile", action="store_true", help="py-spy a Trawl worker (first run)")
    ap.add_argument("--profile-s", type=float, default=20.0,
                    help="seconds --profile samples (100 Hz; longer: finer per-page figures)")
    ap.add_argument("--results", default=str(BENCH / "results"))
    ap.add_argument("--monitor", action="store_true",
                    help="extra short runs of the Redis users under MONITOR: exact client vs "
                         "Lua command counts (MONITOR slows Redis: not used for the timings)")
    ap.add_argument("--keep", action="store_true", help="keep bench/work/STAMP (logs, WARC)")
    ap.add_argument("--trawl-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a crawl setting for Trawl's runs (repeatable), e.g. "
                         "fetch_engine=threads")
    ap.add_argument("--no-prerender", action="store_true",
                    help="let the server render pages as they are asked for (~1 ms of its CPU "
                         "a page, on the crawlers' cores) instead of all before the runs")
    from internet import add_args

    add_args(ap)
    return ap.parse_args(argv)


def main() -> int:
    a = parse_args()
    os.environ["TRAWL_BENCH_SET"] = json.dumps(a.trawl_set)
    rc = 0
    if a.web in ("zero", "all"):
        rc = run_zero(a, "" if a.web == "zero" else "zero-latency web: ")
    if a.web in ("internet", "all") and rc == 0:
        from internet import run_internet

        rc = run_internet(a)
    return rc


def run_zero(a: argparse.Namespace, label: str = "") -> int:
    runs = a.runs or (1 if a.quick else 3)
    cap = a.cap or (25.0 if a.quick else 150.0)
    only = a.only.split(",")
    if "scrapy" in only or "scrapy-redis" in only:
        if not PEER_PY.exists():
            print(f"{PEER_PY} missing: run bench/run (it installs the peers)", file=sys.stderr)
            return 2
    pages = a.pages_per_host or zero_web_pages(cap, a.hosts)
    cfg = SandboxConfig(seed=1, hosts=a.hosts, pages_per_host=pages, ips=50,
                        crawl_delay_s=a.delay, robots_slow_s=0.2, slow_page_s=0.2, hang_s=0.5)
    results_dir = Path(a.results)
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work = BENCH / "work" / stamp
    work.mkdir(parents=True, exist_ok=True)
    # The oracle's walk (~10 s) runs in a thread while the server starts and prerenders (~14
    # s): the link graph does not depend on the port, so any port gives the same count.
    with ThreadPoolExecutor(1) as oracle:
        counting = oracle.submit(reachable_pages, cfg)
        with SandboxWeb(cfg, work / "requests.log", prerender=not a.no_prerender,
                        start_timeout_s=180.0) as web:
            n_pages = counting.result()  # re-raises the walk's error, if any
            print(f"sandbox web: {cfg.hosts} hosts x {cfg.pages_per_host} pages, "
                  f"{len(web.seeds)} seeds, {n_pages} reachable pages, port {web.port}; "
                  f"{os.cpu_count()} cores; delay {a.delay} s; {a.procs} processes; "
                  f"{runs} run(s) each, cap {cap:.0f} s", flush=True)
            if web.prerendered:
                print(f"server prerendered {web.prerendered['pages']} pages in "
                      f"{web.prerendered['seconds']} s", flush=True)
            if a.profile:
                ensure_py_spy()
            bench = Bench(web, work, a.delay, a.procs, a.threads, a.scrapy_concurrency, cap,
                          BENCH / "profiles" / "trawl-worker-bench.txt" if a.profile else None)
            bench.profile_s = a.profile_s
            tune: dict[int, float] = {}
            if a.tune_scrapy:
                for c in [int(x) for x in a.tune_scrapy.split(",")]:
                    print(f"tuning scrapy CONCURRENT_REQUESTS={c}", flush=True)
                    tune[c] = bench.scrapy(c)["pages_per_s"]
                bench.scrapy_concurrency = max(tune, key=lambda c: tune[c])
                print(f"best CONCURRENT_REQUESTS={bench.scrapy_concurrency}", flush=True)
            allruns: dict[str, list[dict[str, Any]]] = defaultdict(list)
            counts_only: dict[str, Any] = {}
            for run in range(runs):
                print(f"run {run + 1}/{runs}", flush=True)
                for name in only:
                    if name == "scrapy":
                        allruns[name].append(bench.scrapy())
                    elif name == "scrapy-redis":
                        allruns[name].append(bench.scrapy_redis())
                    elif name == "bare-loop":
                        allruns[name].append(bench.bare())
                    elif name == "trawl":
                        allruns[name].append(bench.trawl(run))
                        bench.profile_path = None
            if a.monitor:
                print("MONITOR runs (command counts only)", flush=True)
                bench.monitor, bench.cap_s = True, min(cap, 30.0)
                for name in only:
                    if name in ("scrapy-redis", "trawl"):
                        r = bench.scrapy_redis() if name == "scrapy-redis" else bench.trawl(99)
                        counts_only[name] = {
                            k: r.get(k) for k in ("monitor", "redis_client_commands_per_page",
                                                  "redis_lua_commands_per_page",
                                                  "redis_commands_per_page", "distinct_pages")}
                        print(f"  {name}: client commands/page "
                              f"{r.get('redis_client_commands_per_page')}, inside Lua "
                              f"{r.get('redis_lua_commands_per_page')}", flush=True)
            server_cpu_total = cpu_of(web.pid)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    results = {k: median_run(v) for k, v in allruns.items()}
    ratios: dict[str, dict[str, float]] = {}
    if "trawl" in results:
        t = results["trawl"]
        for k, r in results.items():
            if k != "trawl":
                ratios[k] = {
                    "pages_per_s": round(t["pages_per_s"] / r["pages_per_s"], 2)
                    if r["pages_per_s"] else 0.0,
                    "pages_per_cpu_s": round(t["pages_per_cpu_s"] / r["pages_per_cpu_s"], 2)
                    if r["pages_per_cpu_s"] else 0.0,
                }
    paired = paired_ratios(allruns)
    doc = {
        "when": stamp, "quick": a.quick, "trawl_source": str(ROOT),
        "trawl_commit": os.environ.get("TRAWL_COMMIT", ""), "trawl_set": trawl_sets(),
        "machine": {
            "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version()},
        "sandbox": {**cfg.to_dict(), "seeds": len(web.seeds), "reachable_pages": n_pages,
                    "server_cpu_s_total": round(server_cpu_total, 2),
                    "prerendered": web.prerendered},
        "delay_s": a.delay, "runs": runs, "cap_s": cap, "procs": a.procs, "threads": a.threads,
        "scrapy_tuning_pages_per_s": tune, "results": results, "all_runs": allruns,
        "trawl_ratio": ratios, "trawl_ratio_paired": paired,
        "monitor_command_counts": counts_only,
    }
    name = f"{'quick' if a.quick else 'full'}-{stamp}.json"
    (results_dir / name).write_text(json.dumps(doc, indent=1))
    (results_dir / f"latest-{'quick' if a.quick else 'full'}.json").write_text(
        json.dumps(doc, indent=1))
    print()
    print(table(results))
    print()
    print_ratios(ratios, paired)
    print(f"results: {results_dir / name}")
    if "scrapy" in ratios:
        print(f"{label}trawl/scrapy pages_per_s ratio: {ratios['scrapy']['pages_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
