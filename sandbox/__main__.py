"""``python -m sandbox``: serve a sandbox web; print one JSON line once listening.

``--pagerank-out FILE`` writes the web's PageRank (sandbox/pagerank.py) as JSON before that line
(URLs carry the port, so it is computed once the port is known); with ``--no-serve`` it is
written for ``--port`` and the program exits without serving.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

from .config import SandboxConfig
from .requestlog import RequestLog
from .server import bind_all, serve
from .site import SandboxSite


def _parser_with_optional_webs(d: SandboxConfig) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    o = p.add_argument_group("optional parts of the web")
    o.add_argument("--duplicates", action="store_true",
                   help="add exact/near-duplicate pages and mirror hosts (sandbox/duplicates.py)")
    o.add_argument("--traps", action="store_true",
                   help="add spider-trap hosts (sandbox/traps.py)")
    o.add_argument("--sitemaps", action="store_true",
                   help="allow-all hosts declare a sitemap with an orphan page "
                        "(sandbox/sitemaps.py)")
    c = p.add_argument_group("the changing web (sandbox/change_model.py, issue 19)")
    c.add_argument("--changes", action="store_true",
                   help="a share of the pages change as Poisson processes at known rates")
    c.add_argument("--change-share", type=float, default=d.change_share)
    c.add_argument("--change-min-interval", type=float, default=d.change_min_interval_s,
                   dest="change_min_interval_s", help="simulated seconds")
    c.add_argument("--change-max-interval", type=float, default=d.change_max_interval_s,
                   dest="change_max_interval_s", help="simulated seconds")
    c.add_argument("--cosmetic-share", type=float, default=d.cosmetic_share)
    c.add_argument("--etag-share", type=float, default=d.etag_share)
    c.add_argument("--last-modified-share", type=float, default=d.last_modified_share)
    c.add_argument("--wrong-lm-share", type=float, default=d.wrong_lm_share)
    c.add_argument("--time-acceleration", type=float, default=d.time_acceleration,
                   help="simulated seconds per wall second")
    c.add_argument("--change-epoch", type=float, default=d.change_epoch,
                   help="wall time of simulated second 0 (0: when the server starts)")
    c.add_argument("--virtual-clock", action="store_true",
                   help="a request's X-Sandbox-Clock header (wall seconds) is its time")
    return p


def _add_latency_arguments(p: argparse.ArgumentParser, d: SandboxConfig) -> None:
    """The internet-like latency model's options (sandbox/latency.py)."""
    g = p.add_argument_group("internet-like latency model (sandbox/latency.py)")
    g.add_argument("--internet", action="store_true",
                   help="the preset (SandboxConfig.internet()): --latency, --https-share 0.5, "
                        "--trickle-share 0.02, --handshake-rtts unless given")
    g.add_argument("--latency", action="store_true", help="answer after the model's delays")
    g.add_argument("--latency-median", type=float, default=d.latency_median_s,
                   dest="latency_median_s")
    g.add_argument("--latency-shape", type=float, default=d.latency_shape, dest="latency_shape")
    g.add_argument("--slow-host-share", type=float, default=d.slow_host_share)
    g.add_argument("--fail-share", type=float, default=d.fail_share)
    g.add_argument("--keepalive-idle", type=float, default=d.keepalive_idle_s,
                   dest="keepalive_idle_s")
    g.add_argument("--trickle-share", type=float, default=None,
                   help=f"default {d.trickle_share}, with --internet 0.02")
    g.add_argument("--latency-max-base", type=float, default=d.latency_max_base_s,
                   dest="latency_max_base_s",
                   help="a host's base delay (round-trip time) is uniform below this")
    g.add_argument("--handshake-rtts", action=argparse.BooleanOptionalAction, default=None,
                   help="a connection's first request pays a round trip for TCP and one more "
                        "for TLS (default off, with --internet on)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    d = SandboxConfig()
    p = _parser_with_optional_webs(d)
    p.add_argument("--seed", type=int, default=d.seed)
    _add_latency_arguments(p, d)
    t = p.add_argument_group("HTTPS hosts (sandbox/tls.py)")
    t.add_argument("--https-share", type=float, default=None,
                   help=f"share of hosts on HTTPS (default {d.https_share}, with --internet 0.5)")
    t.add_argument("--https-port", type=int, default=0, help="0: pick a free port")
    t.add_argument("--tls-dir", help="where the CA (ca.pem) and host certificates go "
                                     "(default: a temporary directory removed at exit)")
    p.add_argument("--hosts", type=int, default=d.hosts)
    p.add_argument("--pages-per-host", type=int, default=d.pages_per_host)
    p.add_argument("--ips", type=int, default=d.ips)
    p.add_argument("--crawl-delay", type=float, default=d.crawl_delay_s, dest="crawl_delay_s")
    p.add_argument("--robots-slow", type=float, default=d.robots_slow_s, dest="robots_slow_s")
    p.add_argument("--slow-page", type=float, default=d.slow_page_s, dest="slow_page_s")
    p.add_argument("--hang", type=float, default=d.hang_s, dest="hang_s")
    p.add_argument("--domain", default=d.domain,
                   help="host names are h<NNN>.DOMAIN ('test': each host its own registered "
                        "domain)")
    p.add_argument("--log", help="request log file (JSONL, appended); required unless --no-serve")
    p.add_argument("--port", type=int, default=0, help="0: pick a free port")
    p.add_argument("--pagerank-out", metavar="FILE",
                   help="write the PageRank ground truth (JSON: scores by URL, best first)")
    p.add_argument("--prerender", action="store_true",
                   help="render every page before listening (about 1 ms and 33 KB a page), so "
                        "serving costs no rendering: for benchmarks")
    p.add_argument("--no-serve", action="store_true",
                   help="only write --pagerank-out for --port (which must be given), then exit")
    a = p.parse_args(argv)
    if a.no_serve and not (a.pagerank_out and a.port):
        p.error("--no-serve needs --pagerank-out and a --port other than 0")
    preset = SandboxConfig.internet() if a.internet else d
    if a.internet:
        a.latency = True
    if a.trickle_share is None:
        a.trickle_share = preset.trickle_share
    if a.https_share is None:
        a.https_share = preset.https_share
    if a.handshake_rtts is None:
        a.handshake_rtts = preset.handshake_rtts
    if not a.no_serve and not a.log:
        p.error("the following arguments are required: --log")
    return a


def config_from_args(a: argparse.Namespace) -> SandboxConfig:
    return SandboxConfig(seed=a.seed, hosts=a.hosts, pages_per_host=a.pages_per_host, ips=a.ips,
                         crawl_delay_s=a.crawl_delay_s, robots_slow_s=a.robots_slow_s,
                         slow_page_s=a.slow_page_s, hang_s=a.hang_s, duplicates=a.duplicates,
                         traps=a.traps, sitemaps=a.sitemaps, domain=a.domain, latency=a.latency,
                         latency_median_s=a.latency_median_s, latency_shape=a.latency_shape,
                         slow_host_share=a.slow_host_share, fail_share=a.fail_share,
                         keepalive_idle_s=a.keepalive_idle_s, trickle_share=a.trickle_share,
                         latency_max_base_s=a.latency_max_base_s,
                         handshake_rtts=a.handshake_rtts,
                         https_share=a.https_share, changes=a.changes,
                         change_share=a.change_share,
                         change_min_interval_s=a.change_min_interval_s,
                         change_max_interval_s=a.change_max_interval_s,
                         cosmetic_share=a.cosmetic_share, etag_share=a.etag_share,
                         last_modified_share=a.last_modified_share,
                         wrong_lm_share=a.wrong_lm_share, time_acceleration=a.time_acceleration,
                         change_epoch=a.change_epoch, virtual_clock=a.virtual_clock)


def write_pagerank(site: SandboxSite, path: str) -> None:
    """The PageRank JSON of ``site``, written atomically (a reader never sees half a file)."""
    doc = {"port": site.port, "config": site.config.to_dict(), "seeds": site.seeds(),
           **site.pagerank_result().to_json()}
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp, path)


