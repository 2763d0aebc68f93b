"""The task message decoder under hypothesis: any JSON value (big ints, NaN, Infinity,
nesting) as an order, as a batch, and any bytes as a task body give an order that round-trips
or a clear rejection, never an exception in the worker (properties in
tests/fuzz/properties.py)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from frontier.records import Entry, Lease
from tests.fuzz import inputs
from tests.fuzz.properties import check_batch, check_body, check_order
from tests.fuzz.strategies import FUZZ, JSON, RNG
from workers.fetch.order import FetchOrder

LEASES = st.builds(
    Lease, partition=st.integers(0, 2**31), lease_id=st.text(min_size=1, max_size=20),
    host=st.text(min_size=1, max_size=30),
    # what a lease holds: an http(s) URL (the decoder refuses anything else)
    entry=st.builds(Entry, url=st.builds(str.__add__, st.sampled_from(("http://", "https://")),
                                         st.text(max_size=50)), depth=st.integers(0, 1000),
                    attempts=st.integers(0, 50), hops=st.integers(0, 20)),
    score=st.floats(allow_nan=False, allow_infinity=False))
ORDERS = st.builds(FetchOrder, lease=LEASES,
                   ip=st.one_of(st.none(), st.sampled_from(("203.0.113.9", "::1"))))


@settings(FUZZ, max_examples=150)
@given(ORDERS)
def test_every_order_the_scheduler_sends_decodes_to_itself(order: FetchOrder) -> None:
    assert check_order(json.loads(json.dumps(order.to_json()))) == "accepted"


@settings(FUZZ, max_examples=300)
@given(st.one_of(JSON, RNG.map(inputs.random_order)))
def test_any_json_order(msg: Any) -> None:
    check_order(msg)


@settings(FUZZ, max_examples=200)
@given(st.one_of(JSON, st.lists(st.one_of(JSON, RNG.map(inputs.random_order)), max_size=6)))
def test_any_json_batch(batch: Any) -> None:
    check_batch(batch)


@settings(FUZZ, max_examples=200)
@given(st.one_of(st.binary(max_size=200), JSON.map(lambda v: json.dumps(v).encode()),
                 RNG.map(lambda rng: json.dumps([[[inputs.random_order(rng)]], {}, {}])
                         .encode())))
def test_any_bytes_as_a_task_body(raw: bytes) -> None:
    check_body(raw)
