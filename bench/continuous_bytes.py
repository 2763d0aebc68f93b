"""Redis memory per tracked URL of everything continuous crawling keeps, at 1,000,000 URLs in
a real Redis (the embedded redis-server), written as the crawl writes it: the revisit
schedule (a ZSET per partition, member "depth url" from frontier/revisits.py
schedule_member, as lua/complete.lua adds it), the 52-byte visit history (freshness/store.py
buckets, VisitStore.queue_history) and the visit state (ETag, capture time, 32-byte text
sketch: VisitStore.queue_state). INFO used_memory before and after each part. Not a test;
prints the figures, the history against the issue's target (64 bytes a URL plus the URL,
which the schedule holds) and writes bench/results/continuous-bytes-*.json.

    .venv/bin/python bench/continuous_bytes.py [--urls 1000000] [--partitions 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import redis

from freshness.history import VisitHistory
from frontier.config import CrawlConfig
from frontier.keys import Keys, partition_of
from frontier.records import Entry
from frontier.redisserver import EmbeddedRedis
from frontier.revisits import schedule_member
from frontier.slotpipe import SlotPipeline
from workers.pipeline.revisit_state import VisitState, VisitStore

T0 = 1_780_000_000
BATCH = 5000
#: The issue's target: the history at most 64 bytes a tracked URL (plus the URL, kept once,
#: in the schedule).
HISTORY_TARGET = 64


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=64)
    args = ap.parse_args()
    n, parts = args.urls, args.partitions
    cfg = CrawlConfig(partitions=parts, revisit_expected_urls=n, continuous=True)
    keys = Keys(cfg.namespace)
    rng = np.random.default_rng(7)
    hosts = [f"host{i % 5000}.example.org" for i in range(n)]
    urls = [f"https://{hosts[i]}/section/{i % 97}/page-{i}.html" for i in range(n)]
    part = [partition_of(h, parts) for h in hosts]
    sketch = bytes(rng.integers(0, 256, 32, dtype=np.uint8))
    mean_url = sum(map(len, urls)) / n

    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis").start()
        try:
            client = redis.Redis.from_url(server.url)
            store = VisitStore(client, cfg)
            used = lambda: int(client.info("memory")["used_memory"])  # noqa: E731
            figures: dict[str, float] = {}
            before = used()
            for s in range(0, n, BATCH):
                pipe = client.pipeline(transaction=False)
                for i in range(s, min(n, s + BATCH)):
                    member = schedule_member(hosts[i], Entry(urls[i], 2))
                    pipe.zadd(keys.revisits(part[i]), {member: T0 + i})
                pipe.execute()
            figures["schedule_zset"] = (used() - before) / n
            before = used()
            for s in range(0, n, BATCH):
                sp = SlotPipeline(client)
                for i in range(s, min(n, s + BATCH)):
                    hist = VisitHistory(T0 + i, T0, i % 60, 1e4, 2e4, digest=i)
                    store.queue_history(sp, part[i], urls[i], hist)
                sp.execute()
            figures["history"] = (used() - before) / n
            before = used()
            for s in range(0, n, BATCH):
                sp = SlotPipeline(client)
                for i in range(s, min(n, s + BATCH)):
                    etag = f'"{i:016x}-{i % 7}"' if i % 5 < 3 else ""  # 60 %: an ETag
                    store.queue_state(sp, part[i], urls[i], VisitState(etag, T0 + i, sketch))
                sp.execute()
            figures["state"] = (used() - before) / n
            enc = {client.object("encoding", k).decode()
                   for k in list(client.scan_iter("trawl:*fv:*", count=1000))[:50]}
            enc |= {client.object("encoding", k).decode()
                    for k in list(client.scan_iter("trawl:*fh:*", count=1000))[:50]}
            version = client.info("server")["redis_version"]
        finally:
            server.stop()
    result = {"urls": n, "partitions": parts, "mean_url_bytes": round(mean_url, 1),
              "redis_version": version, "encodings": sorted(enc),
              "bytes_per_tracked_url": {k: round(v, 1) for k, v in figures.items()},
              "total_bytes_per_tracked_url": round(sum(figures.values()), 1),
              "history_target_bytes": HISTORY_TARGET,
              "history_within_target": figures["history"] <= HISTORY_TARGET}
    print(json.dumps(result, indent=1))
    for part_name, value in figures.items():
        print(f"{part_name:>14}: {value:6.1f} bytes per tracked URL")
    print(f"{'total':>14}: {sum(figures.values()):6.1f} bytes per tracked URL "
          f"(mean URL {mean_url:.1f} bytes)")
    print(f"history bytes per URL vs target {HISTORY_TARGET}: {figures['history']:.1f} "
          f"({'within' if result['history_within_target'] else 'OVER'})")
    out = Path(__file__).resolve().parent / "results" / \
        f"continuous-bytes-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
