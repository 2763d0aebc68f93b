"""What a worker does with one leased URL: robots → fetch → store → parse → links.

Each step's outcome is data (:class:`LeaseResult`): the lease's completion, the links to admit
and the counters to bump. The caller (``workers.app.tasks``) applies the results of a whole task
in one Redis pipeline. Nothing here raises for bad input or bad servers; every way a URL can
end is an outcome counted in Redis and written to the JSONL records.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dedup.fingerprint import content_fingerprint
from dedup.service import DedupResult, Features
from frontier.counters import DUPLICATES, ERRORS, TRUNCATIONS, Outcome
from frontier.frontier import Completion, Entry, Lease
from frontier.politeness import host_delay, retry_after, retry_backoff
from frontier.useragent import ROBOTS_TOKEN
from workers.fetch import HTML_TYPES, FetchResult
from workers.pipeline.links import add_link, admit_redirect
from workers.pipeline.parse import Link, ParsedPage, parse_html
from workers.pipeline.result import FetchFigures, LeaseResult, PendingDedup, lease_record
from workers.pipeline.revisit import similar_to_last, track_visit, warc_revisit
from workers.pipeline.revisit_state import PriorVisit
from workers.pipeline.robots import RobotsPolicy
from workers.pipeline.services import PipelineServices
from workers.pipeline.sitemaps import is_sitemap, read_sitemap
from workers.pipeline.soft404 import Soft404Probe, is_soft404, signature_of
from workers.pipeline.steps import (
    FetchKind,
    FetchStep,
    address_refused,
    fetch_step,
    plan_lease,
    probe_fetched,
    robots_fetched,
)

__all__ = ["LeaseResult", "PendingDedup", "finish_guarded", "finish_lease", "finish_pending",
           "plan_guarded", "process_leases", "run_lease"]

log = logging.getLogger(__name__)

#: Fetch errors that mean no request left this process (workers/fetch/result.py).
NOTHING_SENT = frozenset({"invalid_url", "forbidden_ip"})


def run_lease(ctx: PipelineServices, lease: Lease, ip: str | None) -> LeaseResult:
    """One lease through robots → fetch → store → parse, on this thread's blocking fetcher.

    The page's near-duplicate check may still be ``pending``: :func:`finish_pending` answers
    the checks of many pages in one round trip. Never raises."""
    return _guarded(ctx, lease, ip, _run, ctx, lease, ip)


def _run(ctx: PipelineServices, lease: Lease, ip: str | None) -> LeaseResult:
    step = plan_lease(ctx, lease, ip)
    if isinstance(step, LeaseResult):
        return step
    return finish_lease(ctx, lease, step, fetch_step(ctx.fetcher, step))


def plan_guarded(ctx: PipelineServices, lease: Lease, ip: str | None
                 ) -> LeaseResult | FetchStep:
    """:func:`plan_lease` for the fetch engine. Never raises."""
    try:
        return plan_lease(ctx, lease, ip)
    except Exception as exc:  # a bug or a library crash must not kill the worker
        return _internal_error(ctx, lease, ip, exc)


def finish_guarded(ctx: PipelineServices, lease: Lease, step: FetchStep,
                   res: FetchResult) -> LeaseResult:
    """:func:`finish_lease` for the fetch engine. Never raises."""
    return _guarded(ctx, lease, step.ip, finish_lease, ctx, lease, step, res)


def finish_lease(ctx: PipelineServices, lease: Lease, step: FetchStep,
                 res: FetchResult) -> LeaseResult:
    """What the fetch of ``step`` means for ``lease``: its host's verdicts, or the page
    stored, parsed and its links taken."""
    if step.kind is FetchKind.ROBOTS:
        if res.error == "dns" and not res.redirects:
            # The host has no address: no robots.txt answered, nothing to cache for it; the
            # URL fails (after its retries) for that reason, not as blocked by robots.txt.
            result = _fail_or_retry(ctx, lease, step.ip, "dns", res.error_detail or "dns",
                                    time.time(), res)
        else:
            result = robots_fetched(ctx, lease, step, res)
    elif step.kind is FetchKind.PROBE:
        result = probe_fetched(ctx, lease, step, res)
    else:
        result = _page_fetched(ctx, lease, step, res)
        result.host_writes.extend(step.host_writes)
    if res.error not in NOTHING_SENT:
        result.fetched = FetchFigures(step.kind.value, len(res.body), res.elapsed_s)
    return result


def process_leases(ctx: PipelineServices,
                   items: Sequence[tuple[Lease, str | None]]) -> list[LeaseResult]:
    """The leases one after another, then their near-duplicate checks. Never raises."""
    results = [run_lease(ctx, lease, ip) for lease, ip in items]
    finish_pending(ctx, items, results)
    return results


def finish_pending(ctx: PipelineServices, items: Sequence[tuple[Lease, str | None]],
                   results: list[LeaseResult]) -> None:
    """Answer the near-duplicate checks still pending in ``results`` (of ``items``) in one
    Redis round trip, completing each page (a page's links wait for its answer). A check
    that fails (Redis went away) makes its page a retry. Never raises."""
    waiting = [(i, r.pending) for i, r in enumerate(results) if r.pending is not None]
    if not waiting:
        return
    try:
        dups = ctx.dedup.check_many([(p.url, p.host, p.features) for _, p in waiting])
    except Exception as exc:  # Redis went away: each page is retried
        log.warning("near-duplicate check of %d pages failed: %s", len(waiting), exc)
        reason = f"internal_error: {type(exc).__name__}: {exc}"[:300]
        for i, _ in waiting:
            lease, ip = items[i]
            fetched = results[i].fetched
            results[i] = _fail_or_retry(ctx, lease, ip, "internal_error", reason, time.time(),
                                        None)
            results[i].fetched = fetched
        return
    for (i, p), dup in zip(waiting, dups, strict=True):
        lease, ip = items[i]
        results[i].pending = None
        results[i] = _guarded(ctx, lease, ip, _finish_pending, results[i], p, dup)


def _finish_pending(result: LeaseResult, pending: PendingDedup, dup: DedupResult
                    ) -> LeaseResult:
    pending.finish(dup)
    return result


def _guarded(ctx: PipelineServices, lease: Lease, ip: str | None,
             step: Callable[..., LeaseResult], *args: Any) -> LeaseResult:
    try:
        return step(*args)
    except Exception as exc:  # a bug or a library crash must not kill the worker
        return _internal_error(ctx, lease, ip, exc)


def _internal_error(ctx: PipelineServices, lease: Lease, ip: str | None,
                    exc: Exception) -> LeaseResult:
    log.error("internal error on %s", lease.entry.url, exc_info=exc)
    reason = f"internal_error: {type(exc).__name__}: {exc}"[:300]
    return _fail_or_retry(ctx, lease, ip, "internal_error", reason, time.time(), None)


def _page_fetched(ctx: PipelineServices, lease: Lease, step: FetchStep,
                  res: FetchResult) -> LeaseResult:
    cfg, ip = ctx.config, step.ip
    end = time.time()
    assert step.policy is not None
    delay = host_delay(cfg, step.policy.crawl_delay(ROBOTS_TOKEN), res.elapsed_s)
    if res.error == "forbidden_ip":
        return address_refused(lease, res, ip, end)
    if (res.status is None or res.status in cfg.retry_http_statuses
            or (res.network_cut and lease.entry.attempts < cfg.max_retries)):
        # A body the network cut short is a failed try, not a page: fetched again after
        # the backoff; on the last try it is recorded as it came (``truncated``).
        kind = res.error or f"http_{res.status}"
        if res.status is not None:  # "come back later": the host waits at least that long
            delay = max(delay, retry_after(res.header("Retry-After"), end) or 0.0)
        if ctx.warc and res.status is not None:
            ctx.warc.write(res)
        return _fail_or_retry(ctx, lease, ip, kind, res.error_detail or kind, end + delay, res)
    return _fetched(ctx, lease, res, end + delay, step.probe,
                    robots=step.policy, prior=step.prior)


def _fail_or_retry(ctx: PipelineServices, lease: Lease, ip: str | None, kind: str, reason: str,
                   next_allowed: float, res: FetchResult | None) -> LeaseResult:
    entry, cfg = lease.entry, ctx.config
    counters: Counter[str] = Counter({ERRORS.name(kind): 1})
    if res is not None:
        _count_cut(counters, res)
    if entry.attempts < cfg.max_retries:
        attempt = entry.attempts + 1
        retry = replace(entry, attempts=attempt)
        wait = max(next_allowed, time.time() + retry_backoff(cfg, attempt))
        log.info("retry %d/%d of %s in %.1fs: %s", attempt, cfg.max_retries, entry.url,
                 wait - time.time(), reason)
        return LeaseResult(Completion(lease, wait, Outcome.RETRY, requeue=retry), counters=counters)
    log.warning("failed after %d attempts: %s: %s", entry.attempts + 1, entry.url, reason)
    result = LeaseResult(Completion(lease, next_allowed, Outcome.FAILED), counters=counters)
    # error: the class of failure (frontier.counters ERRORS), reason: its detail
    result.record = lease_record(lease, Outcome.FAILED, res.started_at if res else time.time(), ip,
                                 error=kind, reason=reason, status=res.status if res else None)
    return result


def _count_cut(counters: Counter[str], res: FetchResult) -> None:
    """Count a page fetch whose body came cut short, by its ``WARC-Truncated`` reason."""
    reason = res.cut_reason
    if reason is not None:
        counters[TRUNCATIONS.name(reason)] += 1


def _fetched(
    ctx: PipelineServices, lease: Lease, res: FetchResult, next_allowed: float,
    probe: Soft404Probe | None = None, robots: RobotsPolicy | None = None,
    prior: PriorVisit | None = None,
) -> LeaseResult:
    """A response that ends the URL: stored, parsed, its links taken, and a whole HTML body
    given to the near-duplicate check (a body cut short, even by our own cap, is not the
    page: matched against whole pages it would be a false near-duplicate, and indexed it
    would make whole copies of it look like near-duplicates of a fragment)."""
    entry, status, cut = lease.entry, res.status or 0, res.cut_reason
    outcome = (Outcome.TRUNCATED if cut not in (None, "length") and 200 <= status < 300
               else Outcome.FETCHED)
    result = LeaseResult(Completion(lease, next_allowed, outcome))
    page = _Page(prior=prior)
    dup: DedupResult | None = None
    _count_cut(result.counters, res)
    if res.error == "content_type_skipped":
        result.counters["skipped_content_type"] += 1
        page.extra["skipped"] = res.error
    elif res.error:
        result.counters[ERRORS.name(res.error)] += 1
        page.extra["error"] = res.error
    if 300 <= status < 400 and res.location:
        page.found = 1
        page.extra["redirect_to"] = admit_redirect(ctx, result, entry, res.location)
    elif 200 <= status < 300 and is_sitemap(res, entry.url, robots):
        page.extra.update(read_sitemap(ctx, result, entry, res))  # not a page: no dedup
    elif 200 <= status < 300 and res.content_type in HTML_TYPES and res.body:
        parsed = parse_html(res.body, entry.url, _content_type(res), res.header("x-robots-tag"),
                            max_links=ctx.config.max_links_per_page)
        if parsed.error:
            result.counters["parse_errors"] += 1
            page.extra["parse_error"] = parsed.error
            log.info("parse problem on %s: %s", entry.url, parsed.error)
        page.parsed = parsed
        page.links = ctx.components.page_links(entry.url, res, parsed, result.counters)
        page.found = len(page.links)
        if parsed.dropped:  # a page of a million links: the rest are not followed
            result.counters["links_over_page_cap"] += parsed.dropped
            page.extra["links_dropped"] = parsed.dropped
        if (probe is not None and probe.soft404_host and parsed.tree is not None
                and is_soft404(probe, signature_of(parsed.tree, entry.url),
                               ctx.config.soft404_threshold)):
            # The host's "not found" page under another name: recorded, not indexed as a
            # document, and its links (the way into the endless space) not followed.
            result.counters["soft404_pages"] += 1
            result.counters["links_soft404_skipped"] += page.found
            page.extra["soft404"] = True
            page.links = None
        elif parsed.tree is not None and cut is None:
            feats = page.features = ctx.dedup.features(parsed.tree)
            if feats is not None and not similar_to_last(ctx, lease, prior, feats):
                result.pending = PendingDedup(
                    entry.url, lease.host, feats,
                    lambda answer: _complete_page(ctx, lease, res, result, page, answer))
                return result
            dup = DedupResult("skipped") if feats is None else None
    _complete_page(ctx, lease, res, result, page, dup)
    return result


@dataclass
class _Page:
    """What ``_fetched`` learned of a page, kept for :func:`_complete_page`."""

    found: int = 0
    links: list[Link] | None = None
    parsed: ParsedPage | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: continuous crawling: the last visit, and this one's dedup features (text sketch)
    prior: PriorVisit | None = None
    features: Features | None = None


def _complete_page(ctx: PipelineServices, lease: Lease, res: FetchResult, result: LeaseResult,
                   page: _Page, dup: DedupResult | None) -> None:
    """The page's links to admit (unless it duplicates a page already crawled) and record."""
    cfg, entry, extra = ctx.config, lease.entry, page.extra
    if cfg.continuous:
        extra.update(track_visit(ctx, lease, res, result, page.features, page.prior))
    if dup is not None and dup.kind in ("exact", "near"):
        result.counters[DUPLICATES.name(dup.kind)] += 1
    depth = entry.depth + 1
    if page.links is None:
        pass
    elif dup is not None and dup.skip_links:
        result.counters["links_dup_skipped"] += page.found
    elif not cfg.max_depth or ctx.scope.depth_allowed(depth):
        template = Entry("", depth)  # one for the page: building one per link cost ~1% CPU
        for link in page.links:
            if link.nofollow:
                result.counters["links_nofollow"] += 1
                continue
            add_link(ctx, result, link.url, template)
    else:
        result.counters["links_too_deep"] += page.found
    if cfg.ordering == "opic" and result.links:
        # OPIC: the page's cash is shared equally among its out-links (a redirect passes it
        # all on); what lands on URLs already fetched is not kept.
        share = lease.priority / len(result.links)
        result.links = [link._replace(priority=share) for link in result.links]
    # A cut body has no content digest: it would stand for a page we never saw whole.
    cut = res.cut_reason
    outcome = result.completion.outcome
    record = lease_record(
        lease, outcome, res.started_at, res.ip, status=res.status, bytes=len(res.body),
        digest=content_fingerprint(res.body) if res.body and cut is None else None,
        links_found=page.found, links_admitted=len(result.links) + len(result.known),
        elapsed_s=round(res.elapsed_s, 4), content_type=res.content_type, truncated=cut,
        reason=res.error_detail if outcome is Outcome.TRUNCATED else None, **extra,
    )
    # The crawl's pipelines (docs/components.md): dedup's fields, WARC, JSONL, plug-ins.
    revisit = warc_revisit(ctx, lease, res, page.prior) if cfg.continuous else None
    result.record = ctx.components.finish_page(record, res, page.parsed, dup, result.counters,
                                               revisit)


def _content_type(res: FetchResult) -> str | None:
    """The whole Content-Type header, so its charset reaches the decoder (``res.content_type``
    is the bare media type the fetcher matched against the allow list)."""
    return res.header("content-type") or res.content_type
