"""The server's request log: one JSON object per line, buffered, flushed every 0.1 s and at exit.

Fields: start, end (time.time() floats; end is taken after the response was written), sent
(just before the last write: a lower bound on when the client had the whole response), host
(Host header without port), ip (local address the request arrived on), path (with query),
method, status (0 if the client went away or the server shut down first), bytes (body length
sent), ua (User-Agent), scheme (http, or https for a request over TLS), conn_request (its
number on its connection), and on the changing web version (of a changing page served, see
LogEntry.version).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

FLUSH_INTERVAL_S = 0.1


@dataclass(frozen=True, slots=True)
class LogEntry:
    start: float
    end: float
    host: str
    ip: str
    path: str
    method: str
    status: int
    bytes: int
    ua: str
    #: When the response was handed to the socket (before draining). The client cannot have
    #: the whole response before this, so "next start - sent" never overstates a client's gap
    #: (``end`` is stamped after the drain and can lag when the server is busy).
    sent: float = 0.0
    #: "https" when the request came over TLS (an HTTPS host's port).
    scheme: str = "http"
    #: The request's number on its connection: 1 for the first (a new TCP connection, and a
    #: TLS handshake on HTTPS), 2 and up for keep-alive reuse; 0 when unknown.
    conn_request: int = 0
    #: On the changing web (config.changes): the version of the changing page served (its
    #: number of changes since the web's epoch, sandbox/change_model.py). None, and absent
    #: from the line, for pages that never change and everything else.
    version: int | None = None


_FIELDS = tuple(f for f in LogEntry.__dataclass_fields__ if f != "version")


class RequestLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._buffer: list[str] = []
        self._task: asyncio.Task[None] | None = None

    def write(self, entry: LogEntry) -> None:
        # a dict of the fields, not asdict(): that deep-copies each value (~4x the time)
        fields = {f: getattr(entry, f) for f in _FIELDS}
        if entry.version is not None:
            fields["version"] = entry.version
        self._buffer.append(json.dumps(fields, separators=(",", ":")))

    def flush(self) -> None:
        if self._buffer:
            lines, self._buffer = self._buffer, []
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            self.flush()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.flush()
        self._file.close()


def read_log(path: str | Path) -> list[LogEntry]:
    """Entries of a log file; a partial last line (a write in progress) is skipped."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.endswith("\n"):
                out.append(LogEntry(**json.loads(line)))
    return out
