"""Shared fixtures: one real Redis server, sandbox webs, and plain HTTP servers on loopback.

Servers are shared where tests only read from them (Redis for the session, a sandbox web or an
HTTP server per module); what a test changes is reset per test (``redis_client`` empties the
server first) or lives in a web of its own (``webs.fresh``).
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import redis

from frontier.redisserver import EmbeddedRedis
from tests.loopback import HTTPServerFactory, LoopbackServer, ReplyHandler, Respond
from tests.webs import SandboxWebs


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="module")
def module_webs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxWebs]:
    """Sandbox webs for a module: ``shared(config)`` is one server for all its tests."""
    webs = SandboxWebs(tmp_path_factory.mktemp("webs"))
    yield webs
    webs.close()


@pytest.fixture
def webs(tmp_path: Path) -> Iterator[SandboxWebs]:
    """Sandbox webs for one test, stopped when it ends."""
    test_webs = SandboxWebs(tmp_path)
    yield test_webs
    test_webs.close()


@pytest.fixture(scope="module")
def http_server() -> Iterator[HTTPServerFactory]:
    """Starts plain HTTP servers on loopback for a module; all stopped when it ends."""
    started: list[LoopbackServer] = []

    def start(handler: type[BaseHTTPRequestHandler] = ReplyHandler, addr: str = "127.0.0.1",
              respond: Respond | None = None) -> LoopbackServer:
        server = LoopbackServer(handler, addr, respond=respond).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
