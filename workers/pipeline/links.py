"""A page's links and redirects on their way to admission: canonicalized, scope-checked,
set aside when the worker's seen-memo knows them."""

from __future__ import annotations

import logging

from frontier.counters import LINKS_REFUSED
from frontier.frontier import AdmitLink, Entry
from frontier.urls import InvalidURL, canonicalize, host_of
from workers.pipeline.result import LeaseResult
from workers.pipeline.services import PipelineServices

log = logging.getLogger(__name__)


def admit_redirect(ctx: PipelineServices, result: LeaseResult, entry: Entry, location: str) -> str:
    result.counters["redirects_seen"] += 1
    if entry.hops + 1 > ctx.config.max_redirects:
        result.counters["redirects_too_long"] += 1
        return location
    target = add_link(ctx, result, location, Entry("", entry.depth, 0, entry.hops + 1),
                       base=entry.url)
    if target:
        result.counters["redirects"] += 1
    return target or location


def add_link(ctx: PipelineServices, result: LeaseResult, href: str, template: Entry,
              base: str | None = None) -> str | None:
    """Canonicalize and scope-check one link; queue it for admission. Returns the URL."""
    known = ctx.links.get(href) if base is None else None
    if known is None:
        try:
            url = canonicalize(href, base, max_length=ctx.max_url_length, strip=ctx.strip)
        except InvalidURL as exc:
            result.counters["links_invalid"] += 1
            log.debug("bad link %r: %s", href[:200], exc.reason)
            return None
        host = host_of(url)
        reasons = ctx.scope.url_reasons(url, host)
        if base is None:
            ctx.links.put(href, (url, host, reasons))
    else:
        url, host, reasons = known
    reason = ctx.scope.with_depth(reasons, template.depth)
    if not reason and ctx.components.filtering:  # the crawl's url_filters (docs/components.md)
        reason = ctx.components.refusal(url, host, template.depth, result.counters)
    if reason:
        result.counters[LINKS_REFUSED.name(reason)] += 1
        return None
    memo = ctx.seen
    if memo is not None and memo.server is not None and url in memo:
        result.known.append((host, url, template.depth, template.hops))
        return url
    result.links.append(AdmitLink(host, url, Entry(url, template.depth, 0, template.hops)))
    return url
