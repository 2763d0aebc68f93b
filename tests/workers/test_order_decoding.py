"""The ``trawl.fetch`` message decoder's rejections (workers/fetch/order.py): found by the
fuzzing in tests/fuzz/test_fuzz_messages.py, each of these raised something other than
BadMessage (which the task does not catch) or decoded to a lease nothing can complete."""

from __future__ import annotations

from typing import Any

import pytest

from frontier.records import Entry, Lease
from workers.fetch.order import BadMessage, FetchOrder, decode_batch


@pytest.mark.parametrize("msg", [
    ["u", 0, "L1", "h", "0 http://h/", None, 10**400],  # OverflowError: float(10**400)
    ["u", float("inf"), "L1", "h", "0 http://h/"],      # OverflowError: int(inf)
    ["u", 0, "L1", "h", "0 http://h/", None, float("nan")],  # NaN score: no ZADD takes it
    ["u", -1, "L1", "h", "0 http://h/"],                # no partition -1
    ["u", 0, "L1", "h", "-3 http://h/"],                # no depth -3
    ["u", 0, "L1", "h", "0 "],                          # empty URL
    ["u", 0, "L1", "h", "0 ftp://h/"],                  # not a URL the crawl fetches
    ["u", 0, "L1", "", "0 http://h/"],                  # no host
    ["u", 0, "", "h", "0 http://h/"],                   # no lease id
])
def test_overflowing_and_out_of_range_orders_are_rejected(msg: list[Any]) -> None:
    with pytest.raises(BadMessage):
        FetchOrder.from_json(msg)


@pytest.mark.parametrize("batch", [5, None, "[]", {"a": 1}, 1.5])
def test_a_batch_that_is_not_a_list_is_one_rejection(batch: Any) -> None:
    orders, bad = decode_batch(batch)
    assert orders == [] and len(bad) == 1 and "not a batch" in str(bad[0])


def test_a_batch_keeps_its_good_orders_and_rejects_each_bad_one() -> None:
    good = FetchOrder(Lease(3, "L9", "h.example", Entry("http://h.example/", 1)), "192.0.2.1")
    orders, bad = decode_batch([["x"], good.to_json(), [1, 2, 3, 4]])
    assert orders == [good] and len(bad) == 2
