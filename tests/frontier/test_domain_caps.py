"""Per-registered-domain page cap (max_pages_per_domain) on a real Redis, through the same
budget path the workers use (frontier.psl decides what a registered domain is)."""

from __future__ import annotations

import pytest
import redis

from frontier.frontier import AdmitLink, Entry, Frontier
from frontier.psl import registered_domain
from tests.frontier.test_frontier import bloom_backend, make  # noqa: F401

#: Once per URL-seen backend (tests/frontier/test_frontier.py).
pytestmark = pytest.mark.usefixtures("bloom_backend")


def admit(f: Frontier, hosts: list[str], source: str) -> int:
    links = [AdmitLink(h, f"http://{h}/p", Entry(f"http://{h}/p", 1)) for h in hosts]
    linkers: dict[str, set[str]] = {}
    for h in hosts:
        linkers.setdefault(registered_domain(h), set()).add(registered_domain(source))
    allowance = f.domain_allowance(linkers)
    pipe = f.pipeline()
    batch = f.queue_admit(pipe, links, 0.0, allowance=allowance, domain_of=registered_domain)
    res = batch.totals(pipe.execute())
    pipe = f.pipeline()
    f.queue_domain_spent(pipe, res.by_domain)
    pipe.execute()
    return res.admitted


def test_cap_counts_every_host_of_a_registered_domain(redis_client: redis.Redis) -> None:
    f = make(redis_client, max_pages_per_domain=5)
    blogs = [f"b{i}.example.co.uk" for i in range(8)]
    assert admit(f, blogs, "news.test") == 5  # one registered domain: example.co.uk
    # Under a public suffix each subdomain is its own registered domain (github.io is one).
    pages = [f"u{i}.github.io" for i in range(8)]
    assert admit(f, pages, "news.test") == 8
    assert admit(f, [f"c{i}.example.co.uk" for i in range(3)], "other.test") == 0
    assert f.stats()["over_domain_budget"] == 6
