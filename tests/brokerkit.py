"""Helpers of the broker-safety tests (tests/test_broker_safety.py, tests/test_broker_tls.py):
the ``trawl`` CLI as a child process, a TLS-terminating proxy in front of a plain Redis, and
searches for a secret in files (gzip members decompressed) and in every value stored in Redis.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import os
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import redis

from sandbox import SandboxConfig, SandboxWeb

ROOT = Path(__file__).resolve().parents[1]

#: A small web: every special host exists (12 hosts), nothing slow enough to matter.
SMALL_WEB = SandboxConfig(seed=5, hosts=12, pages_per_host=10, ips=4, crawl_delay_s=0.1,
                          robots_slow_s=0.2, slow_page_s=0.2, hang_s=1.0)


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def trawl_cmd(*argv: str) -> list[str]:
    return [sys.executable, "-m", "workers.cli", *argv]


def trawl(*argv: str, timeout_s: float = 90.0) -> subprocess.CompletedProcess[str]:
    """Run ``trawl ARGV`` to its end; stdout and stderr captured (a hang fails the test)."""
    return subprocess.run(trawl_cmd(*argv), capture_output=True, text=True, env=child_env(),
                          timeout=timeout_s, stdin=subprocess.DEVNULL, cwd=ROOT)


def crawl_argv(web: SandboxWeb, redis_url: str, out: Path, namespace: str,
               workers: int = 2) -> list[str]:
    """``trawl crawl`` of ``web`` as tests/test_e2e_crawl.py runs it, logging at INFO (-v)."""
    return ["-v", "crawl", *web.seeds, "--redis", redis_url, "--workers", str(workers),
            "--concurrency", "6", "--allow", web.config.domain, "--output", str(out),
            "--summary-json", str(out / "summary.json"), "--no-progress",
            "--namespace", namespace, "--delay", "0.05", "--partitions", "8",
            "--set", "allow_private_ips=true", "--set", "adaptive_delay_factor=0",
            "--set", "static_hosts=" + json.dumps(web.resolver_map),
            "--set", "connect_timeout_s=1.0", "--set", "read_timeout_s=1.5",
            "--set", "total_timeout_s=2.0", "--set", "retry_backoff_s=0.2",
            "--set", "max_retries=1"]


def file_hits(root: Path, needle: str) -> list[str]:
    """Files under ``root`` whose bytes, or decompressed gzip content, contain ``needle``."""
    raw = needle.encode()
    hits = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".gz":
            with contextlib.suppress(OSError, EOFError):
                data += gzip.decompress(data)
        if raw in data:
            hits.append(str(path.relative_to(root)))
    return hits


def _values(client: redis.Redis, key: bytes) -> list[bytes]:
    kind = client.type(key).decode()
    if kind == "string":
        return [client.get(key) or b""]
    if kind == "hash":
        return [part for item in client.hgetall(key).items() for part in item]
    if kind == "list":
        return list(client.lrange(key, 0, -1))
    if kind == "set":
        return list(client.smembers(key))
    if kind == "zset":
        return list(client.zrange(key, 0, -1))
    if kind == "stream":
        return [part for _id, fields in client.xrange(key) for item in fields.items()
                for part in item]
    return [client.dump(key) or b""]  # a module type (RedisBloom's filters): its serialization


def redis_hits(client: redis.Redis, needle: str) -> list[str]:
    """Keys of the whole database whose name or any stored value contains ``needle``."""
    raw = needle.encode()
    return sorted(key.decode(errors="replace") for key in client.scan_iter(count=1000)
                  if raw in key or any(raw in v for v in _values(client, key)))


class TLSProxy:
    """A TLS server on 127.0.0.1 that forwards each connection's bytes to a plain TCP port.

    The redis-server binaries available to the tests are built without TLS, so a ``rediss://``
    client reaches Redis through this: the client's TLS handshake and certificate check are
    real (the certificate comes from the test's CA), and Redis itself sees plain RESP.
    """

    def __init__(self, target_port: int, context: ssl.SSLContext) -> None:
        self.target_port = target_port
        self.context = context
        self.port = 0
        self.connections = 0  # TLS handshakes that completed
        self.failed_handshakes = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="tls-proxy")
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> TLSProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(task := asyncio.current_task())  # type: ignore[arg-type]
        try:
            try:  # the handshake here, not in start_server, so a failed one is counted
                await writer.start_tls(self.context, ssl_handshake_timeout=5)
            except (OSError, TimeoutError):
                self.failed_handshakes += 1  # e.g. a client that refused our certificate
                writer.close()
                return
            self.connections += 1
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1",
                                                                     self.target_port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]

    @staticmethod
    async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except OSError:  # ssl.SSLError included
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                dst.close()

    def stop(self) -> None:
        async def shutdown() -> None:
            if self._server:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.sleep(0)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def http_get(port: int, path: str, auth: tuple[str, str] | None = None,
             timeout_s: float = 10.0) -> tuple[int, Any]:
    """GET ``path`` on 127.0.0.1:``port`` (with basic auth): status and body (JSON decoded)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if auth:
        req.add_header("Authorization",
                       "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body[:1] in (b"{", b"[") else body
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_exit(proc: subprocess.Popen[Any], timeout_s: float) -> int:
    """``proc``'s exit code; SIGKILL and fail if it runs longer than ``timeout_s``."""
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{proc.args!r} still running after {timeout_s} s") from None


def descendants(pid: int) -> list[int]:
    """The PIDs of ``pid``'s children, their children and so on, now (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (comm) state"
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def cmdline(pid: int) -> str:
    """``pid``'s command line as ``ps`` shows it to every user ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def contains(texts: Sequence[str], needle: str) -> list[int]:
    """Indexes of the ``texts`` containing ``needle``."""
    return [i for i, text in enumerate(texts) if needle in text]


@contextlib.contextmanager
def started(cmd: list[str], log: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A child process (own session, output to ``log``), stopped by SIGTERM then SIGKILL."""
    import signal

    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                stdin=subprocess.DEVNULL, env=child_env(**env),
                                start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
