"""The internet-like web of bench/run (``--web internet``; part of the default ``--web all``).

A sandbox web of 5,000 hosts x 20 pages with the sandbox's latency model on (per-request
latency drawn around a 0.15 s median, slow hosts, failures, trickled bodies, idle keep-alive
closes) and about half the hosts on HTTPS, a 1 s per-host delay and one request per host.
Politeness, not CPU, is what a crawler of the real web is bound by; this web measures how close
each crawler gets to the politeness ceiling, hosts / (delay + mean response time).

On it, in one run: Scrapy at its best CONCURRENT_REQUESTS (a sweep, Scrapy's broad-crawl
settings), scrapy-redis with as many processes as Trawl has workers at that setting, the bare
loop (the faster of bench/async_loop.py and bench/bare_loop.py with many threads: a fair
ceiling, robots.txt obeyed), and Trawl with its defaults. Then Trawl once more on the same web
with latency off: its own CPU-bound rate. Every figure comes from the sandbox's request log, as
on the zero-latency web (bench/harness.py); fetches in flight are integrated over the log.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import internet_rtt
from harness import (
    BENCH,
    PEER_PY,
    ROOT,
    TRAWL_PY,
    Bench,
    LogEntry,
    SandboxConfig,
    cpu_of,
    ensure_py_spy,
    median_run,
    paired_ratios,
    print_ratios,
    reachable_pages,
    trawl_sets,
)

HOSTS, PAGES_PER_HOST, IPS, DELAY_S = 5000, 20, 1000, 1.0


def add_args(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("internet-like web (--web internet|all)")
    g.add_argument("--internet-hosts", type=int, default=HOSTS)
    g.add_argument("--internet-pages-per-host", type=int, default=PAGES_PER_HOST)
    g.add_argument("--internet-ips", type=int, default=IPS,
                   help="loopback IPs the hosts share (ip_concurrency is 0 for every crawler)")
    g.add_argument("--internet-delay", type=float, default=DELAY_S, help="per-host delay (s)")
    g.add_argument("--internet-cap", type=float,
                   help="seconds per crawler run on this web (default: --cap; quick 20)")
    g.add_argument("--scrapy-sweep", default="",
                   help="CONCURRENT_REQUESTS values tried (default 100,500,2000; quick 500,2000)")
    g.add_argument("--bare-variants", default="async,threads-128",
                   help="bare loops tried, the fastest kept: async (asyncio + aiohttp, "
                        "bench/async_loop.py) and/or threads-N (bench/bare_loop.py, N threads "
                        "per process)")
    g.add_argument("--async-in-flight", type=int, default=1000,
                   help="async bare loop: fetches in flight per process at most")
    g.add_argument("--web-nice", type=int, default=-10 if os.geteuid() == 0 else 0,
                   help="the web server's niceness (default -10 as root, else 0): on one "
                        "machine the crawler's threads would otherwise starve the one-threaded "
                        "web of CPU and its answers come late (its loop lag is reported)")
    g.add_argument("--no-latency-off", action="store_true",
                   help="skip Trawl's run on the same web with latency off (its CPU-bound rate)")
    internet_rtt.add_args(g)


def internet_config(hosts: int, pages: int, ips: int, delay_s: float,
                    latency: bool = True) -> tuple[SandboxConfig, bool]:
    """The internet preset of the sandbox (``SandboxConfig.internet``) with the bench's sizes;
    (config, whether this sandbox has a latency model at all)."""
    kw: dict[str, Any] = {"seed": 1, "hosts": hosts, "pages_per_host": pages,
                          "ips": min(ips, hosts), "crawl_delay_s": delay_s,
                          "robots_slow_s": 0.2, "slow_page_s": 0.2, "hang_s": 0.5}
    preset = getattr(SandboxConfig, "internet", None)
    has_latency = preset is not None
    cfg = preset(**kw) if preset is not None else SandboxConfig(**kw)
    if has_latency and not latency:
        cfg = dataclasses.replace(cfg, latency=False)
    return cfg, has_latency


# --------------------------------------------------------------------------------- figures
def flight_figures(entries: list[LogEntry], t0: float, t1: float) -> dict[str, Any]:
    """Fetches in flight, time-averaged over [t0, t1] (the crawler's active window): the
    integral of #{requests with start <= t < end} dt / (t1 - t0), i.e. the summed durations
    clipped to the window over its length. Same method for every crawler."""
    window = t1 - t0
    busy = sum(max(0.0, min(e.end, t1) - max(e.start, t0)) for e in entries)
    durs = sorted(e.end - e.start for e in entries)
    # the peak: sweep the starts and ends
    events = sorted([(e.start, 1) for e in entries] + [(e.end, -1) for e in entries])
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return {
        "fetches_in_flight_mean": round(busy / window, 1) if window > 0 else 0.0,
        "fetches_in_flight_peak": peak,
        "response_s_mean": round(statistics.fmean(durs), 4) if durs else 0.0,
        "response_s_median": round(durs[len(durs) // 2], 4) if durs else 0.0,
        "https_requests": sum(1 for e in entries if getattr(e, "scheme", "") == "https"),
        **connection_figures(entries),
    }


def connection_figures(entries: list[LogEntry]) -> dict[str, Any]:
    """Keep-alive reuse as the server saw it: the share of requests that opened a connection
    (a TCP handshake, and a TLS one over HTTPS), overall and over HTTPS."""
    known = [e for e in entries if getattr(e, "conn_request", 0)]
    tls = [e for e in known if e.scheme == "https"]
    return {
        "new_connection_share": round(sum(e.conn_request == 1 for e in known) / len(known), 3)
        if known else None,
        "tls_handshakes": sum(e.conn_request == 1 for e in tls),
        "tls_new_connection_share": round(sum(e.conn_request == 1 for e in tls) / len(tls), 3)
        if tls else None,
    }


class InternetBench(Bench):
    """Bench with the internet-like web's crawler configurations."""

    bare_variant: str = "async"
    async_in_flight: int = 1000

    def extra_figures(self, entries: list[LogEntry], a: dict[str, Any]) -> dict[str, Any]:
        return flight_figures(entries, a["first_request"], a["last_request_end"])

    def _run(self, *args: Any, **kw: Any) -> dict[str, Any]:
        before = internet_rtt.line_stats()
        res = super()._run(*args, **kw)
        line = internet_rtt.line_delta(before)
        if line is not None:  # the delay line's work for this run (bench/internet_rtt.py)
            res["rtt_line"] = line
        return res

    def _scrapy_cfg(self, mode: str, concurrency: int, redis_url: str, i: int = 0) -> dict:
        cfg = super()._scrapy_cfg(mode, concurrency, redis_url, i)
        cfg["broad"] = True  # Scrapy's broad-crawl settings (bench/peers/scrapy_crawl.py)
        return cfg

    def bare(self) -> dict[str, Any]:
        variant = self.bare_variant
        cfg: dict[str, Any] = {
            "seeds": self.web.seeds, "resolver_map": self.web.resolver_map,
            "domain": self.web.config.domain, "delay_s": self.delay_s, "procs": self.procs,
            "user_agent": "BareLoop/1.0", "timeout_s": self.cap_s,
            "ca_path": getattr(self.web, "ca_path", None), "robots": True}
        if variant == "async":
            cfg["max_in_flight"] = self.async_in_flight
            script = "async_loop.py"
        else:
            cfg["threads"] = int(variant.split("-", 1)[1])
            cfg["internet"] = True  # https by name (pinned resolver), robots.txt obeyed
            script = "bare_loop.py"
        path = self.work / f"bare-{variant}.json"
        path.write_text(json.dumps(cfg))
        res = self._run("bare-loop", [str(TRAWL_PY), str(BENCH / script), str(path)],
                        "BareLoop/", True, False)
        res["processes"] = self.procs
        res["variant"] = variant
        return res

    def trawl_args(self) -> list[str]:
        # Trawl's defaults (fetch_concurrency 2500 per worker, ...) except what this web
        # needs: the 1 s delay (--delay, host_delay_s), no adaptive delay, no per-IP limit
        # (set in Bench.trawl) and the sandbox CA.
        ca = getattr(self.web, "ca_path", None)
        return ["--set", f"ca_bundle={json.dumps(str(ca))}"] if ca else []


# ------------------------------------------------------------------------------------ runs
def _label(r: dict[str, Any]) -> str:
    if r["crawler"] == "scrapy":
        return f"CONCURRENT_REQUESTS {r['concurrent_requests']}"
    if r["crawler"] == "scrapy-redis":
        return f"{r['processes']} procs x {r['concurrent_requests']}"
    if r["crawler"] == "bare-loop":
        return f"{r['processes']} procs, {r['variant']}"
    if r["crawler"] == "trawl":
        return f"{r['processes']} workers, defaults"
    return ""


def table(results: dict[str, dict[str, Any]]) -> str:
    cols = [("crawler", None, "{}"), ("config", "label", "{}"),
            ("pages/s", "pages_per_s", "{:.1f}"), ("pages/CPU-s", "pages_per_cpu_s", "{:.1f}"),
            ("CPU s", "cpu_s", "{:.1f}"), ("distinct", "distinct_pages", "{}"),
            ("dup", "duplicate_fetches", "{}"),
            ("dup answered", "duplicates_after_an_answer", "{}"),
            ("peak RSS MB", "peak_rss_mb", "{:.0f}"),
            ("in flight", "fetches_in_flight_mean", "{:.1f}"),
            ("resp ms", "response_s_mean", "{:.0f}"),
            ("srv core", "server_cpu_share_of_core", "{:.2f}"),
            ("srv late", "late_share", "{}"), ("new conn", "new_connection_share", "{}"),
            ("polite", "polite", "{}"), ("capped", "capped", "{}")]
    rows = [[c[0] for c in cols]]
    for name, r in results.items():
        row = []
        for _h, key, fmt in cols:
            if key is None:
                row.append(name)
            elif key == "label":
                row.append(_label(r))
            elif key == "polite":
                row.append(str(r["politeness"]["ok"]))
            elif key == "late_share":
                row.append(fmt.format((r.get("server_loop_lag") or {}).get(key, "-")))
            elif key == "new_connection_share":
                row.append(fmt.format(r.get(key, "-")))
            elif key == "response_s_mean":
                row.append(fmt.format(1000 * r[key]))
            else:
                row.append(fmt.format(r[key]))
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = ["  ".join(v.rjust(w) if i > 1 else v.ljust(w) for i, (v, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _sweep(bench: InternetBench, values: list[str], run_one, what: str) -> tuple[str, dict]:
    """Run each value once; the one with the best pages/s wins. Returns (best, {value: run})."""
    runs: dict[str, dict[str, Any]] = {}
    for v in values:
        print(f"  sweep {what}={v}", flush=True)
        runs[v] = run_one(v)
    best = max(runs, key=lambda v: runs[v]["pages_per_s"])
    print(f"  best {what}={best} ({runs[best]['pages_per_s']:.1f} pages/s)", flush=True)
    return best, runs


def run_internet(a: argparse.Namespace) -> int:
    if a.rtt_ms is not None and not internet_rtt.inside():
        return internet_rtt.run_outside(a)  # runs this again inside the netns harness
    t_begin = time.monotonic()
    runs = a.runs or (1 if a.quick else 3)
    cap = a.internet_cap or (20.0 if a.quick else (a.cap or 150.0))
    only = a.only.split(",")
    sweep = [v for v in (a.scrapy_sweep or ("500,2000" if a.quick else "100,500,2000"))
             .split(",") if v]
    variants = [v for v in a.bare_variants.split(",") if v]
    if ("scrapy" in only or "scrapy-redis" in only) and not PEER_PY.exists():
        print(f"{PEER_PY} missing: run bench/run (it installs the peers)")
        return 2
    cfg, has_latency = internet_config(a.internet_hosts, a.internet_pages_per_host,
                                       a.internet_ips, a.internet_delay)
    cfg = internet_rtt.web_config(cfg)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work = BENCH / "work" / f"internet-{stamp}"
    work.mkdir(parents=True, exist_ok=True)
    prerender = not a.no_prerender
    print(f"\ninternet-like web: {cfg.hosts} hosts x {cfg.pages_per_host} pages on {cfg.ips} "
          f"IPs, delay {a.internet_delay} s, latency model "
          f"{'on' if has_latency else 'MISSING in this sandbox (ran without latency)'}, "
          f"https share {getattr(cfg, 'https_share', 0.0)}; {runs} run(s), cap {cap:.0f} s",
          flush=True)
    allruns: dict[str, list[dict[str, Any]]] = defaultdict(list)
    sweeps: dict[str, dict[str, float]] = {}
    off_runs: list[dict[str, Any]] = []
    n_pages: int | None = None
    with ThreadPoolExecutor(1) as oracle:
        # the reachable count walks ~120,000 pages (~50 s): skipped in quick mode
        counting = None if a.quick else oracle.submit(reachable_pages, cfg)
        t0 = time.monotonic()
        with internet_rtt.make_web(cfg, work / "requests.log", prerender=prerender,
                                   start_timeout_s=1200.0, nice=a.web_nice) as web:
            web_start_s = round(time.monotonic() - t0, 1)
            n_pages = counting.result() if counting else None
            print(f"server up in {web_start_s} s (prerendered: {web.prerendered or 'no'}); "
                  f"{len(web.seeds)} seeds, reachable pages {n_pages or 'not counted'}, "
                  f"CA {getattr(web, 'ca_path', None)}", flush=True)
            bench = InternetBench(web, work, a.internet_delay, a.procs, a.threads,
                                  int(sweep[-1]), cap)
            bench.oracle = False
            bench.async_in_flight = a.async_in_flight
            if a.profile:
                ensure_py_spy()
                bench.profile_path = BENCH / "profiles" / "trawl-worker-internet.txt"
                bench.profile_s = a.profile_s
            # sweeps: their best run counts as round 1 (the same configuration, run once)
            if "scrapy" in only:
                best, sr = _sweep(bench, sweep, lambda v: bench.scrapy(int(v)),
                                  "CONCURRENT_REQUESTS")
                bench.scrapy_concurrency = int(best)
                sweeps["scrapy"] = {v: r["pages_per_s"] for v, r in sr.items()}
                allruns["scrapy"].append(sr[best])
            if "bare-loop" in only:
                def one_bare(v: str) -> dict[str, Any]:
                    bench.bare_variant = v
                    return bench.bare()
                best, br = _sweep(bench, variants, one_bare, "bare loop")
                bench.bare_variant = best
                sweeps["bare-loop"] = {v: r["pages_per_s"] for v, r in br.items()}
                allruns["bare-loop"].append(br[best])
            for run in range(runs):
                print(f"internet-like web, run {run + 1}/{runs}", flush=True)
                for name in only:
                    if name in ("scrapy", "bare-loop") and run == 0:
                        continue  # their round 1 is the sweep's best run
                    if name == "scrapy":
                        allruns[name].append(bench.scrapy())
                    elif name == "scrapy-redis":
                        allruns[name].append(bench.scrapy_redis())
                    elif name == "bare-loop":
                        allruns[name].append(bench.bare())
                    elif name == "trawl":
                        allruns[name].append(bench.trawl(run))
                        bench.profile_path = None
            server_cpu_on = cpu_of(web.pid)
            ca_path = getattr(web, "ca_path", None)
        if "trawl" in only and has_latency and not a.no_latency_off:
            off_cfg, _ = internet_config(a.internet_hosts, a.internet_pages_per_host,
                                         a.internet_ips, a.internet_delay, latency=False)
            print("same web, latency off (Trawl's CPU-bound rate)", flush=True)
            internet_rtt.line_off()
            with internet_rtt.make_web(off_cfg, work / "requests-off.log", prerender=prerender,
                                       start_timeout_s=1200.0, nice=a.web_nice) as web_off:
                ob = InternetBench(web_off, work, a.internet_delay, a.procs, a.threads,
                                   bench.scrapy_concurrency, cap)
                ob.oracle = False
                if a.profile:  # the same worker profile, for a per-page comparison
                    ob.profile_path = BENCH / "profiles" / "trawl-worker-latency-off.txt"
                    ob.profile_s = a.profile_s
                for run in range(runs):
                    off_runs.append(ob.trawl(100 + run))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)

    results = {k: median_run(v) for k, v in allruns.items()}
    for r in results.values():
        r["label"] = _label(r)
    ratios: dict[str, dict[str, float]] = {}
    ceilings: dict[str, Any] = {}
    if "trawl" in results:
        t = results["trawl"]
        for k, r in results.items():
            if k != "trawl":
                ratios[k] = {key: round(t[key] / r[key], 2) if r[key] else 0.0
                             for key in ("pages_per_s", "pages_per_cpu_s")}
        resp = t["response_s_mean"]
        polite_ceiling = cfg.hosts / (a.internet_delay + resp)
        ceilings = {
            "politeness_pages_per_s": round(polite_ceiling, 1),
            "politeness_formula": f"{cfg.hosts} hosts / ({a.internet_delay} s + {resp:.3f} s)",
            "politeness_hosts_reached_pages_per_s": round(t["hosts"] / (a.internet_delay + resp), 1),
            "trawl_share_of_politeness": round(t["pages_per_s"] / polite_ceiling, 3),
        }
        if off_runs:
            off = median_run(off_runs)
            ceilings.update({
                "cpu_bound_pages_per_s": off["pages_per_s"],
                "cpu_bound_pages_per_cpu_s": off["pages_per_cpu_s"],
                "cpu_bound_runs_pages_per_s": [r["pages_per_s"] for r in off_runs],
                "cpu_bound_server_core": off["server_cpu_share_of_core"],
                "trawl_share_of_cpu_bound": round(t["pages_per_s"] / off["pages_per_s"], 3)
                if off["pages_per_s"] else 0.0,
            })
    paired = paired_ratios(allruns)
    doc = {
        "web": "internet", "when": stamp, "quick": a.quick, "trawl_source": str(ROOT),
        "trawl_commit": os.environ.get("TRAWL_COMMIT", ""), "trawl_set": trawl_sets(),
        "machine": {"cores": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "sandbox": {**cfg.to_dict(), "latency_model": has_latency, "seeds": len(web.seeds),
                    "reachable_pages": n_pages, "server_start_s": web_start_s,
                    "prerendered": web.prerendered, "ca_path": str(ca_path) if ca_path else None,
                    "server_cpu_s_total_latency_on": round(server_cpu_on, 2)},
        "delay_s": a.internet_delay, "web_nice": a.web_nice, "runs": runs, "cap_s": cap,
        "procs": a.procs,
        "sweeps_pages_per_s": sweeps, "results": results, "all_runs": allruns,
        "trawl_latency_off_runs": off_runs, "trawl_ceilings": ceilings,
        "trawl_ratio": ratios, "trawl_ratio_paired": paired,
        "round_trips": internet_rtt.figures(a),
        "elapsed_s": round(time.monotonic() - t_begin, 1),
    }
    results_dir = Path(a.results)
    results_dir.mkdir(parents=True, exist_ok=True)
    kind = "quick" if a.quick else "full"
    out = results_dir / f"{kind}-internet-{stamp}.json"
    out.write_text(json.dumps(doc, indent=1))
    (results_dir / f"latest-{kind}-internet.json").write_text(json.dumps(doc, indent=1))
    print()
    print(f"internet-like web ({cfg.hosts} hosts, delay {a.internet_delay} s, "
          f"{'latency on' if has_latency else 'NO latency model'}), medians of {runs}:")
    print(table(results))
    if doc["round_trips"]:
        rt = doc["round_trips"]
        print(f"round trips through the netns delay line: {rt['rtt_ms_median']:g} ms median "
              f"(spread {rt['rtt_spread']:g}, {rt['web_ips']} web addresses); the line's CPU: "
              + ", ".join(f"{k} {r['rtt_line']['cpu_s']} s / {r['rtt_line']['packets']} packets"
                          f" (late {r['rtt_line'].get('late_mean_ms')} ms a packet)"
                          for k, r in results.items() if r.get("rtt_line")))
    print()
    for name, sw in sweeps.items():
        print(f"{name} sweep, pages/s: " + ", ".join(f"{k}: {v:.1f}" for k, v in sw.items()))
    if ceilings:
        print(f"Trawl ceilings: politeness {ceilings['politeness_pages_per_s']:.1f} pages/s "
              f"({ceilings['politeness_formula']}); Trawl at "
              f"{100 * ceilings['trawl_share_of_politeness']:.1f}% of it", end="")
        if "cpu_bound_pages_per_s" in ceilings:
            print(f"; CPU-bound (latency off) {ceilings['cpu_bound_pages_per_s']:.1f} pages/s, "
                  f"{ceilings['cpu_bound_pages_per_cpu_s']:.1f} pages/CPU-s, Trawl at "
                  f"{100 * ceilings['trawl_share_of_cpu_bound']:.1f}% of it", end="")
        print()
    print_ratios(ratios, paired)
    print(f"results: {out} ({doc['elapsed_s']:.0f} s)")
    if "scrapy" in ratios:
        print(f"trawl/scrapy pages_per_s ratio: {ratios['scrapy']['pages_per_s']:.2f}")
    return 0
