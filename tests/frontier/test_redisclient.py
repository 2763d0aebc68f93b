"""client_from_url's connections pack commands with hiredis directly (FastPacker), against a
real Redis: the same bytes as redis-py's packer, the same errors, cluster and single server."""

from __future__ import annotations

import pytest
import redis
from redis.connection import Connection, Encoder, HiredisRespSerializer, PythonRespSerializer

from frontier.redisclient import FastPacker, client_from_url, fast_packing
from frontier.redisserver import EmbeddedRedis

ARGS = [("SET", "k", "v"), ("SCRIPT LOAD", "return 1"), (b"SCRIPT FLUSH",),
        ("ZADD", "z", 1796397706.1058173, "m", -0.0, "n", 1e-07, "o", float("inf"), "p"),
        ("HSET", "h", "é€😀", b"\x00\xff", 12345678901234567890123, 7),
        ("EVALSHA", "a" * 40, 2, "k1", "k2", *[f"https://h{i}.test/p?q={i}" for i in range(300)])]


def _reference() -> HiredisRespSerializer:
    enc = Encoder("utf-8", "strict", False)
    return HiredisRespSerializer(PythonRespSerializer(6000, enc.encode).pack, enc.encode)


@pytest.mark.parametrize("args", ARGS)
def test_same_bytes_as_redis_py(args: tuple) -> None:
    ref = _reference()
    assert b"".join(FastPacker(ref).pack(*args)) == b"".join(ref.pack(*args))


@pytest.mark.parametrize("bad", [True, None, object()])
def test_bad_argument_raises_redis_py_error(bad: object) -> None:
    with pytest.raises(redis.DataError):
        FastPacker(_reference()).pack("SET", "k", bad)


def test_buffers_go_to_the_fallback() -> None:
    ref = _reference()
    for value in (memoryview(b"abc"), bytearray(b"abc")):
        assert b"".join(FastPacker(ref).pack("SET", "k", value)) == b"".join(
            ref.pack("SET", "k", b"abc"))


def test_client_uses_fast_packer_end_to_end(redis_server: EmbeddedRedis) -> None:
    client = client_from_url(redis_server.url)
    conn = client.connection_pool.get_connection()
    try:
        assert isinstance(conn._command_packer, FastPacker)
        assert isinstance(conn, Connection)
    finally:
        client.connection_pool.release(conn)
    client.delete("{t}z", "{t}h")
    pipe = client.pipeline(transaction=False)
    pipe.zadd("{t}z", {"a": 1.5, "b": -2})
    pipe.hset("{t}h", mapping={"é": "😀", "n": 3})
    pipe.execute_command("SCRIPT LOAD", "return #ARGV")
    sha = pipe.execute()[-1]
    assert client.zrange("{t}z", 0, -1, withscores=True) == [(b"b", -2.0), (b"a", 1.5)]
    assert client.hgetall("{t}h") == {"é".encode(): "😀".encode(), b"n": b"3"}
    assert client.evalsha(sha, 0, *range(250)) == 250
    with pytest.raises(redis.DataError):
        client.set("{t}k", None)  # type: ignore[arg-type]
    client.close()


def test_wrapping_is_cached_and_idempotent() -> None:
    cls = fast_packing(Connection)
    assert fast_packing(Connection) is cls and fast_packing(cls) is cls
