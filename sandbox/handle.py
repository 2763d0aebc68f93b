"""SandboxWeb: run the sandbox server as a child process for tests, benchmarks and the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO

from .change_model import ChangeModel
from .config import SandboxConfig
from .requestlog import LogEntry, read_log
from .site import SandboxSite

E_CHILD_DIED = "sandbox server exited with code {code} before listening; its stderr:\n{err}"
E_TIMEOUT = "sandbox server did not report its port within {t:.0f} s; its stderr:\n{err}"


def _set_autogroup_nice(pid: int, nice: int) -> None:
    """Give the process's autogroup (its session, on kernels that group by session) the
    niceness ``nice``; nothing where autogroups are off or absent."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))


class SandboxWeb:
    """``with SandboxWeb(config, log_path) as web:`` → a running server; stopped on exit."""

    def __init__(self, config: SandboxConfig, log_path: str | Path, *, port: int = 0,
                 start_timeout_s: float = 30.0, pagerank_out: str | Path | None = None,
                 prerender: bool = False, https_port: int = 0, nice: int = 0) -> None:
        """``pagerank_out``: the server writes the PageRank JSON there before it reports
        ready, which takes seconds (about 8 s for 200 x 100 pages): raise start_timeout_s.
        ``prerender``: the server renders every page before it reports ready (about 1 ms a
        page), so serving costs it no rendering; raise start_timeout_s too. ``nice``: the
        server's scheduling niceness (negative needs root): a benchmark gives its web a higher
        CPU weight than the crawler's threads, as a web on machines of its own would have."""
        self.config = config
        self.log_path = Path(log_path)
        self.pagerank_out = Path(pagerank_out) if pagerank_out is not None else None
        self._port_arg = port
        self._https_port_arg = https_port
        self._prerender = prerender
        self._start_timeout_s = start_timeout_s
        self._nice = nice
        self._proc: subprocess.Popen[bytes] | None = None
        #: the server's stderr, made when it starts (closed in __exit__)
        self._stderr: IO[bytes] | None = None
        self.port = 0
        #: The port of the HTTPS hosts (config.https_share), on every IP; 0 without any.
        self.https_port = 0
        #: PEM of the CA the HTTPS hosts' certificates chain to (a crawl's ca_bundle); None
        #: without HTTPS hosts. The server removes it when it stops.
        self.ca_path: str | None = None
        self.resolver_map: dict[str, str] = {}
        self.seeds: list[str] = []
        #: With prerender: {"pages": N, "seconds": S} as the server reported it; else {}.
        self.prerendered: dict[str, float] = {}
        #: With traps: hosts, domains, farm_suffix and farm_ip (sandbox/traps.py); else {}.
        self.traps: dict[str, object] = {}
        self.site: SandboxSite | None = None
        #: With config.changes: wall time of simulated second 0, and the ground truth of
        #: when pages change (sandbox/change_model.py); else 0.0 and None.
        self.change_epoch = 0.0
        self.changes: ChangeModel | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None, "not started"
        return self._proc.pid

    def command(self) -> list[str]:
        """The command line that starts this web's server (``python -m sandbox ...``)."""
        c = self.config
        return [sys.executable, "-m", "sandbox", "--seed", str(c.seed), "--hosts", str(c.hosts),
                "--pages-per-host", str(c.pages_per_host), "--ips", str(c.ips),
                "--crawl-delay", str(c.crawl_delay_s), "--robots-slow", str(c.robots_slow_s),
                "--slow-page", str(c.slow_page_s), "--hang", str(c.hang_s),
                "--log", str(self.log_path), "--port", str(self._port_arg),
                "--domain", c.domain,
                *(["--duplicates"] if c.duplicates else []),
                *(["--traps"] if c.traps else []),
                *(["--sitemaps"] if c.sitemaps else []),
                *(["--latency", "--latency-median", str(c.latency_median_s),
                   "--latency-shape", str(c.latency_shape),
                   "--slow-host-share", str(c.slow_host_share),
                   "--fail-share", str(c.fail_share), "--keepalive-idle",
                   str(c.keepalive_idle_s), "--trickle-share", str(c.trickle_share),
                   "--latency-max-base", str(c.latency_max_base_s),
                   "--handshake-rtts" if c.handshake_rtts else "--no-handshake-rtts"]
                  if c.latency else []),
                *(["--https-share", str(c.https_share), "--https-port",
                   str(self._https_port_arg)] if c.https_share else []),
                *(["--changes", "--change-share", str(c.change_share),
                   "--change-min-interval", str(c.change_min_interval_s),
                   "--change-max-interval", str(c.change_max_interval_s),
                   "--cosmetic-share", str(c.cosmetic_share), "--etag-share", str(c.etag_share),
                   "--last-modified-share", str(c.last_modified_share),
                   "--wrong-lm-share", str(c.wrong_lm_share),
                   "--time-acceleration", str(c.time_acceleration),
                   "--change-epoch", str(c.change_epoch),
                   *(["--virtual-clock"] if c.virtual_clock else [])] if c.changes else []),
                *(["--prerender"] if self._prerender else []),
                *(["--pagerank-out", str(self.pagerank_out)] if self.pagerank_out else [])]

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    def start(self) -> SandboxWeb:
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        argv = self.command()
        if self._stderr is None:
            self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in __exit__
        if self._nice:  # nice(1) execs the server: the pid stays the server's
            argv = ["nice", "-n", str(self._nice), *argv]
        # A session of its own: with the kernel's autogroup scheduling, niceness only ranks
        # the threads of one session, and sessions share the CPU equally, so the web (one
        # thread) would get a crawler session's share whatever its niceness.
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr,
                                      env=env, start_new_session=bool(self._nice))
        if self._nice:
            _set_autogroup_nice(self._proc.pid, self._nice)
        assert self._proc.stdout is not None
        deadline = time.monotonic() + self._start_timeout_s
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if self._proc.poll() is not None:
                raise RuntimeError(E_CHILD_DIED.format(code=self._proc.returncode,
                                                       err=self._stderr_text()))
            if left <= 0:
                self.stop()
                raise TimeoutError(E_TIMEOUT.format(t=self._start_timeout_s,
                                                    err=self._stderr_text()))
            ready, _, _ = select.select([self._proc.stdout], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(self._proc.stdout.fileno(), 65536)
                if not chunk:
                    self._proc.wait(5)
                    continue
                line += chunk
        info = json.loads(line)
        self.port = int(info["port"])
        self.https_port = int(info.get("https_port", 0))
        self.ca_path = info.get("ca_path")
        self.resolver_map = dict(info["resolver_map"])
        self.seeds = list(info["seeds"])
        self.traps = dict(info.get("traps", {}))
        self.prerendered = dict(info.get("prerendered", {}))
        self.site = SandboxSite(self.config, self.port, self.https_port)
        if self.config.changes:
            self.change_epoch = float(info["change_epoch"])
            self.changes = ChangeModel(self.config, self.change_epoch, self.site.layout)
        return self

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 5 s. Returns the exit code."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()
        return proc.returncode

    def read_log(self) -> list[LogEntry]:
        return read_log(self.log_path) if self.log_path.exists() else []

    def __enter__(self) -> SandboxWeb:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if self._stderr is not None:
            self._stderr.close()
