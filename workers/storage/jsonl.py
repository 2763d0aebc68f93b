"""The crawl's JSONL records: one JSON object per line per URL that ended (see
``workers.pipeline.lease._record``), appended whole under a lock."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any


class RecordWriter:
    """Append-only JSONL: one JSON object per line, written whole under a lock.

    Lines are flushed to the OS every ``flush_every`` records and on ``flush``/``close``
    (``flush_every=1`` for line-at-a-time durability). Thread-safe.
    """

    def __init__(self, path: Path, flush_every: int = 100) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_every = max(1, flush_every)
        self._file: IO[str] | None = open(  # noqa: SIM115 - closed in close()
            self.path, "a", encoding="utf-8", newline="\n"
        )
        self._lock = threading.Lock()
        self._pending = 0
        self.records_written = 0

    def write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self._file is None:
                raise ValueError("RecordWriter is closed")
            self._file.write(line)
            self.records_written += 1
            self._pending += 1
            if self._pending >= self.flush_every:
                self._file.flush()
                self._pending = 0

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()
                self._pending = 0

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.flush()
                self._file.close()
                self._file = None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
