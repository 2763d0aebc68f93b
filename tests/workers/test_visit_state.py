"""The per-URL visit state of continuous crawling (workers/pipeline/revisit_state.py) and the
conditional headers a revisit sends from it (workers/pipeline/revisit.py)."""

from __future__ import annotations

import struct

import pytest

from freshness.history import RecordError, VisitHistory
from workers.pipeline.revisit import conditional_headers
from workers.pipeline.revisit_state import PriorVisit, VisitState

SKETCH = bytes(range(32))
LM_S = 1_796_000_000


@pytest.mark.parametrize("strong", [False, True])
def test_state_round_trip(strong: bool) -> None:
    state = VisitState('"abc-1"', 1_796_000_123, SKETCH, strong)
    assert VisitState.unpack(state.pack()) == state


def test_a_version_1_state_reads_as_a_weak_last_modified() -> None:
    """States written before the strength bit (version 1) stay readable, as 'not strong':
    an upgraded crawl then stops sending their Last-Modified rather than trusting it."""
    old = struct.pack("<BI", 1, 1_796_000_123) + bytes([len(SKETCH)]) + SKETCH + b'"e"'
    state = VisitState.unpack(old)
    assert state == VisitState('"e"', 1_796_000_123, SKETCH, False)
    with pytest.raises(RecordError):
        VisitState.unpack(bytes([9]) + old[1:])
    with pytest.raises(ValueError):
        VisitState(sketch=bytes(128)).pack()


def test_if_modified_since_is_sent_only_for_a_strong_last_modified() -> None:
    history = VisitHistory(last_visit_s=LM_S + 60, last_modified_s=LM_S)
    strong = conditional_headers(PriorVisit(history, VisitState('"e"', 0, SKETCH, True)))
    weak = conditional_headers(PriorVisit(history, VisitState('"e"', 0, SKETCH, False)))
    assert strong == {"If-None-Match": '"e"',
                      "If-Modified-Since": "Mon, 30 Nov 2026 00:53:20 GMT"}
    assert weak == {"If-None-Match": '"e"'}
    assert conditional_headers(PriorVisit(history, VisitState("", 0, SKETCH, False))) is None
