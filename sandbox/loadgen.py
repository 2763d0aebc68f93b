"""A lean load generator for the sandbox: visits hosts the way a crawler does, to measure the
server (bench/sandbox_throughput.py --internet).

Each of ``concurrency`` coroutines repeatedly takes a host, opens one connection (TLS verified
against the sandbox CA, SNI = the host, for HTTPS hosts), fetches the host's pages in turn
over it (keep-alive), and closes it. Requests are raw HTTP/1.1 over asyncio streams, so the
client spends little CPU per page and the machine's other core is left to the server.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Visit:
    """One host to visit: where it answers, and the paths to fetch there."""

    host: str
    ip: str
    port: int
    https: bool
    paths: tuple[str, ...]


@dataclass(slots=True)
class LoadResult:
    pages: int = 0  # complete 2xx/3xx/4xx/5xx responses
    ok: int = 0  # of which 200
    errors: int = 0  # resets, timeouts, refused handshakes
    handshakes: int = 0  # connections opened (TLS: handshakes)
    statuses: dict[int, int] = field(default_factory=dict)


async def _fetch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                 path: str) -> int:
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sandbox-loadgen\r\n"
                 "Accept-Encoding: identity\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
            break
    if length:
        await reader.readexactly(length)
    return status


async def _worker(visits: list[Visit], rng: random.Random, tls: ssl.SSLContext | None,
                  deadline: float, timeout_s: float, out: LoadResult) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        v = visits[rng.randrange(len(visits))]
        writer = None
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await asyncio.open_connection(
                    v.ip, v.port, ssl=tls if v.https else None,
                    server_hostname=v.host if v.https else None)
            out.handshakes += 1
            for path in v.paths:
                if loop.time() >= deadline:
                    break
                async with asyncio.timeout(timeout_s):
                    status = await _fetch(reader, writer, v.host, path)
                out.pages += 1
                out.ok += status == 200
                out.statuses[status] = out.statuses.get(status, 0) + 1
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError,
                asyncio.LimitOverrunError, ValueError):
            out.errors += 1
        finally:
            if writer is not None:
                writer.transport.abort()  # no close handshake: the next visit starts at once


async def run_load(visits: list[Visit], seconds: float, concurrency: int, ca_path: str | None,
                   seed: int = 0, timeout_s: float = 4.0) -> LoadResult:
    """Visit hosts for ``seconds`` with ``concurrency`` connections at a time."""
    tls = ssl.create_default_context(cafile=ca_path) if ca_path else None
    out = LoadResult()
    deadline = asyncio.get_running_loop().time() + seconds
    await asyncio.gather(*(_worker(visits, random.Random(seed * 100_003 + i), tls, deadline,
                                   timeout_s, out) for i in range(concurrency)))
    return out


def run_load_process(visits: list[Visit], seconds: float, concurrency: int,
                     ca_path: str | None, seed: int) -> tuple[LoadResult, float]:
    """For a child process: the result and the client's own CPU seconds."""
    cpu0 = time.process_time()
    result = asyncio.run(run_load(visits, seconds, concurrency, ca_path, seed))
    return result, time.process_time() - cpu0
