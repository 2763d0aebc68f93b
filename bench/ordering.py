"""Crawl orderings on a web with a known PageRank (issue 6).

For each generator seed, one sandbox web (traps off), its PageRank from the generator
(power iteration on the full graph), and one crawl per ordering (bfs, random, indegree, opic)
on the same web, each stopped once ``--stop`` of the web's pages are fetched. From the server's
own request log, in fetch order: the fraction of the total PageRank collected against pages
crawled, and the share of the top-10% PageRank pages crawled after ``--at`` of the pages.

Writes ``bench/results/ordering.json`` and ``bench/results/ordering.png``. Run with
``bench/ordering`` (installs matplotlib into the venv if missing).

Priorities only matter where there is a choice: the crawl runs with fewer leases in flight
(``--inflight``) than there are hosts with due URLs, and a small host delay, so both the choice
among due hosts and the choice of a host's next URL are the ordering's.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from frontier.config import ORDERINGS, CrawlConfig  # noqa: E402
from frontier.redisclient import client_from_url  # noqa: E402
from frontier.redisserver import EmbeddedRedis  # noqa: E402
from sandbox import SandboxConfig, SandboxWeb  # noqa: E402
from workers.cli.crawl import WorkerPool, init_crawl  # noqa: E402

log = logging.getLogger("bench.ordering")
RESULTS = ROOT / "bench" / "results"


def crawl_order(web: SandboxWeb, redis_url: str, ordering: str, stop_pages: int,
                args: argparse.Namespace, out: Path) -> list[str]:
    """Crawl until ``stop_pages`` pages of the PageRank graph are fetched; returns the URLs of
    those pages in fetch order (first fetch of each, from the server log)."""
    ns = f"ord-{ordering}-{web.config.seed}"
    cfg = CrawlConfig(
        namespace=ns, host_delay_s=args.delay, allow_private_ips=True,
        static_hosts=web.resolver_map, allowed_domains=[web.config.domain], ip_concurrency=0,
        connect_timeout_s=2.0, read_timeout_s=3.0, total_timeout_s=5.0, max_inflight=args.inflight,
        output_dir=str(out / ns), ordering=ordering, store_warc=False, dedup_enabled=False,
        task_batch=4,
    ).validate()
    client = client_from_url(redis_url)
    frontier = init_crawl(client, cfg, web.seeds, fresh=True)
    ranks = web.site.pagerank()
    token = f"ord-{ordering}"
    start_count = len(web.read_log())
    pool = WorkerPool(redis_url, ns, args.workers, args.concurrency, out / ns / "logs").start()
    deadline = time.monotonic() + args.timeout
    try:
        while time.monotonic() < deadline:
            time.sleep(1.0)
            st = frontier.stats()
            if st["fetched"] >= stop_pages * 1.15 or (st["queued"] == 0 and st["inflight"] == 0
                                                      and st["fetched"] > 0):
                break
    finally:
        pool.stop()
    time.sleep(0.3)
    seen: set[str] = set()
    order: list[str] = []
    entries = sorted(web.read_log()[start_count:], key=lambda e: e.start)
    for e in entries:
        url = f"http://{e.host}:{web.port}{e.path}"
        if url in ranks and url not in seen:
            seen.add(url)
            order.append(url)
    log.info("%s seed %d: %d graph pages fetched (%s)", ordering, web.config.seed, len(order),
             token)
    return order


def figures(order: list[str], ranks: dict[str, float], top: set[str], at: int,
            points: int = 200) -> dict[str, Any]:
    n = len(ranks)
    curve: list[tuple[int, float]] = []
    collected = 0.0
    step = max(1, n // points)
    for i, url in enumerate(order, 1):
        collected += ranks[url]
        if i % step == 0 or i == len(order):
            curve.append((i, round(collected, 6)))
    first = order[:at]
    return {
        "pages_crawled": len(order),
        "top10_share_at": round(len(top.intersection(first)) / len(top), 4),
        "pagerank_at": round(sum(ranks[u] for u in first), 4),
        "curve": curve,
        "complete": len(order) >= at,
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = list(results["seeds"])
    fig, axes = plt.subplots(1, len(seeds), figsize=(5 * len(seeds), 4), squeeze=False)
    for ax, seed in zip(axes[0], seeds, strict=True):
        per = results["seeds"][seed]
        n = per["pages"]
        for ordering, fig_ in per["orderings"].items():
            xs = [i / n for i, _ in fig_["curve"]]
            ys = [c for _, c in fig_["curve"]]
            ax.plot(xs, ys, label=f"{ordering} (top10 {fig_['top10_share_at']:.2f})")
        ax.axvline(results["at_fraction"], color="grey", lw=0.8, ls="--")
        ax.set_title(f"seed {seed}: {n} pages")
        ax.set_xlabel("fraction of pages crawled")
        ax.set_ylabel("fraction of total PageRank collected")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages-per-host", type=int, default=100)
    ap.add_argument("--orderings", nargs="+", default=list(ORDERINGS), choices=ORDERINGS)
    ap.add_argument("--at", type=float, default=0.2, help="fraction of pages for the figure")
    ap.add_argument("--stop", type=float, default=0.25, help="stop a crawl after this fraction")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--inflight", type=int, default=24)
    ap.add_argument("--delay", type=float, default=0.02)
    ap.add_argument("--timeout", type=float, default=300.0, help="cap per crawl, seconds")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"at_fraction": args.at, "stop_fraction": args.stop,
                               "settings": {k: v for k, v in vars(args).items() if k != "out"},
                               "cores": os.cpu_count(), "seeds": {}}
    results["settings"]["out"] = str(args.out)
    with tempfile.TemporaryDirectory(prefix="trawl-ordering-") as tmp, \
            EmbeddedRedis(Path(tmp) / "redis") as server:
        for seed in args.seeds:
            cfg = SandboxConfig(seed=seed, hosts=args.hosts, pages_per_host=args.pages_per_host,
                                ips=min(50, args.hosts))
            with SandboxWeb(cfg, Path(tmp) / f"requests-{seed}.log") as web:
                t0 = time.monotonic()
                ranks = web.site.pagerank()
                pr_s = time.monotonic() - t0
                n = len(ranks)
                top = set(web.site.top_urls(0.1))
                at = int(n * args.at)
                per: dict[str, Any] = {"pages": n, "top10": len(top), "at_pages": at,
                                       "pagerank_s": round(pr_s, 2), "orderings": {}}
                for ordering in args.orderings:
                    order = crawl_order(web, server.url, ordering, int(n * args.stop), args,
                                        Path(tmp))
                    per["orderings"][ordering] = figures(order, ranks, top, at)
                results["seeds"][str(seed)] = per
                print(f"seed {seed}: {n} pages; share of top-10% PageRank pages after "
                      f"{args.at:.0%}: " + ", ".join(
                          f"{o} {f['top10_share_at']:.3f}" for o, f in per["orderings"].items()),
                      flush=True)
    shares = {o: [results["seeds"][s]["orderings"][o]["top10_share_at"] for s in results["seeds"]]
              for o in args.orderings}
    results["mean_top10_share"] = {o: round(statistics.mean(v), 4) for o, v in shares.items()}
    order_ok = all(
        per["orderings"].get("indegree", {}).get("top10_share_at", 1)
        > per["orderings"].get("bfs", {}).get("top10_share_at", 0)
        and per["orderings"].get("opic", {}).get("top10_share_at", 1)
        > per["orderings"].get("bfs", {}).get("top10_share_at", 0)
        and per["orderings"].get("bfs", {}).get("top10_share_at", 1)
        > per["orderings"].get("random", {}).get("top10_share_at", 0)
        for per in results["seeds"].values())
    results["indegree_opic_gt_bfs_gt_random_every_seed"] = order_ok
    (args.out / "ordering.json").write_text(json.dumps(results, indent=1) + "\n")
    try:
        plot(results, args.out / "ordering.png")
    except ImportError:
        print("matplotlib missing: no plot (bench/ordering installs it)", file=sys.stderr)
    for o, v in shares.items():
        print(f"{o:9s} top-10% share after {args.at:.0%}: "
              + " ".join(f"{x:.3f}" for x in v) + f"  mean {statistics.mean(v):.3f}")
    print(f"indegree, opic > bfs > random on every seed: {order_ok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