def ready_line(site: SandboxSite, args: argparse.Namespace,
               prerendered: dict[str, float] | None = None,
               ca_path: str | None = None, change_epoch: float = 0.0) -> dict[str, object]:
    info: dict[str, object] = {"port": site.port, "resolver_map": site.resolver_map(),
                               "seeds": site.seeds(), "log": args.log}
    if site.config.changes:
        info["change_epoch"] = change_epoch
    if ca_path is not None:
        info.update(https_port=site.https_port, ca_path=ca_path)
    rule = site.farm_rule()
    if rule is not None:
        info["traps"] = {"hosts": site.trap_hosts(), "domains": site.trap_domains(),
                         "farm_suffix": rule[0], "farm_ip": rule[1]}
    if args.pagerank_out:
        info["pagerank_out"] = args.pagerank_out
    if prerendered:
        info["prerendered"] = prerendered
    return info


def _tls_dir(args: argparse.Namespace) -> tuple[str, bool]:
    """(directory, made here: remove at exit). /dev/shm when there: writes cost less."""
    if args.tls_dir:
        return args.tls_dir, False
    where = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="sandbox-tls-", dir=where), True


async def amain(args: argparse.Namespace) -> None:
    config = config_from_args(args)
    probe = SandboxSite(config, 0)
    ips = sorted(set(probe.resolver_map().values()))
    socks = bind_all(ips, args.port)
    port = socks[0].getsockname()[1]
    # HTTPS hosts: a second port, the same on every IP (SNI picks the certificate)
    tls_socks = bind_all(ips, args.https_port) if probe.layout.https_hosts else []
    https_port = tls_socks[0].getsockname()[1] if tls_socks else 0
    site = SandboxSite(config, port, https_port)
    tls_dir, remove_tls_dir = _tls_dir(args) if tls_socks else ("", False)
    try:
        await _serve(args, site, socks, tls_socks, tls_dir)
    finally:
        if remove_tls_dir:
            shutil.rmtree(tls_dir, ignore_errors=True)


