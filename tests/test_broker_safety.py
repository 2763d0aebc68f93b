"""State and broker safety (issue 21), on a real redis-server with ``--requirepass``.

- Celery accepts JSON only: a pickle task message on the crawl's queue, even one whose
  unpickling would run code, is refused by a real worker without being decoded or run, and
  the worker goes on with the next (JSON) message.
- No password leaks: a whole ``trawl crawl`` (real workers, the sandbox web) against
  ``redis://:PASSWORD@...``, then ``trawl status`` and its error messages; the password is
  searched in every output: stdout/stderr, worker logs, summary, JSONL records, WARC files
  (decompressed) and every key and value in Redis. Each search has a control where the
  password is known to be, so a search that cannot find anything cannot pass.

One Redis for the module; TLS (``rediss://``) is in tests/test_broker_tls.py.
"""

from __future__ import annotations

import gzip
import json
import pickle
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from celery import Celery
from kombu import Connection

from frontier.config import CrawlConfig
from frontier.counters import ERRORS
from frontier.keys import Keys, task_queue
from frontier.redisclient import redacted
from frontier.redisserver import EmbeddedRedis, free_port
from tests.brokerkit import (
    SMALL_WEB,
    cmdline,
    contains,
    crawl_argv,
    descendants,
    file_hits,
    redis_hits,
    started,
    trawl,
    trawl_cmd,
)
from tests.waiting import wait_for
from tests.webs import SandboxWebs
from workers.cli.crawl import init_crawl

pytestmark = pytest.mark.e2e

PASSWORD = "pw-" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def pw_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """The module's Redis: clients must AUTH with PASSWORD."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("pw-redis"), password=PASSWORD).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(pw_redis: EmbeddedRedis) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(pw_redis.url) as c:
        yield c


def test_server_requires_the_password(pw_redis: EmbeddedRedis, client: redis.Redis) -> None:
    """Without AUTH the server answers nothing: the crawls below really authenticate."""
    with pytest.raises(redis.AuthenticationError), \
            redis.Redis(port=pw_redis.port, socket_timeout=2) as anonymous:
        anonymous.ping()
    assert client.ping()


def test_redacted_masks_every_password_form() -> None:
    """The masking the messages below rely on: userinfo and query passwords, nothing else."""
    cases = {
        "redis://:pw@h:1/0": "redis://:***@h:1/0",
        "rediss://u:p%40w@h:6380/0?ssl_cert_reqs=required&ssl_ca_certs=/c.pem":
            "rediss://u:***@h:6380/0?ssl_cert_reqs=required&ssl_ca_certs=/c.pem",
        "redis://h:1/0?db=1&password=pw": "redis://h:1/0?db=1&password=***",
        "unix:///run/r.sock?password=pw": "unix:///run/r.sock?password=***",
        "redis://u@h:1/0": "redis://u@h:1/0",
        "redis-cluster://:pw@h:7000": "redis-cluster://:***@h:7000",
    }
    assert {url: redacted(url) for url in cases} == cases


# -- pickle refused ------------------------------------------------------------------------


class RunsOnLoad:
    """Unpickling this opens (creates) ``path``: code run by the mere decoding."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.path, "w"))


def _publish(url: str, queue: str, batch: list[object], pickled: bool) -> None:
    """A protocol-2 ``trawl.fetch`` message with ``batch``, serialized as pickle or JSON;
    headers and routing are the same either way."""
    amqp = Celery("probe", set_as_current=False).amqp
    msg = amqp.as_task_v2(str(uuid.uuid4()), "trawl.fetch", args=(batch,))
    embed = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
    payload = ((batch,), {}, embed)
    if pickled:
        body, ctype, enc = pickle.dumps(payload), "application/x-python-serialize", "binary"
    else:
        body, ctype, enc = json.dumps(payload).encode(), "application/json", "utf-8"
    with Connection(url) as conn:
        conn.Producer().publish(body, exchange="", routing_key=queue, headers=msg.headers,
                                content_type=ctype, content_encoding=enc, **msg.properties)


