"""Live progress bar and final summary table (rich), on stderr and stdout respectively."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from frontier.counters import accounted, errors
from workers.cli.load import CrawlLoad


class CrawlProgress:
    def __init__(self, enabled: bool = True) -> None:
        self.console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]crawl"), BarColumn(),
            TextColumn("{task.fields[fetched]} fetched"),
            TextColumn("{task.fields[rate]:>6.1f} pages/s"),
            TextColumn("queued {task.fields[queued]}"),
            TextColumn("in flight {task.fields[inflight]}"),
            TextColumn("hosts ready {task.fields[ready]} / on delay {task.fields[delayed]}"),
            TextColumn("errors {task.fields[errors]}"),
            TextColumn("limit: {task.fields[limit]}"),
            TextColumn("{task.fields[revisits]}"),
            TimeElapsedColumn(), console=self.console, disable=not enabled,
            refresh_per_second=4,
        )
        self.task: TaskID | None = None
        self.start = time.monotonic()
        self._window: list[tuple[float, int]] = []

    def __enter__(self) -> CrawlProgress:
        self.progress.start()
        self.task = self.progress.add_task("crawl", total=1, fetched=0, rate=0.0, queued=0,
                                           inflight=0, errors=0, ready="-", delayed="-",
                                           limit="-", revisits="")
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, st: dict[str, int], load: CrawlLoad | None = None) -> None:
        """``load`` (workers/cli/load.py), when given, adds the engines' fetches in flight, the
        hosts ready and on delay, and what limits the crawl now."""
        now = time.monotonic()
        fetched = st.get("fetched", 0)
        self._window.append((now, fetched))
        while len(self._window) > 2 and now - self._window[0][0] > 5.0:
            self._window.pop(0)
        t0, f0 = self._window[0]
        rate = (fetched - f0) / (now - t0) if now > t0 else 0.0
        done = accounted(st)
        failures = st.get("failed", 0) + errors(st)
        assert self.task is not None
        extra: dict[str, Any] = {}
        inflight: Any = st.get("inflight", 0)
        if load is not None:
            inflight = f"{load.in_flight}/{load.capacity}"
            extra = {"ready": load.hosts_ready, "delayed": load.hosts_waiting,
                     "limit": load.limit.value}
        if "revisits_due" in st:  # a continuous crawl
            extra["revisits"] = (
                f"revisits {st.get('revisits', 0)} done ({st.get('revisit_unchanged', 0)} "
                f"unchanged, {st.get('revisit_not_modified', 0)} 304) / "
                f"{st['revisits_due']} due")
        self.progress.update(self.task, total=max(1, st.get("admitted", 0)), completed=done,
                             fetched=fetched, rate=rate, queued=st.get("queued", 0),
                             inflight=inflight, errors=failures, **extra)


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="Trawl crawl summary", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                table.add_row(f"{key}.{sub}", str(v))
        else:
            table.add_row(key, str(value))
    console.print(table)
