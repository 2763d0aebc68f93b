"""A page visit in continuous crawling: what the revisit sends (conditional GET), whether the
page changed (:class:`ChangeDecision`), and what the WARC keeps of it (a ``revisit`` record
when nothing changed). The schedule and the history writes are the completer's
(workers/runtime/visits.py).

Called from workers/pipeline/lease.py and steps.py only when ``continuous`` is on: with it off
(the default) no page pays for any of this.

Change detection, in order: a 304 is unchanged (the server says so); the same body bytes
(xxh64 of the body, the history's ``digest``) are unchanged; otherwise, when both versions
have a text sketch (workers/pipeline/revisit_state.py, from the MinHash signature dedup/
computes anyway), an estimated Jaccard similarity of at least
``revisit_similarity_threshold`` is unchanged (a date, a counter, an ad slot changed);
otherwise the page changed. Both decisions go in the visit's JSONL record (``change``).
"""

from __future__ import annotations

import email.utils
import enum
import logging
from dataclasses import dataclass, replace
from typing import Any

import xxhash

from dedup.service import Features
from freshness.validators import http_date_s, strong_at
from frontier.counters import Outcome
from frontier.frontier import Lease
from workers.fetch import FetchResult
from workers.pipeline.result import LeaseResult
from workers.pipeline.revisit_state import (
    PriorVisit,
    VisitState,
    sketch_of,
    sketch_similarity,
)
from workers.pipeline.services import PipelineServices
from workers.storage.warc_revisit import RevisitProfile, WarcRevisit

log = logging.getLogger(__name__)

#: Longest ETag kept for a conditional GET (real ones are a hash, 20-70 characters); a longer
#: one is not stored, and the page is revisited by If-Modified-Since or a whole GET.
MAX_ETAG_CHARS = 256


class Basis(enum.StrEnum):
    """What a change decision rests on."""

    #: the first visit: a baseline, nothing to compare
    FIRST = "first"
    #: the server answered 304 Not Modified to the conditional GET
    NOT_MODIFIED = "not_modified"
    #: the body's bytes are those of the last visit
    SAME_DIGEST = "digest"
    #: the bytes changed, the text sketch did not (similarity >= threshold)
    SIMILAR = "similar"
    #: the bytes changed and the text is not similar (or there is no sketch to compare)
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class ChangeDecision:
    """Whether a visit found the page changed, and why: the exact test (digest) and the
    similarity test, both recorded."""

    changed: bool
    basis: Basis
    #: the body's digest equals the last visit's (None: no body, or no last visit)
    digest_same: bool | None = None
    #: estimated Jaccard similarity of the main text to the last visit's (None: not tested)
    similarity: float | None = None

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"changed": self.changed, "by": self.basis.value}
        if self.digest_same is not None:
            out["digest_same"] = self.digest_same
        if self.similarity is not None:
            out["similarity"] = round(self.similarity, 4)
        return out


@dataclass(frozen=True, slots=True)
class Visit:
    """One visit of a tracked URL, for the completer: the decision and what to store."""

    decision: ChangeDecision
    fetched_s: int
    #: xxh64 of the body (None: a 304, the last digest stands)
    digest: int | None
    last_modified_s: int | None
    state: VisitState
    prior: PriorVisit | None
    revisit: bool


def prior_for(ctx: PipelineServices, lease: Lease) -> PriorVisit | None:
    """The last visit's history and state of a revisit (one round trip), else None."""
    if not lease.entry.revisit or ctx.visits is None:
        return None
    return ctx.visits.read(lease.partition, lease.entry.url)


def conditional_headers(prior: PriorVisit | None) -> dict[str, str] | None:
    """If-None-Match (the last ETag) and If-Modified-Since (the last Last-Modified, when it
    was a strong validator: freshness/validators.py)."""
    if prior is None:
        return None
    headers = {}
    if prior.state is not None and prior.state.etag:
        headers["If-None-Match"] = prior.state.etag
    if (prior.history is not None and prior.history.last_modified_s
            and prior.state is not None and prior.state.lm_strong):
        headers["If-Modified-Since"] = email.utils.formatdate(prior.history.last_modified_s,
                                                              usegmt=True)
    return headers or None


def body_digest(body: bytes) -> int:
    return xxhash.xxh64_intdigest(body)