def test_pickle_message_refused_without_running(pw_redis: EmbeddedRedis, client: redis.Redis,
                                                tmp_path: Path) -> None:
    """A worker of the crawl gets two pickle messages (one runs code when unpickled) and
    then a JSON one with the same batch: only the JSON one reaches the task."""
    ns = "pickled"
    init_crawl(client, CrawlConfig.from_dict({"namespace": ns, "partitions": 4,
                                              "output_dir": str(tmp_path / "out")}), [])
    queue = task_queue(ns)
    bad = Keys(ns).stats(0), ERRORS.name("bad_message")  # the task's effect on this batch
    marker = tmp_path / "unpickled-marker"
    evil = ["not-an-order", RunsOnLoad(marker)]
    log = tmp_path / "worker.log"
    with started(trawl_cmd("worker", "--redis", pw_redis.url, "--namespace", ns,
                           "--name", "wpickle", "--loglevel", "DEBUG"), log) as worker:
        wait_for(lambda: b" ready." in log.read_bytes(), 40, "the worker to be ready", 0.2)
        _publish(pw_redis.url, queue, evil, pickled=True)
        _publish(pw_redis.url, queue, ["not-an-order"], pickled=True)
        _publish(pw_redis.url, queue, ["not-an-order"], pickled=False)
        wait_for(lambda: client.hget(*bad) == b"1", 30, "the JSON task to run")
        refusals = wait_for(
            lambda: log.read_text().count("untrusted content of type pickle") >= 2 and log,
            10, "two refusals in the worker log")
        assert worker.poll() is None, "the worker died"
        # Neither pickle ran: no marker, the task counted one malformed batch (the JSON one).
        assert not marker.exists()
        assert client.hget(*bad) == b"1"
        # Both refused messages were acked away, not left to come back.
        wait_for(lambda: client.llen(queue) == 0 and client.hlen("unacked") == 0, 10,
                 "the queue and the unacked messages empty")
        # Still serving: one more JSON message is processed.
        _publish(pw_redis.url, queue, ["still-alive"], pickled=False)
        wait_for(lambda: client.hget(*bad) == b"2", 30, "a following JSON task to run")
    text = refusals.read_text()
    assert "ContentDisallowed" in text and "application/x-python-serialize" in text
    assert PASSWORD not in text
    # Control: the same bytes do run code when unpickled, so the absent marker means something.
    pickle.loads(pickle.dumps(evil))
    assert marker.exists()


# -- no password in any output -------------------------------------------------------------