async def _serve(args: argparse.Namespace, site: SandboxSite, socks: list[socket.socket],
                 tls_socks: list[socket.socket],
                 tls_dir: str) -> None:
    certs = None
    if tls_socks:
        from .tls import HostCertificates  # needs cryptography: only with HTTPS hosts

        certs = HostCertificates(site.layout.https_hosts, tls_dir)
    if args.pagerank_out:
        write_pagerank(site, args.pagerank_out)
    prerendered: dict[str, float] | None = None
    if args.prerender:
        t0 = time.perf_counter()
        pages = site.prerender(os.cpu_count() or 1)
        prerendered = {"pages": pages, "seconds": round(time.perf_counter() - t0, 2)}
        if certs is not None:
            t0 = time.perf_counter()
            certs.warm()
            prerendered["tls_seconds"] = round(time.perf_counter() - t0, 2)
        gc.collect()
        gc.freeze()  # the cache is for good: no collection walks its objects again
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready = asyncio.Event()
    epoch = site.config.change_epoch or time.time()
    task = asyncio.create_task(serve(site, RequestLog(args.log), socks, stop, ready,
                                     tls_socks, certs.context if certs else None, epoch))
    await asyncio.wait([task, asyncio.create_task(ready.wait())],
                       return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        await task  # startup failed: raise its error
    print(json.dumps(ready_line(site, args, prerendered, certs.ca_path if certs else None,
                                epoch)), flush=True)
    await task


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.no_serve:
        write_pagerank(SandboxSite(config_from_args(args), args.port, args.https_port),
                       args.pagerank_out)
        return 0
    asyncio.run(amain(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