def revisit_profile(lease: Lease, res: FetchResult, prior: PriorVisit | None
                    ) -> RevisitProfile | None:
    """The WARC revisit profile of a fetch that brought nothing new (None: archive it whole):
    server-not-modified for a 304, identical-payload-digest for the same bytes."""
    if not lease.entry.revisit or prior is None or prior.history is None:
        return None
    if res.status == 304:
        return RevisitProfile.SERVER_NOT_MODIFIED
    # a body cut at max_body_bytes is cut the same way each time: the same bytes are the
    # same payload as the earlier (truncated) copy, as the change decision also says
    if (res.status is not None and 200 <= res.status < 300
            and res.cut_reason in (None, "length")
            and prior.history.same_digest(body_digest(res.body))):
        return RevisitProfile.IDENTICAL_PAYLOAD
    return None


def warc_revisit(ctx: PipelineServices, lease: Lease, res: FetchResult,
                 prior: PriorVisit | None) -> WarcRevisit | None:
    """How the WARC stage archives the fetch: a revisit record when nothing changed (the
    mark), else None (the whole response)."""
    profile = revisit_profile(lease, res, prior) if ctx.config.continuous else None
    if profile is None:
        return None
    assert prior is not None
    return WarcRevisit(profile, prior.state.captured_s if prior.state is not None else 0)


def _similarity(feats: Features | None, prior: PriorVisit | None) -> float | None:
    if feats is None or prior is None or prior.state is None or not prior.state.sketch:
        return None
    return sketch_similarity(sketch_of(feats[1]), prior.state.sketch, len(feats[1]))


def similar_to_last(ctx: PipelineServices, lease: Lease, prior: PriorVisit | None,
                    feats: Features | None) -> bool:
    """A revisit whose text is similar to its own last version: not given to the
    near-duplicate check again (it was classified at its first visit; indexed again, each
    date-line change would add a copy of the page to the index)."""
    if not ctx.config.continuous or not lease.entry.revisit:
        return False
    sim = _similarity(feats, prior)
    return sim is not None and sim >= ctx.config.revisit_similarity_threshold


def decide(ctx: PipelineServices, res: FetchResult, prior: PriorVisit | None,
           feats: Features | None, digest: int | None) -> ChangeDecision:
    if prior is None or prior.history is None:
        return ChangeDecision(False, Basis.FIRST)
    if res.status == 304:
        return ChangeDecision(False, Basis.NOT_MODIFIED)
    same = prior.history.same_digest(digest)
    if same:
        return ChangeDecision(False, Basis.SAME_DIGEST, True)
    sim = _similarity(feats, prior)
    if sim is not None and sim >= ctx.config.revisit_similarity_threshold:
        return ChangeDecision(False, Basis.SIMILAR, False, sim)
    return ChangeDecision(True, Basis.CHANGED, False if digest is not None else None, sim)


def track_visit(ctx: PipelineServices, lease: Lease, res: FetchResult, result: LeaseResult,
                feats: Features | None, prior: PriorVisit | None) -> dict[str, Any]:
    """Continuous crawling: judge the visit, attach it to ``result`` for the completer, and
    return its JSONL fields. A revisit's lease ends as ``revisits`` (not a final outcome).
    Only whole 2xx pages (and a revisit's 304) are tracked; a revisit that finds anything
    else is dropped from the schedule by the completer."""
    revisit = lease.entry.revisit
    if revisit:
        result.completion = replace(result.completion, outcome=Outcome.REVISITED)
    status = res.status or 0
    tracked = ((200 <= status < 300 and res.cut_reason in (None, "length"))
               or (status == 304 and revisit and prior is not None))
    if not tracked:
        return {"revisit": True} if revisit else {}
    digest = body_digest(res.body) if status != 304 else None
    decision = decide(ctx, res, prior, feats, digest)
    last = prior.state if prior is not None and prior.state is not None else VisitState()
    etag = res.header("etag") or (last.etag if status == 304 else "")
    if len(etag) > MAX_ETAG_CHARS:  # a server's 8 KB "ETag" is not kept per URL in Redis
        etag = ""
    fetched = int(res.started_at)
    full_copy = ctx.warc is not None and revisit_profile(lease, res, prior) is None
    sketch = sketch_of(feats[1]) if feats is not None else last.sketch
    # a malformed date is no date: the history then ignores it
    lm_s = http_date_s(res.header("last-modified"))
    lm = int(lm_s) if lm_s is not None else None
    lm_strong = (last.lm_strong if status == 304 and lm is None else
                 strong_at(lm_s, http_date_s(res.header("date"))))
    state = VisitState(etag, fetched if full_copy else last.captured_s, sketch, lm_strong)
    if lm is None and status == 304 and prior is not None and prior.history is not None:
        lm = prior.history.last_modified_s or None
    result.visit = Visit(decision, fetched, digest, lm, state, prior, revisit)
    fields: dict[str, Any] = {"change": decision.record()}
    if revisit:
        fields["revisit"] = True
        sent = conditional_headers(prior)
        if sent:
            fields["conditional"] = sorted(sent)
    return fields
