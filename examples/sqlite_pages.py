"""Example page pipeline: each fetched page's record as a row of a SQLite database
(docs/components.md shows the schema and a query).

Enable it after the JSONL writer, so that its rows hold what the JSONL records hold::

    pipelines = ["workers.components.builtin.Dedup", "workers.components.builtin.WarcStore",
                 "workers.components.builtin.JsonlRecords", "examples.sqlite_pages.SqlitePages"]

Every worker process of a machine writes into the same file (SQLite's own locking, WAL
journal, a busy timeout); rows are inserted in batches, committed every ``commit_every``
rows or ``commit_interval_s`` seconds and when the worker stops, so the database costs a
transaction per batch, not per page. A worker killed outright loses its uncommitted batch.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workers.components import ComponentSetup, PageItem, PagePipeline

SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    id             INTEGER PRIMARY KEY,
    url            TEXT    NOT NULL,  -- the URL fetched (canonical)
    host           TEXT    NOT NULL,
    outcome        TEXT    NOT NULL,  -- fetched or truncated
    status         INTEGER,           -- HTTP status
    content_type   TEXT,              -- media type, no parameters
    fetched_at     REAL    NOT NULL,  -- Unix time the fetch started
    depth          INTEGER NOT NULL,  -- links away from a seed
    bytes          INTEGER,           -- body bytes (decoded)
    digest         TEXT,              -- content fingerprint (NULL for a body cut short)
    title          TEXT,              -- <title> of an HTML page
    links_found    INTEGER,           -- links the extractors found
    links_admitted INTEGER,           -- of them, sent for admission
    dup_kind       TEXT,              -- unique, exact, near or skipped (NULL: not checked)
    worker         TEXT    NOT NULL   -- host-pid of the worker that fetched it
);
CREATE INDEX IF NOT EXISTS pages_url ON pages (url);
"""

COLUMNS = ("url", "host", "outcome", "status", "content_type", "fetched_at", "depth", "bytes",
           "digest", "title", "links_found", "links_admitted", "dup_kind", "worker")
_INSERT = f"INSERT INTO pages ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"


class SqlitePages(PagePipeline):
    """Settings: ``path`` (default ``<output_dir>/pages.sqlite``), ``commit_every`` (rows,
    default 200), ``commit_interval_s`` (default 2.0)."""

    def __init__(self, path: Path, worker: str, commit_every: int = 200,
                 commit_interval_s: float = 2.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.worker = path, worker
        self.commit_every, self.commit_interval_s = commit_every, commit_interval_s
        # One connection, used under the lock by the worker's threads in turn.
        self._db = sqlite3.connect(path, timeout=60.0, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()
        self._rows: list[tuple[Any, ...]] = []
        self._last_commit = time.monotonic()

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        unknown = set(settings) - {"path", "commit_every", "commit_interval_s"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}; known: path, commit_every, "
                             "commit_interval_s")
        if not isinstance(settings.get("path", ""), str):
            raise ValueError("path must be a string")
        every = settings.get("commit_every", 200)
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"commit_every must be an integer >= 1, not {every!r}")
        interval = settings.get("commit_interval_s", 2.0)
        if not isinstance(interval, int | float) or isinstance(interval, bool) or interval < 0:
            raise ValueError(f"commit_interval_s must be a number >= 0, not {interval!r}")

    @classmethod
    def from_setup(cls, setup: ComponentSetup) -> SqlitePages:
        s = setup.settings
        cls.check_settings(s)
        path = Path(s.get("path") or setup.output_dir / "pages.sqlite")
        return cls(path, setup.worker_id, s.get("commit_every", 200),
                   float(s.get("commit_interval_s", 2.0)))

    def process(self, item: PageItem) -> PageItem | None:
        rec = item.record
        title = item.parsed.title if item.parsed is not None else None
        row = (rec["url"], rec["host"], str(rec["outcome"]), rec.get("status"),
               rec.get("content_type"), rec["fetched_at"], rec["depth"], rec.get("bytes"),
               rec.get("digest"), title, rec.get("links_found"), rec.get("links_admitted"),
               rec.get("dup_kind"), self.worker)
        with self._lock:
            self._rows.append(row)
            if (len(self._rows) >= self.commit_every
                    or time.monotonic() - self._last_commit >= self.commit_interval_s):
                self._commit()
        return item

    def _commit(self) -> None:
        if self._rows:
            with self._db:  # one transaction for the batch
                self._db.executemany(_INSERT, self._rows)
            self._rows.clear()
        self._last_commit = time.monotonic()

    def close(self) -> None:
        with self._lock:
            self._commit()
            self._db.close()
