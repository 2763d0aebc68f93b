"""``trawl status``: a crawl's counters per partition, its rate, and what limits it now."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from frontier.counters import ERRORS, STATUS_COLUMNS, errors
from frontier.frontier import Frontier
from frontier.redisclient import redacted
from workers.cli.crawl import connect
from workers.cli.load import measure
from workers.runtime.context import load_config


def print_status(redis_url: str, namespace: str, as_json: bool = False,
                 per_partition: bool = False) -> int:
    """Print the status of crawl ``namespace`` (a table, or one JSON object)."""
    client = connect(redis_url)
    frontier = Frontier(client, load_config(client, namespace, redacted(redis_url)))
    parts = frontier.partition_stats()
    totals = frontier.stats()
    started = float(client.get(frontier.keys.started) or time.time())
    rate = round(totals["fetched"] / max(1e-9, time.time() - started), 2)
    load = measure(frontier, totals.get("inflight", 0))
    dropped = sorted(frontier.dropped.members())
    if as_json:
        print(json.dumps({"totals": totals, "pages_per_s": rate, "load": asdict(load),
                          "dropped_domains": dropped,
                          "partitions": parts if per_partition else None}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"crawl {namespace}")
    cols = STATUS_COLUMNS
    table.add_column("partition")
    for c in cols:
        table.add_column(c, justify="right")
    table.add_column("errors", justify="right")
    rows = list(enumerate(parts)) if per_partition else []
    for p, st in rows:
        table.add_row(str(p), *(str(st.get(c, 0)) for c in cols), str(errors(st)))
    table.add_row("all", *(str(totals.get(c, 0)) for c in cols), str(errors(totals)))
    Console().print(table)
    print(f"pages/s since start: {rate}")
    print(f"fetches in flight: {load.in_flight} of {load.capacity} in {load.engines} engines "
          f"(+{load.waiting} waiting for a slot; {load.leases_out} leases out of "
          f"max_inflight {load.max_inflight}); engine CPU {load.cpu_load:.0%} of a core")
    print(f"hosts: {load.hosts_ready} due now, {load.hosts_waiting} waiting on their delay")
    print(f"limited by: {load.limit.value} ({load.why})")
    if dropped:
        print(f"dropped (trawl drop): {', '.join(dropped)}; {totals.get('dropped', 0)} URLs "
              "ended so")
    for kind, n in ERRORS.members(totals).items():
        print(f"  {kind}: {n}")
    return 0
