"""Time of one partition owner's revisit replan (continuous crawling), whole and by step.

Fills one partition of an embedded Redis with N scheduled URLs and their visit histories (5-40
visits each, a fifth to all of them changed, log-spread intervals), then times
``RevisitOwner.replan`` (read the schedule and histories, estimate every rate twice, fit the
prior, plan, move every URL) and, on the same histories, the per-page path it replaced
(``rate_of`` and ``interval_s`` one page at a time, no Redis), side by side in one run. Wall
and thread CPU, best of --rounds. Run::

    .venv/bin/python bench/replan_cost.py [--urls 20000 100000] [--policy freshness]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from freshness.estimators import fitted_prior
from freshness.history import VisitHistory
from freshness.revisit import RevisitPlanner
from frontier.config import CrawlConfig
from frontier.frontier import Frontier
from frontier.records import Entry
from frontier.redisclient import client_from_url
from frontier.redisserver import EmbeddedRedis
from frontier.revisits import schedule_member
from workers.cluster.revisits import RevisitOwner
from workers.runtime.revisit_plans import planner_from, planner_settings


def history(rnd: random.Random, now: int) -> VisitHistory:
    h, t = VisitHistory(), now - 30 * 86400
    p_change, mean = rnd.choice([0.2, 0.5, 1.0]), rnd.choice([600, 3600, 20_000])
    for _ in range(rnd.randint(5, 40)):
        t += int(rnd.expovariate(1 / mean)) + 1
        h = h.observe(t, rnd.random() < p_change, None, rnd.getrandbits(32))
    return h


def fill(owner: RevisitOwner, partition: int, n: int) -> list[VisitHistory]:
    r, key = owner.frontier.r, owner.frontier.keys.revisits(partition)
    store, rnd, now = owner.store.history_store(partition), random.Random(1), int(time.time())
    out: list[VisitHistory] = []
    for start in range(0, n, 5000):
        batch = []
        for i in range(start, min(n, start + 5000)):
            url = f"http://h{i % 2000}.test/p{i}"
            batch.append((schedule_member(f"h{i % 2000}.test", Entry(url, 1)), url,
                          history(rnd, now)))
        r.zadd(key, {m: 0.0 for m, _, _ in batch})
        store.put_many([(u, h) for _, u, h in batch])
        out += [h for _, _, h in batch]
    return out


def per_page(cfg: CrawlConfig, histories: list[VisitHistory]) -> None:
    """The replan's estimates and intervals as the replan made them before freshness/batch.py."""
    planner = planner_from(planner_settings(cfg), None)
    bare = RevisitPlanner(replace(planner.settings, prior=None))
    planner.use_prior(fitted_prior([bare.rate_of(h) for h in histories],
                                   [h.unchanged_s + h.changed_s for h in histories]))
    planner.replan([planner.rate_of(h) for h in histories])
    for h in histories:
        planner.interval_s(h)


def best(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.thread_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.thread_time() - c0)
    return min(walls), min(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--policy", default="freshness")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    for n in args.urls:
        with tempfile.TemporaryDirectory() as d:
            server = EmbeddedRedis(d).start()
            try:
                cfg = CrawlConfig(continuous=True, revisit_policy=args.policy,
                                  revisit_expected_urls=n * 64).validate()
                owner = RevisitOwner(Frontier(client_from_url(server.url), cfg))
                histories = fill(owner, 0, n)
                wall, cpu = best(partial(owner.replan, 0), args.rounds)
                old_wall, old_cpu = best(partial(per_page, cfg, histories),
                                         1 if n > 50_000 else args.rounds)
            finally:
                server.stop()
        rows.append({"urls": n, "replan_s": round(wall, 3), "replan_cpu_s": round(cpu, 3),
                     "us_per_url": round(1e6 * cpu / n, 1),
                     "per_page_path_s": round(old_wall, 3),
                     "per_page_us_per_url": round(1e6 * old_cpu / n, 1),
                     "speedup": round(old_cpu / cpu, 1)})
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"policy": args.policy, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
