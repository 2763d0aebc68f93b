"""``python -m sandbox``: serve a sandbox web; print one JSON line once listening."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from .config import SandboxConfig
from .requestlog import RequestLog
from .server import bind_all, serve
from .site import SandboxSite


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    d = SandboxConfig()
    p = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--hosts", type=int, default=d.hosts)
    p.add_argument("--pages-per-host", type=int, default=d.pages_per_host)
    p.add_argument("--ips", type=int, default=d.ips)
    p.add_argument("--crawl-delay", type=float, default=d.crawl_delay_s, dest="crawl_delay_s")
    p.add_argument("--robots-slow", type=float, default=d.robots_slow_s, dest="robots_slow_s")
    p.add_argument("--slow-page", type=float, default=d.slow_page_s, dest="slow_page_s")
    p.add_argument("--hang", type=float, default=d.hang_s, dest="hang_s")
    p.add_argument("--log", required=True, help="request log file (JSONL, appended)")
    p.add_argument("--port", type=int, default=0, help="0: pick a free port")
    p.add_argument("--duplicates", action="store_true",
                   help="add exact/near-duplicate pages and mirror hosts (sandbox/duplicates.py)")
    return p.parse_args(argv)


def config_from_args(a: argparse.Namespace) -> SandboxConfig:
    return SandboxConfig(seed=a.seed, hosts=a.hosts, pages_per_host=a.pages_per_host, ips=a.ips,
                         crawl_delay_s=a.crawl_delay_s, robots_slow_s=a.robots_slow_s,
                         slow_page_s=a.slow_page_s, hang_s=a.hang_s, duplicates=a.duplicates)


async def amain(args: argparse.Namespace) -> None:
    config = config_from_args(args)
    probe = SandboxSite(config, 0)
    ips = sorted(set(probe.resolver_map().values()))
    socks = bind_all(ips, args.port)
    port = socks[0].getsockname()[1]
    site = SandboxSite(config, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready = asyncio.Event()
    task = asyncio.create_task(serve(site, RequestLog(args.log), socks, stop, ready))
    await asyncio.wait([task, asyncio.create_task(ready.wait())],
                       return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        await task  # startup failed: raise its error
    print(json.dumps({"port": port, "resolver_map": site.resolver_map(), "seeds": site.seeds(),
                      "log": args.log}), flush=True)
    await task


def main(argv: list[str] | None = None) -> int:
    asyncio.run(amain(parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
