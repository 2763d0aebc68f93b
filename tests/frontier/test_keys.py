"""frontier/keys.py: every key distinct per partition and host, one slot per partition (hash
tags for Redis Cluster), the suffix legend complete, and host names parsed back from keys."""

from __future__ import annotations

import re
from collections import Counter
from importlib import resources
from urllib.parse import urlsplit

import pytest
from redis.crc import key_slot

from frontier.keys import (
    Keys,
    domain_partition_of,
    host_name,
    ip_partition_of,
    partition_of,
    task_queue,
)
from frontier.urls import canonicalize, host_of

P = 64
HOSTS = [f"h{i}.test" for i in range(2000)]


def slot(key: str) -> int:
    return key_slot(key.encode())


def partition_keys(keys: Keys, p: int, host: str) -> list[str]:
    """Every key of partition ``p`` that Keys names (and the prefix-built ones of one host)."""
    pre = keys.prefix(p)
    return [keys.ready(p), keys.due_heap(p), keys.busy_hosts(p), keys.stats(p), keys.owner(p),
            keys.epoch(p), keys.robots(p, host), keys.soft404(p, host), keys.bloom(p) + "0",
            pre + "q:" + host, pre + "L", pre + "D", pre + "hn", pre + "qe", pre + "bf"]


def test_partition_functions_are_stable_in_range_and_spread() -> None:
    for fn in (partition_of, ip_partition_of, domain_partition_of):
        parts = [fn(h, P) for h in HOSTS]
        assert parts == [fn(h, P) for h in HOSTS]  # no salted hash
        assert all(0 <= p < P for p in parts)
        loads = Counter(parts)
        assert len(loads) == P and max(loads.values()) < 3 * len(HOSTS) / P, fn.__name__
    # Pinned values: every process and every release must agree on where a host lives (a
    # change here strands a running crawl's queues in the wrong partitions).
    assert (partition_of("example.com", 64), ip_partition_of("10.0.0.1", 64),
            domain_partition_of("example.com", 64)) == (9, 52, 51)
    # Hosts, IPs and domains are hashed apart: the same string lands in unrelated partitions.
    same = sum(partition_of(h, P) == ip_partition_of(h, P) for h in HOSTS)
    assert same < 3 * len(HOSTS) / P


def test_keys_of_one_partition_share_its_slot_and_no_other() -> None:
    keys = Keys("crawl")
    slots_seen: dict[int, int] = {}
    for p in range(P):
        host = HOSTS[p]
        names = partition_keys(keys, p, host)
        assert len(set(names)) == len(names)
        assert {slot(k) for k in names} == {slot(str(p))}, p  # hash tag {p}
        slots_seen[slot(keys.ready(p))] = p
    assert len(slots_seen) == P  # distinct partitions, distinct slots (for 64 of 16384)


def test_keys_are_distinct_per_partition_host_and_namespace() -> None:
    a, b = Keys("a"), Keys("b")
    names = [k for p in range(8) for h in HOSTS[:5] for k in partition_keys(a, p, h)]
    per_partition = set(names)
    # Host-independent keys repeat across hosts; every distinct name is one (p, role, host).
    assert len(per_partition) == 8 * (12 + 5 * 3)  # 12 per partition, 3 per host
    assert not per_partition & {k for p in range(8) for k in partition_keys(b, p, HOSTS[0])}
    assert a.robots(0, "x.test") != a.soft404(0, "x.test")
    assert a.robots(0, "x.test:8080") != a.robots(0, "x.test")


def test_ip_and_domain_keys_have_their_own_tags() -> None:
    keys = Keys("crawl")
    for i in range(P):
        assert keys.ip_prefix(i) == f"crawl:{{i{i}}}:"
        assert slot(keys.ip_next(i)) == slot(keys.ip_prefix(i) + "ipl:10.0.0.1") == slot(f"i{i}")
        assert keys.domain_prefix(i) == f"crawl:{{d{i}}}:"
        assert slot(keys.domain_spent(i)) == slot(keys.domain_prefix(i) + "in:a.test")
    assert keys.ip_prefix(3) != keys.prefix(3) != keys.domain_prefix(3)


def test_crawl_wide_keys_are_distinct_and_outside_partitions() -> None:
    keys = Keys("crawl")
    wide = [keys.config, keys.started, keys.admitted_total, keys.due, keys.members,
            keys.engines, keys.task_queue]
    assert len(set(wide)) == len(wide)
    assert all("{" not in k for k in wide)
    assert all(k.startswith("crawl:") for k in wide if k != keys.task_queue)
    # The Celery queue is outside "<ns>:*" (delete_crawl scans both patterns).
    assert keys.task_queue == task_queue("crawl") == "crawl.fetch"
    assert not keys.task_queue.startswith("crawl:")


def _suffixes_in_lua() -> set[str]:
    """Key suffixes the scripts append to a prefix: ``prefix .. 'x'`` (and ``'x' .. host``)."""
    found: set[str] = set()
    for path in resources.files("frontier").joinpath("lua").iterdir():
        if path.name.endswith(".lua"):
            found |= set(re.findall(r"prefix \.\. '([a-zA-Z:]+)'", path.read_text()))
    return found


def test_the_suffix_legend_lists_every_key_the_scripts_build() -> None:
    legend = "\n".join(doc or "" for doc in (Keys.prefix.__doc__, Keys.ip_prefix.__doc__,
                                             Keys.domain_prefix.__doc__))
    suffixes = _suffixes_in_lua()
    assert {"pr", "q:", "own", "hb", "L", "D", "s", "ipl:", "in:"} <= suffixes
    for suffix in suffixes | {"r", "own", "epoch", "rb:", "sp:", "bf", "ipn", "dc"}:
        if suffix.endswith(":"):  # per-host, per-IP or per-domain: "q:<host>"
            assert suffix + "<" in legend, suffix
        else:
            assert re.search(rf"(^\s+|``){suffix}(\s|<|``)", legend, re.M), suffix


@pytest.mark.parametrize(("key", "name"), [
    ("example.com", "example.com"), ("example.com:8080", "example.com"),
    ("[::1]", "[::1]"), ("[::1]:8443", "[::1]"), ("10.0.0.1:80", "10.0.0.1"),
])
def test_host_name_of_a_politeness_key(key: str, name: str) -> None:
    assert host_name(key) == name


@pytest.mark.parametrize("url", [
    "http://Example.COM/a", "http://example.com:8080/a?b", "https://user@example.com:8443/",
    "http://[::1]:8080/x", "http://[2001:db8::1]/", "http://10.0.0.1:81/",
])
def test_host_name_round_trips_the_urls_host(url: str) -> None:
    """Politeness key -> host name (what urllib parses as the host) and port -> the key."""
    key = host_of(canonicalize(url))
    name = host_name(key)
    assert name.strip("[]") == urlsplit(canonicalize(url)).hostname
    port = key[len(name) + 1:]
    assert key == (f"{name}:{port}" if port else name)
    assert port == "" or port.isdigit()