@dataclass
class Run:
    argv: list[str]
    out: Path
    namespace: str
    summary: dict[str, object]
    #: name -> captured stdout/stderr of each command run
    outputs: dict[str, str]
    #: the crawl's own command line, and each process it started (pid -> command line, as
    #: last read from /proc while the crawl ran)
    crawl_cmdline: str = ""
    children: dict[int, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def password_crawl(pw_redis: EmbeddedRedis, module_webs: SandboxWebs,
                   tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``trawl crawl`` with the password in ``--redis``, then ``trawl status`` (table, JSON,
    and its two error messages: no such crawl, Redis unreachable)."""
    out = tmp_path_factory.mktemp("pw-crawl")
    ns = "pwcrawl"
    web = module_webs.shared(SMALL_WEB)
    argv = crawl_argv(web, pw_redis.url, out, ns)
    outputs = {}
    log = tmp_path_factory.mktemp("pw-crawl-log") / "crawl.out"
    children: dict[int, str] = {}
    with started(trawl_cmd(*argv), log) as crawl:
        own = cmdline(crawl.pid)
        deadline = time.monotonic() + 120
        while crawl.poll() is None and time.monotonic() < deadline:
            own = own or cmdline(crawl.pid)  # read "" once in CI, right after the start
            for pid in descendants(crawl.pid):  # the last reading: after the child's exec
                children[pid] = cmdline(pid) or children.get(pid, "")
            time.sleep(0.1)
        returncode = crawl.wait(5)
    outputs["crawl"] = log.read_text()
    assert returncode == 0, outputs["crawl"][-3000:]
    status_runs = {
        "status": ("status", "--redis", pw_redis.url, "--namespace", ns),
        "status-json": ("status", "--redis", pw_redis.url, "--namespace", ns, "--json",
                        "--partitions"),
        "status-no-crawl": ("status", "--redis", pw_redis.url, "--namespace", "nosuch"),
        "status-unreachable": ("status", "--redis",
                               f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"),
        "seed-no-crawl": ("seed", "--redis", pw_redis.url, "--namespace", "nosuch",
                          "http://x.test/"),
    }
    for name, args in status_runs.items():
        res = trawl(*args, timeout_s=60)
        outputs[name] = f"rc={res.returncode}\n{res.stdout}{res.stderr}"
    summary = json.loads((out / "summary.json").read_text())
    return Run(argv, out, ns, summary, outputs, own, children)


def test_crawl_with_a_password_completes(password_crawl: Run) -> None:
    """The crawl ran through the password-protected Redis and accounted for every URL."""
    s = password_crawl.summary
    assert s["pages_fetched"] >= 60 and s["accounted"] == s["urls_admitted"]
    assert s["queued"] == 0 and s["inflight"] == 0
    out = password_crawl.out
    assert list((out / "records").glob("*.jsonl")) and list((out / "warc").glob("*.warc.gz"))
    assert len(list((out / "logs").glob("worker-*.log"))) == 2


def test_status_commands_ran_and_failed_as_expected(password_crawl: Run) -> None:
    """The outputs searched below are the real ones: a table, JSON, and two error messages
    that name the (masked) URL."""
    o = password_crawl.outputs
    assert o["status"].startswith("rc=0") and "limited by:" in o["status"]
    totals = json.loads(o["status-json"].split("\n", 1)[1])["totals"]
    assert totals["fetched"] == password_crawl.summary["pages_fetched"]
    for name in ("status-no-crawl", "status-unreachable", "seed-no-crawl"):
        assert o[name].startswith("rc=2") and "redis://:***@127.0.0.1:" in o[name], o[name]
    assert "No crawl named 'nosuch'" in o["status-no-crawl"]
    assert "Cannot reach Redis" in o["status-unreachable"]


def test_password_in_no_command_output(password_crawl: Run) -> None:
    o = password_crawl.outputs
    assert contains(list(o.values()), PASSWORD) == []
    # Control: the same search finds it in the command line that was run.
    assert contains([" ".join(password_crawl.argv)], PASSWORD) == [0]


def test_password_in_no_worker_command_line(password_crawl: Run) -> None:
    """``trawl crawl`` hands the Redis URL to the workers it starts by environment: no
    process it started shows the password to ``ps`` (/proc/PID/cmdline, readable by every
    user). Control: the crawl's own command line, read the same way, has it (it was given
    ``--redis`` with the password)."""
    workers = [c for c in password_crawl.children.values() if " worker " in c]
    assert len(workers) == 2, password_crawl.children
    assert all("--redis" not in c for c in workers), workers
    assert contains(list(password_crawl.children.values()), PASSWORD) == []
    assert PASSWORD in password_crawl.crawl_cmdline


def test_password_in_no_output_file(password_crawl: Run, tmp_path: Path) -> None:
    """Worker logs (Celery's banner names the broker), summary, records, WARC: none has it."""
    out = password_crawl.out
    banners = [p.read_text() for p in (out / "logs").glob("worker-*.log")]
    assert all("transport:   redis://:**@127.0.0.1:" in b for b in banners), banners[0][:2000]
    assert file_hits(out, PASSWORD) == []
    # Control: the search sees into a gzip member and a plain file.
    (tmp_path / "a.warc.gz").write_bytes(gzip.compress(f"x{PASSWORD}y".encode()))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "w.log").write_text(f"redis://:{PASSWORD}@h")
    assert file_hits(tmp_path, PASSWORD) == ["a.warc.gz", "logs/w.log"]


def test_password_in_no_redis_key_or_value(password_crawl: Run, client: redis.Redis) -> None:
    """Every key of the server (the crawl's stored config among them), every value read."""
    keys = Keys(password_crawl.namespace)
    config = json.loads(client.get(keys.config))
    assert config["namespace"] == password_crawl.namespace
    assert redis_hits(client, PASSWORD) == []
    # Control: a hash field holding the password is found, by key.
    client.hset("control:secret", "url", f"redis://:{PASSWORD}@h/0")
    try:
        assert redis_hits(client, PASSWORD) == ["control:secret"]
    finally:
        client.delete("control:secret")
