"""The schedulers' backlog gate (workers/cluster/backlog.py): leases out, less the fetches the
engines have on the network, kept under cpu_backlog per engine; read from the figures the
engines publish in Redis."""

from __future__ import annotations

import time

import redis

from workers.cluster.backlog import READ_EVERY_S, BacklogGate
from workers.runtime.figures import EngineFigures, publish_figures

KEY = "gate-test:engines"


def publish(client: redis.Redis, worker: str, fetching: int, at: float) -> None:
    publish_figures(client, KEY, EngineFigures(worker=worker, capacity=100, in_flight=0,
                                               waiting=0, completed=0, cpu_load=1.0, at=at,
                                               fetching=fetching))


def test_room_is_the_bound_less_the_leases_waiting_ahead_of_the_network(
        redis_client: redis.Redis) -> None:
    redis_client.delete(KEY)
    gate = BacklogGate(redis_client, KEY, per_engine=200)
    now = time.time()
    assert gate.room(now, 1.0, leases_out=5000) is None  # no engine publishes: no limit
    publish(redis_client, "w1", fetching=100, at=now)
    publish(redis_client, "w2", fetching=300, at=now)
    later = now + READ_EVERY_S
    # 2 engines x 200 may wait; 450 out, 400 of them fetching: 50 wait, room for 350
    assert gate.room(later, 1.0, leases_out=450) == 350
    assert gate.room(later, 1.0, leases_out=800) == 0  # 400 wait: the bound
    assert gate.room(later, 1.0, leases_out=2000) == 0  # never negative
    # a scheduler of half the partitions: half the bound, half the fetches
    assert gate.room(later, 0.5, leases_out=250) == 150


def test_off_and_stale_engines(redis_client: redis.Redis) -> None:
    redis_client.delete(KEY)
    now = time.time()
    publish(redis_client, "w1", fetching=0, at=now)
    assert BacklogGate(redis_client, KEY, per_engine=0).room(now, 1.0, 10_000) is None
    assert BacklogGate(redis_client, KEY, per_engine=200).room(now, 1.0, 10_000) == 0
    # an engine that stopped publishing long ago no longer holds the crawl back
    assert BacklogGate(redis_client, KEY, per_engine=200).room(now + 60, 1.0, 10_000) is None


def test_a_member_with_its_own_queue_is_gated_on_its_own_engine(
        redis_client: redis.Redis) -> None:
    """fetch_affinity: a member's tasks go to its own worker's engine only. Its gate counts
    that engine's fetches under one cpu_backlog, whatever the other engines do."""
    redis_client.delete(KEY)
    now = time.time()
    publish(redis_client, "small", fetching=20, at=now)  # a worker with few fetches going
    publish(redis_client, "large", fetching=380, at=now)
    own = BacklogGate(redis_client, KEY, per_engine=200, engine="small")
    # 100 out to "small", 20 of them fetching: 80 wait there, room for 120 more
    assert own.room(now, 0.5, leases_out=100) == 120
    assert own.room(now, 0.5, leases_out=220) == 0  # 200 wait: the bound
    # Control: gated on half of all engines, the member would send "small" another 220,
    # to wait in its queue while "large" has the room.
    shared = BacklogGate(redis_client, KEY, per_engine=200)
    assert shared.room(now, 0.5, leases_out=100) == 300
    # Its own engine not publishing (not started yet, or stopped): no limit, as with none.
    assert BacklogGate(redis_client, KEY, per_engine=200, engine="other").room(
        now, 0.5, leases_out=100) is None
