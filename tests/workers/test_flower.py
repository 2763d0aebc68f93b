"""Real Flower on a real crawl: a Redis, the sandbox web, one Celery worker process sending
events, and Flower (workers.cli.flower) as a subprocess behind basic auth; read its HTTP API."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from frontier.config import ConfigError, CrawlConfig
from frontier.redisserver import EmbeddedRedis, free_port
from sandbox import SandboxConfig
from tests.waiting import wait_for
from tests.webs import SandboxWebs
from workers.cli.crawl import canonical_seeds, init_crawl
from workers.cli.flower import flower_command, parse_basic_auth

USER, PASSWORD = "trawl", "s3cret-pass"
ROOT = str(Path(__file__).resolve().parents[2])


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _stop(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def get(port: int, path: str, auth: tuple[str, str] | None = (USER, PASSWORD),
        timeout_s: float = 10.0) -> tuple[int, Any]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body[:1] in (b"{", b"[") else body
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, redis_server: EmbeddedRedis,
         module_webs: SandboxWebs) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("flower")
    ns = "flowertest"
    client = redis.Redis.from_url(redis_server.url)
    for key in client.scan_iter(f"{ns}*"):
        client.delete(key)
    cfg = SandboxConfig(seed=3, hosts=12, pages_per_host=20, ips=6, robots_slow_s=0.3,
                        slow_page_s=0.3, hang_s=2.0)
    procs: list[subprocess.Popen[bytes]] = []
    with module_webs.running(cfg) as web:
        config = CrawlConfig.from_dict({
            "namespace": ns, "output_dir": str(tmp / "out"), "host_delay_s": 0.2,
            "adaptive_delay_factor": 0.0, "allow_private_ips": True, "ip_concurrency": 0,
            "static_hosts": web.resolver_map, "allowed_domains": [cfg.domain],
            "connect_timeout_s": 1.0, "read_timeout_s": 1.5, "total_timeout_s": 2.0,
            "retry_backoff_s": 0.2, "max_retries": 1, "partitions": 8}).validate()
        init_crawl(client, config, canonical_seeds(web.seeds))
        port = free_port()
        try:
            flower_log = open(tmp / "flower.log", "wb")  # noqa: SIM115 - child owns it
            # The password goes in through Flower's own environment variable, not argv.
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "workers.cli.flower", "--redis", redis_server.url,
                 "--namespace", ns, "--port", str(port)],
                env=_env(FLOWER_BASIC_AUTH=f"{USER}:{PASSWORD}"), stdout=flower_log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
            flower_log.close()

            def up() -> bool:
                try:
                    return get(port, "/healthcheck", auth=None, timeout_s=1)[0] == 200
                except OSError:
                    return False

            wait_for(up, 30, "Flower to listen", interval_s=0.3)
            worker_log = open(tmp / "worker.log", "wb")  # noqa: SIM115
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "workers.cli", "worker", "--redis", redis_server.url,
                 "--namespace", ns, "--concurrency", "4", "--events", "--name", "wflower",
                 "--loglevel", "INFO"],
                env=_env(), stdout=worker_log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True))
            worker_log.close()
            yield {"port": port, "web": web, "ns": ns, "tmp": tmp, "procs": procs}
        finally:
            for proc in reversed(procs):
                _stop(proc)
            client.close()


def test_unauthenticated_and_wrong_password_are_refused(live: dict[str, Any]) -> None:
    port = live["port"]
    for path in ("/api/workers", "/api/tasks", "/", "/workers"):
        assert get(port, path, auth=None)[0] == 401, path
        assert get(port, path, auth=(USER, "wrong"))[0] == 401, path
        assert get(port, path, auth=("nobody", PASSWORD))[0] == 401, path


def test_api_shows_the_live_worker_with_its_queue(live: dict[str, Any]) -> None:
    port = live["port"]

    def worker_online() -> dict[str, Any] | None:
        status, body = get(port, "/api/workers?refresh=1")
        assert status == 200
        named = {k: v for k, v in body.items() if k.startswith("wflower@")}
        return named or None

    workers = wait_for(worker_online, 40, "the worker in /api/workers", interval_s=0.3)
    (_name, info), = workers.items()
    queues = sorted(q["name"] for q in info.get("active_queues", []))
    # the shared queue, and (fetch_affinity) the member's own, named after its member id
    shared = f"{live['ns']}.fetch"
    assert len(queues) == 2 and queues[0] == shared, queues
    assert queues[1].startswith(f"{shared}.wflower-"), queues
    assert "trawl.fetch" in info.get("registered", [])
    assert info["stats"]["pool"]["max-concurrency"] == 4


def test_api_counts_tasks_and_shows_urls_in_args(live: dict[str, Any]) -> None:
    port = live["port"]
    domain = live["web"].config.domain

    def succeeded() -> dict[str, Any] | None:
        status, tasks = get(port, "/api/tasks")
        assert status == 200
        done = {k: t for k, t in tasks.items() if t.get("state") == "SUCCESS"}
        return tasks if len(done) >= 5 else None

    tasks = wait_for(succeeded, 45, "5 succeeded tasks in /api/tasks", interval_s=0.3)
    assert {t["name"] for t in tasks.values()} == {"trawl.fetch"}
    assert all(t["worker"].startswith("wflower@") for t in tasks.values() if t.get("worker"))
    with_args = [t for t in tasks.values() if t.get("args")]
    assert with_args and all("http://" in t["args"] and domain in t["args"]
                             for t in with_args), with_args[:2]
    status, one = get(port, f"/api/task/info/{next(iter(tasks))}")
    assert status == 200 and one["name"] == "trawl.fetch"
    # Per-worker counters from the events Flower has seen.
    status, body = get(port, "/api/workers?status=1")
    assert status == 200 and any(k.startswith("wflower@") and v for k, v in body.items())


def test_dashboard_page_renders_for_an_authenticated_user(live: dict[str, Any]) -> None:
    status, body = get(live["port"], "/workers")
    assert status == 200 and b"Flower" in body


def test_flower_refuses_to_listen_publicly_without_auth(redis_server: EmbeddedRedis,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWER_BASIC_AUTH", raising=False)
    with pytest.raises(ConfigError, match="needs basic auth"):
        flower_command(redis_server.url, free_port(), address="0.0.0.0")
    with pytest.raises(ConfigError, match="USER:PASSWORD"):
        flower_command(redis_server.url, free_port(), address="0.0.0.0", basic_auth="admin")
    with pytest.raises(ConfigError, match="Cannot reach Redis"):
        flower_command("redis://127.0.0.1:1/0", free_port(), basic_auth="a:b")


def test_parse_basic_auth() -> None:
    assert parse_basic_auth("a:b,c:d:e") == [("a", "b"), ("c", "d:e")]
    for bad in ("", "a", "a:", ":b", "a:b,"):
        with pytest.raises(ConfigError):
            parse_basic_auth(bad)
