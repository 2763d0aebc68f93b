"""The WARC writer under hypothesis: random fetches (any status, reason, headers, body, URL
tail, IP, truncation), written with rotation and read back by warcio with its digest check
on: the same records, in order, with the same payloads (properties in
tests/fuzz/properties.py)."""

from __future__ import annotations

import gzip
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from tests.fuzz import inputs
from tests.fuzz.properties import check_warc
from tests.fuzz.strategies import ANY_TEXT, FUZZ, RNG
from workers.fetch import FetchResult

HEADERS = st.lists(st.tuples(st.one_of(st.sampled_from(inputs.HEADER_NAMES), ANY_TEXT),
                             st.one_of(st.sampled_from(inputs.HEADER_VALUES), ANY_TEXT)),
                   max_size=8)
FETCHES = st.builds(
    FetchResult,
    url=RNG.map(inputs.fetched_url),
    ip=st.one_of(st.none(), st.sampled_from(("203.0.113.9", "2001:db8::1")), ANY_TEXT),
    status=st.one_of(st.none(), st.integers(min_value=100, max_value=999)),
    reason=ANY_TEXT, headers=HEADERS, body=st.binary(max_size=4000),
    truncated=st.booleans(), request_headers=HEADERS,
    http_version=st.sampled_from(("HTTP/1.1", "HTTP/1.0")),
    started_at=st.floats(min_value=0, max_value=4.1e9),
)


@settings(FUZZ, max_examples=120)
@given(st.lists(FETCHES, min_size=1, max_size=5), st.sampled_from((1, 3000, 10**9)))
def test_written_records_read_back(results: list[FetchResult], max_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_warc(results, Path(tmp), max_bytes)


@settings(FUZZ, max_examples=60)
@given(RNG.map(lambda rng: [inputs.random_fetch(rng) for _ in range(rng.randrange(1, 5))]))
def test_hostile_fetches_read_back(results: list[FetchResult]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_warc(results, Path(tmp), 10**9)


def test_reader_check_is_live(tmp_path: Path) -> None:
    """Negative control: one payload byte changed after writing, and warcio's digest check
    (the one check_warc reads with) refuses the record."""
    result = inputs.random_fetch(random.Random(3))
    result.status, result.body = 200, b"<html>payload</html>"
    check_warc([result], tmp_path / "ok", 10**9)
    (path,) = (tmp_path / "ok").glob("*.warc.gz")
    plain = gzip.decompress(path.read_bytes())
    assert plain.count(b"payload") == 1
    changed = tmp_path / "changed.warc"  # uncompressed: warcio reads both
    changed.write_bytes(plain.replace(b"payload", b"PAYLOAD"))
    with open(changed, "rb") as fh, pytest.raises(ArchiveLoadFailed, match="digest failed"):
        for rec in ArchiveIterator(fh, check_digests="raise"):
            rec.raw_stream.read()
