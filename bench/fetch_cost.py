"""CPU and wall time per page of ``Fetcher.fetch`` next to a plain ``urllib3.PoolManager``.

One thread, keep-alive, against the sandbox web on loopback (200 hosts on 50 IPs, ~33 KB
pages). CPU is ``time.thread_time`` of the fetching thread (the sandbox server runs in other
threads/processes), wall is ``time.perf_counter``. Each client first fetches every page once
(warm-up: connections open, imports and caches hot), then the timed rounds run; the best
round is reported. Run::

    .venv/bin/python bench/fetch_cost.py [--pages 1500] [--rounds 3]
        [--fetch-module /tmp/fetch_old]   # time another workers/fetch/ (or an old fetch.py)
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox import SandboxConfig, SandboxWeb
from workers.dns.resolver import CachingResolver


def load_fetch_module(path: str | None) -> ModuleType:
    if path is None:
        import workers.fetch

        return workers.fetch
    # A package directory (workers/fetch/ since the split; relative imports inside) or a
    # single-file module (workers/fetch.py before it, e.g. `git show <rev>:workers/fetch.py`).
    pkg = Path(path)
    if pkg.is_dir():
        spec = importlib.util.spec_from_file_location(
            "trawl_fetch_under_test", pkg / "__init__.py",
            submodule_search_locations=[str(pkg)])
    else:
        spec = importlib.util.spec_from_file_location("trawl_fetch_under_test", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def host_of(url: str) -> str:
    return url.split("/")[2].split(":")[0]


def measure(fn: Callable[[str], int], urls: list[str], rounds: int) -> tuple[float, float, int]:
    """Best (CPU ms/page, wall ms/page) over ``rounds`` after one warm-up pass; bytes/page."""
    for u in urls:
        fn(u)
    best_cpu = best_wall = float("inf")
    nbytes = 0
    for _ in range(rounds):
        nbytes = 0
        c0, w0 = time.thread_time(), time.perf_counter()
        for u in urls:
            nbytes += fn(u)
        best_cpu = min(best_cpu, time.thread_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    n = len(urls)
    return 1e3 * best_cpu / n, 1e3 * best_wall / n, nbytes // n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--pages", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fetch-module", default=None,
                    help="a workers/fetch/ package dir (or single-file fetch.py) to time instead")
    args = ap.parse_args()
    fetch_mod = load_fetch_module(args.fetch_module)

    cfg = SandboxConfig(seed=1, hosts=200, pages_per_host=100, ips=50, crawl_delay_s=0.0)
    with tempfile.TemporaryDirectory() as tmp, SandboxWeb(cfg, Path(tmp) / "web.log") as web:
        urls = web.site.page_urls()[: args.pages]
        rmap = web.resolver_map
        fetcher = fetch_mod.Fetcher(
            CachingResolver(static=rmap, allow_private=True), "bench", allow_private=True
        )

        def via_fetcher(u: str) -> int:
            r = fetcher.fetch(u, ip=rmap[host_of(u)])
            if not r.ok:
                raise RuntimeError(f"{u}: {r.status} {r.error} {r.error_detail}")
            return len(r.body)

        pm = urllib3.PoolManager(maxsize=4, num_pools=1000, retries=False)

        def via_urllib3(u: str) -> int:
            h = host_of(u)
            r = pm.request("GET", u.replace(h, rmap[h], 1), headers={"Host": h},
                           redirect=False)
            if r.status != 200:
                raise RuntimeError(f"{u}: {r.status}")
            return len(r.data)

        print(f"{len(urls)} pages, {len(set(rmap[host_of(u)] for u in urls))} IPs, "
              f"best of {args.rounds} rounds after a warm-up pass, one thread")
        print(f"fetcher module: {fetch_mod.__file__}")
        rows = [("Fetcher.fetch", via_fetcher), ("urllib3.PoolManager", via_urllib3)]
        results = {}
        for name, fn in rows:
            results[name] = measure(fn, urls, args.rounds)
        base_cpu = results["urllib3.PoolManager"][0]
        print(f"{'client':22s} {'CPU ms/page':>12s} {'wall ms/page':>13s} {'B/page':>8s} "
              f"{'CPU vs urllib3':>15s}")
        for name, (cpu, wall, nb) in results.items():
            print(f"{name:22s} {cpu:12.3f} {wall:13.3f} {nb:8d} {cpu / base_cpu:14.2f}x")
        fetcher.close()
        pm.clear()


if __name__ == "__main__":
    main()
