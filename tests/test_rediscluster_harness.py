"""The Redis Cluster harness (tests/rediscluster.py) and what redis-py's cluster client can do
with our kind of Lua: one hash tag per script, many scripts of different slots per pipeline.

Findings pinned here (redis-py 8.x client, redis-server 6.2):
- ``Script.__call__(client=cluster_pipeline)`` is refused by redis-py before 8.2:
  ClusterPipeline blocks its ``evalsha`` method (RedisClusterException), loaded or not;
  redis-py 8.2 queues it like any command.
- ``cluster_pipeline.execute_command("EVALSHA", sha, n, *keys, *args)`` works: redis-py routes
  each command by its keys' slot, one pipeline per node, results back in order, mixed with
  ordinary commands. NOSCRIPT is not handled: load first with ``RedisCluster.script_load``
  (sent to every primary), and retry entries that come back as NoScriptError.
- A script may touch keys it was not given in KEYS if they share the slot; a key of a slot of
  another node is refused by the server ("non local key").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import MovedError, NoScriptError, RedisClusterException

from tests.rediscluster import RedisClusterHandle, redis_cluster

LUA = """
redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('SET', ARGV[1] .. 'side', ARGV[2])
return {tonumber(redis.call('GET', KEYS[1])), redis.call('GET', ARGV[1] .. 'side')}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterHandle]:
    with redis_cluster(tmp_path_factory.mktemp("cluster"), masters=3) as handle:
        yield handle


@pytest.fixture
def rc(cluster: RedisClusterHandle) -> Iterator[RedisCluster]:
    client = cluster.cluster_client()
    client.flushall()
    client.script_flush()
    yield client
    client.close()


def test_cluster_is_up_and_owns_all_slots(cluster: RedisClusterHandle) -> None:
    assert len(cluster.urls) == 3
    info = cluster.nodes[0].client().execute_command("CLUSTER INFO")
    assert info["cluster_state"] == "ok"
    assert int(info["cluster_slots_assigned"]) == 16384
    assert int(info["cluster_known_nodes"]) == 3
    owners = {cluster.node_for_slot(s).port for s in (0, 8000, 16383)}
    assert owners == set(cluster.ports)


def test_cluster_client_from_url_reads_and_writes(cluster: RedisClusterHandle) -> None:
    client = RedisCluster.from_url(cluster.urls[1])
    try:
        for p in range(32):
            client.set(f"t:{{{p}}}k", p)
        assert [int(client.get(f"t:{{{p}}}k")) for p in range(32)] == list(range(32))
        ports = {cluster.node_for_slot(client.keyslot(f"t:{{{p}}}k")).port for p in range(32)}
        assert len(ports) == 3  # 32 partitions land on every master
    finally:
        client.close()


def test_script_with_one_hash_tag_runs_on_the_owning_node(cluster: RedisClusterHandle,
                                                           rc: RedisCluster) -> None:
    script = rc.register_script(LUA)
    assert script(keys=["t:{7}n"], args=["t:{7}", 5]) == [5, b"5"]
    owner = cluster.node_for_slot(rc.keyslot("t:{7}n"))
    direct = owner.client()
    assert direct.get("t:{7}n") == b"5" and direct.get("t:{7}side") == b"5"
    for other in cluster.nodes:
        if other is not owner:
            assert other.client().script_exists(script.sha) == [True]  # loaded everywhere
            with pytest.raises(MovedError, match=f":{owner.port}$"):
                other.client().get("t:{7}n")


def test_script_cannot_reach_a_key_on_another_node(cluster: RedisClusterHandle,
                                                   rc: RedisCluster) -> None:
    script = rc.register_script(LUA)
    here = cluster.node_for_slot(rc.keyslot("t:{7}n")).port
    elsewhere = next(p for p in range(100)
                     if cluster.node_for_slot(rc.keyslot(f"t:{{{p}}}n")).port != here)
    with pytest.raises(redis.ResponseError, match="non local key"):
        script(keys=["t:{7}n"], args=[f"t:{{{elsewhere}}}", 1])
    with pytest.raises(RedisClusterException, match="same key slot"):
        script(keys=["t:{1}n", "t:{2}n"], args=["t:{1}", 1])


