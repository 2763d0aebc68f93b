"""Peak RSS of a worker per family of hostile cases (issue 21): the hostile web's cases of
one family at a time, each crawled by one fresh worker process (tests/hostilekit.py, the
settings of tests/test_hostile_crawl.py), its RSS sampled every 50 ms.

In the CI test all cases run in one crawl at once, so a family's share of the peak cannot be
told apart there; here each family has the worker to itself. Prints a Markdown table.

    PYTHONPATH=. python -m bench.hostile_rss [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from frontier.redisserver import EmbeddedRedis
from sandbox.hostile_cases import FAMILIES
from tests.hostilekit import crawl_hostile_web

MIB = 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="keep the crawls' files here")
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="hostile-rss-"))
    redis = EmbeddedRedis(root / "redis").start()
    rows = []
    try:
        for family in (*FAMILIES, "all"):
            crawl = crawl_hostile_web(redis.url, root / family, f"rss-{family}",
                                      families=None if family == "all" else {family})
            samples = crawl.rss.samples
            # RSS when the first request went out (no request at all, as for DNS: 2 s in)
            begun = min((h.start for h in crawl.hits), default=samples[0][0] + 2.0)
            first = max((r for t, r in samples if t <= begun), default=samples[0][1])
            rows.append((family, len(crawl.cases), len(crawl.records), first / MIB,
                         crawl.rss.peak / MIB, crawl.elapsed_s, crawl.worker_alive))
            print(f"{family}: {rows[-1]}", flush=True)
    finally:
        redis.stop()
    print("\n| family | cases | URLs | RSS at first request (MiB) | peak RSS (MiB) | crawl (s) "
          "| worker up |\n|---|---|---|---|---|---|---|")
    for fam, n, urls, first, peak, secs, up in rows:
        print(f"| {fam} | {n} | {urls} | {first:.0f} | {peak:.0f} | {secs:.1f} | {up} |")


if __name__ == "__main__":
    main()
