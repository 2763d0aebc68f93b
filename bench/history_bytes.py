"""Redis memory per tracked URL of the visit histories (freshness/store.py) at 1,000,000 URLs,
measured in a real Redis (the embedded redis-server): INFO used_memory before and after, and
MEMORY USAGE summed over the keys. For comparison, the same records in one hash keyed by the
URL itself, and the revisit schedule the crawl will keep beside them (a ZSET URL → due time).
Not a test; prints the figures and writes bench/results/history-bytes-*.json.

    .venv/bin/python bench/history_bytes.py [--urls 1000000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import redis

from freshness.history import BUCKETS, RECORD_BYTES, VisitHistory
from freshness.store import HistoryStore, buckets_for
from frontier.redisserver import EmbeddedRedis

T0 = 1_780_000_000
BATCH = 5000


def records(n: int) -> list[VisitHistory]:
    """Varied, plausible records (the values do not change the size: fixed RECORD_BYTES)."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        buckets = [0] * BUCKETS
        buckets[int(rng.integers(4, 16))] = int(rng.integers(0, 30))
        out.append(VisitHistory(T0 + int(rng.integers(0, 10**6)), T0, int(rng.integers(0, 60)),
                                float(rng.uniform(0, 1e6)), float(rng.uniform(0, 1e6)),
                                tuple(buckets), digest=i))
    return out


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def measure(client: redis.Redis, fill: Callable[[], None], pattern: str, n: int) -> dict:
    client.flushall()
    before = used(client)
    t0 = time.perf_counter()
    fill()
    seconds = time.perf_counter() - t0
    delta = used(client) - before
    keys = list(client.scan_iter(pattern, count=10_000))
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.memory_usage(k, samples=0)
    usage = sum(x or 0 for x in pipe.execute())
    encodings = {client.object("encoding", k).decode() for k in keys[:50]}
    return {"bytes_per_url_info": round(delta / n, 1), "bytes_per_url_memory_usage":
            round(usage / n, 1), "keys": len(keys), "encodings": sorted(encodings),
            "fill_seconds": round(seconds, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    args = ap.parse_args()
    n = args.urls
    urls = [f"https://host{i % 5000}.example.org/section/{i % 97}/page-{i}.html" for i in range(n)]
    mean_url = sum(map(len, urls)) / n
    recs = records(n)
    packed = [r.pack() for r in recs]
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis").start()
        try:
            client = redis.Redis.from_url(server.url)
            version = client.info("server")["redis_version"]
            store = HistoryStore(client, "trawl:{0}:fh:", buckets_for(n))

            def bucketed() -> None:
                for s in range(0, n, BATCH):
                    store.put_many(zip(urls[s:s + BATCH], recs[s:s + BATCH], strict=True))

            def by_url() -> None:
                for s in range(0, n, BATCH):
                    pipe = client.pipeline(transaction=False)
                    for u, p in zip(urls[s:s + BATCH], packed[s:s + BATCH], strict=True):
                        pipe.hset("trawl:{0}:fhu", u, p)
                    pipe.execute()

            def schedule() -> None:
                for s in range(0, n, BATCH):
                    client.zadd("trawl:{0}:due", {u: T0 + i for i, u in
                                                  enumerate(urls[s:s + BATCH], s)})

            result = {"urls": n, "record_bytes": RECORD_BYTES, "mean_url_bytes": round(mean_url, 1),
                      "redis_version": version,
                      "history_bucketed_by_url_hash": measure(client, bucketed, "trawl:*", n),
                      "history_in_one_hash_by_url": measure(client, by_url, "trawl:*", n),
                      "revisit_schedule_zset": measure(client, schedule, "trawl:*", n)}
        finally:
            server.stop()
    print(json.dumps(result, indent=1))
    out = Path(__file__).resolve().parent / "results" / \
        f"history-bytes-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