REDIS_PY = tuple(int(x) for x in redis.__version__.split(".")[:2])


def test_script_call_with_cluster_pipeline_depends_on_the_redis_py_version(
        rc: RedisCluster) -> None:
    """Blocked before redis-py 8.2, queued from 8.2 on: our code sends EVALSHA through
    ``execute_command`` (next test), which works with both, so the version is not pinned."""
    script = rc.register_script(LUA)
    rc.script_load(LUA)
    pipe = rc.pipeline(transaction=False)
    if REDIS_PY < (8, 2):
        with pytest.raises(RedisClusterException, match="evalsha is blocked"):
            script(keys=["t:{1}n"], args=["t:{1}", 1], client=pipe)
    else:
        script(keys=["t:{1}n"], args=["t:{1}", 1], client=pipe)
        script(keys=["t:{2}n"], args=["t:{2}", 2], client=pipe)
        assert pipe.execute() == [[1, b"1"], [2, b"2"]]


def test_evalsha_via_execute_command_in_one_cluster_pipeline(cluster: RedisClusterHandle,
                                                             rc: RedisCluster) -> None:
    sha = rc.script_load(LUA)  # SCRIPT LOAD goes to every primary
    assert all(n.client().script_exists(sha) == [True] for n in cluster.nodes)
    pipe = rc.pipeline(transaction=False)
    partitions = range(64)
    for p in partitions:
        pipe.execute_command("EVALSHA", sha, 1, f"t:{{{p}}}n", f"t:{{{p}}}", p)
        pipe.hincrby(f"t:{{{p}}}h", "x", 1)
    pipe.incr("untagged")
    t0 = time.monotonic()
    res = pipe.execute()
    elapsed = time.monotonic() - t0
    assert res[:-1:2] == [[p, str(p).encode()] for p in partitions]
    assert res[1:-1:2] == [1] * 64 and res[-1] == 1
    assert elapsed < 2.0


def test_noscript_in_cluster_pipeline_is_reported_per_entry_and_retry_works(
        cluster: RedisClusterHandle, rc: RedisCluster) -> None:
    sha = rc.script_load(LUA)
    flushed = cluster.nodes[1]
    flushed.client().script_flush()  # e.g. a restarted or failed-over primary
    parts = list(range(24))

    def run(ps: list[int]) -> list[object]:
        pipe = rc.pipeline(transaction=False)
        for p in ps:
            pipe.execute_command("EVALSHA", sha, 1, f"t:{{{p}}}n", f"t:{{{p}}}", 1)
        return pipe.execute(raise_on_error=False)

    res = run(parts)
    missing = [p for p, r in zip(parts, res, strict=True) if isinstance(r, NoScriptError)]
    assert missing and all(cluster.node_for_slot(rc.keyslot(f"t:{{{p}}}n")) is flushed
                           for p in missing)
    ok = [p for p in parts if p not in missing]
    assert all(res[p] == [1, b"1"] for p in ok)
    rc.script_load(LUA)
    assert run(missing) == [[1, b"1"]] * len(missing)


def test_single_slot_transaction_pipeline(rc: RedisCluster) -> None:
    sha = rc.script_load(LUA)
    pipe = rc.pipeline(transaction=True)
    pipe.execute_command("EVALSHA", sha, 1, "t:{9}n", "t:{9}", 2)
    pipe.incr("t:{9}m")
    assert pipe.execute() == [[2, b"2"], 1]


def test_harness_by_hand_with_replicas_and_cleanup(tmp_path: Path) -> None:
    with redis_cluster(tmp_path, masters=3, replicas=1, use_cli=False) as handle:
        procs = [n.proc for n in handle.nodes]
        nodes = handle.nodes[0].client().execute_command("CLUSTER NODES")
        flags = sorted(v["flags"].replace("myself,", "") for v in nodes.values())
        assert flags == ["master"] * 3 + ["slave"] * 3
        client = handle.cluster_client()
        client.set("t:{3}x", "v")
        assert client.get("t:{3}x") == b"v"
        client.close()
    assert all(p.poll() is not None for p in procs)
