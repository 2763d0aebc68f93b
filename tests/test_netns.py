"""deploy/netns-cluster: namespaces for redis, web and workers on a private /24; a real
redis-server in the redis namespace, PINGed from worker namespaces; links cut and restored."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier.redisserver import redis_server_binary
from tests.netns import NetnsCluster, netns_unavailable

REASON = netns_unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"netns harness: {REASON}")

PASSWORD = "netns-pass"
# redis-py 8 retries a failed command 3 times with backoff by default: off here, so a failure
# shows after one socket timeout.
PING = ("import sys, time, redis\n"
        "from redis.backoff import NoBackoff\n"
        "from redis.retry import Retry\n"
        "t = time.monotonic()\n"
        "try:\n"
        "    redis.Redis(host=sys.argv[1], port=6379, password=sys.argv[2],\n"
        "                socket_timeout=1.5, socket_connect_timeout=1.5,\n"
        "                retry=Retry(NoBackoff(), 0)).ping()\n"
        "    print('PONG', round(time.monotonic() - t, 3))\n"
        "except Exception as exc:\n"
        "    print('FAIL', round(time.monotonic() - t, 3), type(exc).__name__)\n")
# A client connected before the cut: one PING a line on stdin, answer or failure on stdout.
HELD = ("import sys, time, redis\n"
        "from redis.backoff import NoBackoff\n"
        "from redis.retry import Retry\n"
        "r = redis.Redis(host=sys.argv[1], port=6379, password=sys.argv[2], socket_timeout=1.5,\n"
        "                socket_connect_timeout=1.5, retry=Retry(NoBackoff(), 0))\n"
        "r.ping(); print('READY', flush=True)\n"
        "for _ in sys.stdin:\n"
        "    t = time.monotonic()\n"
        "    try:\n"
        "        r.ping(); print('PONG', round(time.monotonic() - t, 3), flush=True)\n"
        "    except Exception as exc:\n"
        "        print('FAIL', round(time.monotonic() - t, 3), type(exc).__name__, flush=True)\n")
ROOT = str(Path(__file__).resolve().parent.parent)


def ping(net: NetnsCluster, node: str, target: str = "redis") -> tuple[str, float]:
    res = net.run(node, [sys.executable, "-c", PING, target, PASSWORD], timeout=30,
                  env=dict(os.environ, PYTHONPATH=ROOT))
    word, secs, *_ = res.stdout.split() or ["NOOUTPUT", "0", res.stderr]
    return word, float(secs)


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsCluster]:
    tmp = tmp_path_factory.mktemp("netns")
    cluster = NetnsCluster(prefix=f"tn{os.getpid() % 100000}", workers=3, web_ips=4)
    with cluster:
        redis_ip = cluster.ip("redis")
        server = cluster.popen("redis", [
            redis_server_binary(), "--bind", redis_ip, "--port", "6379",
            "--requirepass", PASSWORD, "--dir", str(tmp), "--save", "",
            "--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no",
            "--logfile", str(tmp / "redis.log")], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while ping(cluster, "w1")[0] != "PONG":
            assert server.poll() is None, (tmp / "redis.log").read_text()[-500:]
            assert time.monotonic() < deadline, "redis in its namespace never answered"
            time.sleep(0.2)
        cluster.redis_proc = server  # type: ignore[attr-defined]
        yield cluster
    server.wait(10)  # `down` stopped it with the namespace


def test_topology_and_names(net: NetnsCluster) -> None:
    assert net.names == ["redis", "web", "w1", "w2", "w3"]
    assert net.ip("redis") == "10.213.0.10" and net.ip("w3") == "10.213.0.103"
    assert len(net.namespaces()) == 6  # five nodes + the bridge namespace
    routes = net.run("w1", ["ip", "route"]).stdout
    assert "default" not in routes and "10.213.0.0/24 dev eth0" in routes
    web = net.run("web", ["ip", "-4", "-o", "addr", "show", "dev", "eth0"]).stdout
    assert [w.split("/")[0] for w in web.split() if w.startswith("10.213.")] \
        == net.web_addresses() == ["10.213.0.20", "10.213.0.21", "10.213.0.22", "10.213.0.23"]
    hosts = net.run("w2", ["getent", "hosts", "redis"]).stdout.split()
    assert hosts[:2] == ["10.213.0.10", "redis"]
    # The subnet exists only inside the harness: the root namespace has no route to it.
    assert "10.213.0." not in subprocess.run(["ip", "route"], capture_output=True,
                                             text=True).stdout


def test_every_worker_pings_redis_by_name(net: NetnsCluster) -> None:
    for node in net.worker_names:
        word, secs = ping(net, node)
        assert word == "PONG" and secs < 1.0, (node, word, secs)


def test_up_is_idempotent(net: NetnsCluster) -> None:
    before = net.namespaces()
    net.up()
    assert net.namespaces() == before
    assert ping(net, "w2")[0] == "PONG"
    assert net.redis_proc.poll() is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["link", "drop"])
def test_cut_fails_pings_within_bounded_time_and_restore_heals(net: NetnsCluster,
                                                               mode: str) -> None:
    held = net.popen("w1", [sys.executable, "-c", HELD, "redis", PASSWORD],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                     env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        assert held.stdout.readline().strip() == "READY"

        def held_ping() -> list[str]:
            held.stdin.write("ping\n")
            held.stdin.flush()
            return held.stdout.readline().split()

        assert held_ping()[0] == "PONG"
        net.cut("w1", mode)
        t0 = time.monotonic()
        word, secs = ping(net, "w1")
        assert word == "FAIL" and secs < 3.0, (word, secs)  # a new connection cannot be made
        held_res = held_ping()
        assert held_res[0] == "FAIL" and float(held_res[1]) < 3.0, held_res  # nor used
        assert time.monotonic() - t0 < 10.0
        assert ping(net, "w2")[0] == "PONG"  # only w1 is cut off
        status = net.status()
        assert ("link=down" in status) == (mode == "link")
        net.cut("w1", mode)  # cutting twice is harmless
        net.restore("w1")
        deadline = time.monotonic() + 10
        while (res := ping(net, "w1"))[0] != "PONG":
            assert time.monotonic() < deadline, res
        net.restore("w1")  # restoring twice too
        assert ping(net, "w1")[0] == "PONG"
        assert "link=down" not in net.status() and "blackholes=0" in net.status()
    finally:
        held.kill()
        held.wait()


def test_netem_cut_works_or_says_why(net: NetnsCluster) -> None:
    res = net.script("cut", "w3", "netem", check=False)
    try:
        if res.returncode == 0:
            assert ping(net, "w3")[0] == "FAIL"
        else:
            assert "netem unavailable" in res.stderr
    finally:
        net.restore("w3")
    assert ping(net, "w3")[0] == "PONG"


def test_down_removes_everything_and_stops_processes(tmp_path: Path) -> None:
    cluster = NetnsCluster(prefix=f"td{os.getpid() % 100000}", workers=3)
    cluster.up()
    sleeper = cluster.popen("w2", ["sleep", "300"])
    assert cluster.pids("w2") == [sleeper.pid]
    cluster.down()
    assert sleeper.wait(10) is not None
    assert cluster.namespaces() == []
    assert not Path(f"/etc/netns/{cluster.namespace('w2')}").exists()
    cluster.down()  # down twice is harmless
    with pytest.raises(RuntimeError, match="no node w1"):
        cluster.cut("w1")
