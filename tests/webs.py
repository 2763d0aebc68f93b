"""Sandbox webs for tests, started on demand and all stopped when the fixture's scope ends.

A sandbox server has state of its own that tests can see: its request log, the first 503 of each
flaky page, and the latency model's count of requests per URL. So a test either shares a web
(``shared``: it only reads pages, or reads the log from its own position) or gets a new one
(``fresh``, or ``running`` for a ``with`` block: it judges the whole log or the server's
first answers).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from sandbox import SandboxConfig, SandboxWeb

#: A SandboxWeb keyword argument: port, start_timeout_s, pagerank_out, prerender, https_port.
WebOption = int | float | bool | str | Path | None


class SandboxWebs:
    """Starts sandbox webs with their logs under ``log_dir``; ``close`` stops them all."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._numbers = itertools.count(1)
        self._running: dict[tuple[SandboxConfig, tuple[tuple[str, WebOption], ...]],
                            SandboxWeb] = {}
        self._stack = ExitStack()

    def shared(self, config: SandboxConfig, **options: WebOption) -> SandboxWeb:
        """The running web of ``config`` (and options) in this scope, started on first use."""
        key = (config, tuple(sorted(options.items())))
        if key not in self._running:
            self._running[key] = self.fresh(config, **options)
        return self._running[key]

    def fresh(self, config: SandboxConfig, **options: WebOption) -> SandboxWeb:
        """A newly started web with a log of its own, stopped when the scope ends."""
        return self._stack.enter_context(self.running(config, **options))

    @contextmanager
    def running(self, config: SandboxConfig, **options: WebOption) -> Iterator[SandboxWeb]:
        """A newly started web for the ``with`` block, stopped when it ends (log kept)."""
        log = self._log_dir / f"web{next(self._numbers)}-requests.log"
        with SandboxWeb(config, log, **options) as web:  # type: ignore[arg-type]
            yield web

    def close(self) -> None:
        self._running.clear()
        self._stack.close()
