"""SlotPipeline on a real Redis: raw EVALSHA, batched adjacent calls, NOSCRIPT recovery."""

from __future__ import annotations

import redis

from frontier.config import CrawlConfig
from frontier.frontier import AdmitLink, Entry, Frontier
from frontier.slotpipe import LuaScript, SlotPipeline

ECHO = LuaScript("echo", "redis.call('INCR', KEYS[1]) return {KEYS[1], ARGV[1], #ARGV}")
OTHER = LuaScript("other", "return tonumber(ARGV[1]) * 2")


def calls(client: redis.Redis) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): v["calls"]
            for k, v in client.info("commandstats").items()}


def test_replies_in_call_order_and_adjacent_calls_batched(redis_client: redis.Redis) -> None:
    pipe = SlotPipeline(redis_client)
    pipe.script(ECHO, ["{1}a"], ["x", "y"])
    pipe.script(ECHO, ["{2}a"], ["z"])
    pipe.command("get", "{1}a")
    pipe.script(ECHO, ["{3}a"], ["w"])
    pipe.script(OTHER, ["{3}a"], [21])
    pipe.script(OTHER, ["{4}a"], [2])
    redis_client.config_resetstat()
    out = pipe.execute()
    assert out == [[b"{1}a", b"x", 2], [b"{2}a", b"z", 1], b"1", [b"{3}a", b"w", 1], 42, 4]
    c = calls(redis_client)
    # ECHO x2 batched, GET, ECHO alone, OTHER x2 batched: 3 EVALSHAs (+ first-use loads)
    assert c["evalsha"] == 3
    assert c.get("script", 0) <= 3
    redis_client.config_resetstat()
    pipe.script(ECHO, ["{1}a"], ["again"])
    pipe.script(ECHO, ["{2}a"], ["again"])
    pipe.execute()
    c = calls(redis_client)
    assert c["evalsha"] == 1 and "script" not in c  # loaded once: no SCRIPT EXISTS/LOAD now


def test_noscript_after_flush_is_recovered(redis_client: redis.Redis) -> None:
    pipe = SlotPipeline(redis_client)
    pipe.script(OTHER, ["k"], [1])
    assert pipe.execute() == [2]
    redis_client.script_flush()
    pipe.script(OTHER, ["k"], [5])
    pipe.command("incr", "n")
    pipe.script(ECHO, ["k1"], ["a"])
    pipe.script(ECHO, ["k2"], ["b"])
    assert pipe.execute() == [10, 1, [b"k1", b"a", 1], [b"k2", b"b", 1]]
    assert redis_client.get("n") == b"1"  # the plain command ran once, not again on retry


def test_script_error_is_raised(redis_client: redis.Redis) -> None:
    bad = LuaScript("bad", "return redis.call('NOSUCHCOMMAND')")
    pipe = SlotPipeline(redis_client)
    pipe.command("set", "x", 1)
    pipe.script(bad, ["k"], [])
    try:
        pipe.execute()
    except redis.ResponseError:
        pass
    else:
        raise AssertionError("no error raised")
    assert len(pipe) == 0 and redis_client.get("x") == b"1"


def test_frontier_admit_over_many_partitions_is_one_command(redis_client: redis.Redis) -> None:
    f = Frontier(redis_client, CrawlConfig(namespace="sp", host_delay_s=0.0))
    links = [AdmitLink(f"h{i}.test", f"http://h{i}.test/", Entry(f"http://h{i}.test/"))
             for i in range(200)]
    f.admit(links[:1])  # loads the scripts
    redis_client.config_resetstat()
    res = f.admit(links)
    assert res.admitted == 199 and res.rejected == 1
    assert calls(redis_client)["evalsha"] == 1
    redis_client.config_resetstat()
    leases, _ = f.acquire(10)
    assert len(leases) == 200
    assert calls(redis_client)["evalsha"] == 1
