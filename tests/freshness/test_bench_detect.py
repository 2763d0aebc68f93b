"""The freshness bench's change detection on the changing web's own pages (rendered offline by
the server's code): a cosmetic change (only the "Updated … views" line) is unchanged by the
main-text MinHash, a content change is changed, a 304 and identical bytes are unchanged; with
the text test turned off (threshold above 1: only the bytes decide) the cosmetic change counts
as a change."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from bench.freshness_detect import Outcome, detect
from freshness.validators import strong_last_modified
from sandbox import SandboxConfig, SandboxSite
from sandbox.change_model import ChangeModel
from sandbox.changing import ChangingReplies

WEB = SandboxConfig(seed=5, hosts=12, pages_per_host=30, ips=3, changes=True, change_share=0.8,
                    cosmetic_share=0.5)


def _versions(cosmetic: bool, count: int = 6) -> list[tuple[bytes, bytes]]:
    """(body before, body after) the first change of ``count`` changing pages of a kind."""
    site = SandboxSite(WEB, 80)
    model = ChangeModel(WEB, 0.0, site.layout)
    served = ChangingReplies(site.replies, model)
    out = []
    for url in model.changing_urls(site.page_urls()):
        if model.page(url).cosmetic is not cosmetic:
            continue
        host, path = urlsplit(url).hostname or "", urlsplit(url).path
        t1 = model.next_change(url, 0.0)
        t2 = model.next_change(url, t1 or 0.0)
        assert t1 is not None and t2 is not None
        base = site.respond(host, path)
        out.append((served.serve(host, path, base, t1)[0].body,
                    served.serve(host, path, base, t2)[0].body))
        if len(out) == count:
            return out
    raise AssertionError("the seed no longer gives enough pages of the kind")


@pytest.mark.parametrize("cosmetic", [True, False])
def test_cosmetic_changes_are_similar_content_changes_changed(cosmetic: bool) -> None:
    for before, after in _versions(cosmetic):
        assert before != after
        _, held, _ = detect(None, 200, before, '"e1"', None)
        outcome, _, similarity = detect(held, 200, after, '"e2"', None)
        assert similarity is not None
        if cosmetic:
            assert outcome is Outcome.SIMILAR and similarity >= 0.9
            # negative control: with the text test off (only the bytes decide), it is a change
            assert detect(held, 200, after, '"e2"', None, threshold=1.01)[0] is Outcome.CHANGED
        else:
            assert outcome is Outcome.CHANGED and similarity < 0.5


def test_304_and_identical_bytes_are_unchanged_and_keep_the_validators() -> None:
    body = _versions(False, 1)[0][0]
    outcome, held, _ = detect(None, 200, body, '"v1"', "Sun, 06 Dec 2026 08:00:00 GMT")
    assert outcome is Outcome.FIRST and not outcome.changed
    outcome, kept, _ = detect(held, 304, b"", None, None)
    assert outcome is Outcome.NOT_MODIFIED and kept.etag == '"v1"'
    assert kept.last_modified == "Sun, 06 Dec 2026 08:00:00 GMT"
    assert detect(held, 200, body, '"v1"', None)[0] is Outcome.SAME_BYTES


def test_if_modified_since_only_with_a_date_a_second_after_last_modified() -> None:
    """RFC 9110 8.8.2.2: a copy fetched within the second of its Last-Modified could be
    followed by a version dated the same second, which If-Modified-Since would call
    unmodified; the driver sends it only when the response's Date is a second later."""
    lm = "Sun, 06 Dec 2026 08:00:00 GMT"
    assert not strong_last_modified(lm, "Sun, 06 Dec 2026 08:00:00 GMT")
    assert strong_last_modified(lm, "Sun, 06 Dec 2026 08:00:01 GMT")
    assert not strong_last_modified(lm, None) and not strong_last_modified(None, lm)
    assert not strong_last_modified("garbage", "Sun, 06 Dec 2026 08:00:01 GMT")
