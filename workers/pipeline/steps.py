"""A leased URL in three steps: what to fetch (:func:`plan_lease`), the fetch, and what the
answer teaches about the host (robots.txt, the soft-404 probe).

Why steps: the fetch is the only part that waits on the network. Split from the CPU work
around it, a worker can run the fetches of thousands of URLs on one event loop
(``workers.runtime.engine``) and the planning and parsing on a few threads, or run all three
in a row on one thread (:func:`workers.pipeline.lease.run_lease`). Both give the same result.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from frontier.counters import ROBOTS_POLICIES, Outcome
from frontier.dropped import dropped_reason
from frontier.frontier import Completion, Lease
from frontier.hostcache import HostCacheWrite
from frontier.politeness import host_delay
from frontier.useragent import ROBOTS_TOKEN
from workers.dns.policy import SETTINGS_HINT
from workers.fetch import FetchResult
from workers.pipeline.result import LeaseResult, lease_record
from workers.pipeline.revisit import conditional_headers, prior_for
from workers.pipeline.revisit_state import PriorVisit
from workers.pipeline.robots import RobotsPolicy, ttl_for
from workers.pipeline.services import PipelineServices
from workers.pipeline.sitemaps import admit_robots_sitemaps, fetch_as_sitemap
from workers.pipeline.soft404 import Soft404Probe, probe_of, probe_url

log = logging.getLogger(__name__)


class FetchKind(enum.Enum):
    """Which fetch a leased URL needs next."""

    #: the host's robots.txt is not known: fetch it (the URL goes back to its queue's head)
    ROBOTS = "robots"
    #: the host's answer to a missing page is not known: probe it (the URL goes back too)
    PROBE = "probe"
    #: the URL itself
    PAGE = "page"


@dataclass(slots=True)
class FetchStep:
    """The fetch a leased URL needs, and what planning it learned for the step after."""

    kind: FetchKind
    url: str
    ip: str | None
    #: robots.txt redirects wait this long between hops (the host's delay)
    hop_delay_s: float = 0.0
    policy: RobotsPolicy | None = None
    #: the host's soft-404 probe, for a page
    probe: Soft404Probe | None = None
    #: host verdicts learned while planning (a probe robots.txt forbids)
    host_writes: list[HostCacheWrite] = field(default_factory=list)
    #: continuous crawling: a revisit's last visit (workers/pipeline/revisit.py), and the
    #: conditional GET's headers made from it
    prior: PriorVisit | None = None
    headers: dict[str, str] | None = None
    #: read the body whatever its media type: a sitemap (workers/pipeline/sitemaps.py)
    any_type: bool = False


class BlockingFetcher(Protocol):
    def fetch(self, url: str, ip: str | None = ..., extra_headers: Any = ...,
              any_type: bool = ...) -> FetchResult: ...
    def fetch_robots(self, url: str, ip: str | None = ...,
                     hop_delay_s: float = ...) -> FetchResult: ...


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of an absolute URL."""
    start = url.find("://") + 3
    end = url.find("/", start)
    return url if end < 0 else url[:end]


def robots_url(url: str) -> str:
    return _origin(url) + "/robots.txt"


def plan_lease(ctx: PipelineServices, lease: Lease, ip: str | None
               ) -> LeaseResult | FetchStep:
    """The fetch ``lease`` needs, or its result when it needs none (robots.txt forbids it).
    May read the host's verdicts from Redis (one round trip when not cached here)."""
    url, host, cfg = lease.entry.url, lease.host, ctx.config
    domain = ctx.dropped.covering(host)
    if domain is not None:
        return dropped_lease(lease, ip, domain)
    state = ctx.hosts.get(host, with_soft404=cfg.soft404_probe)
    policy = state.robots
    if policy is None:
        return FetchStep(FetchKind.ROBOTS, robots_url(url), ip,
                         hop_delay_s=min(cfg.host_delay_s, cfg.max_delay_s))
    if not policy.allowed(url, ROBOTS_TOKEN):
        now = time.time()
        result = LeaseResult(Completion(lease, now, Outcome.ROBOTS_BLOCKED))
        # "unavailable" alone hides why (a TLS failure, a refused address): say it; a parsed
        # file's rules are the reason itself.
        why = "disallowed by robots.txt" if policy.kind == "parsed" else policy.kind
        reason = f"{why}: {policy.reason}" if policy.reason else why
        result.record = lease_record(lease, Outcome.ROBOTS_BLOCKED, now, ip, reason=reason)
        return result
    probe = state.soft404
    writes: list[HostCacheWrite] = []
    if cfg.soft404_probe and probe is None:
        target = probe_url(_origin(url))
        if policy.allowed(target, ROBOTS_TOKEN):
            return FetchStep(FetchKind.PROBE, target, ip, policy=policy)
        # robots.txt keeps us out of the probe path: no probe, pages judged as they come.
        probe = Soft404Probe(host, 0)
        writes.append(ctx.hosts.soft404.stage(host, probe, cfg.robots_ttl_s))
    prior = prior_for(ctx, lease) if cfg.continuous else None
    return FetchStep(FetchKind.PAGE, url, ip, policy=policy, probe=probe, host_writes=writes,
                     prior=prior, headers=conditional_headers(prior),
                     any_type=fetch_as_sitemap(url, policy))


def dropped_lease(lease: Lease, ip: str | None, domain: str) -> LeaseResult:
    """An operator dropped the host's domain (``trawl drop``): the URL ends without a request,
    and the host is free at once (the completer then empties its queue,
    workers/runtime/completion.py)."""
    now = time.time()
    result = LeaseResult(Completion(lease, now, Outcome.DROPPED))
    result.record = lease_record(lease, Outcome.DROPPED, now, ip,
                                 reason=dropped_reason(domain))
    return result


def fetch_step(fetcher: BlockingFetcher, step: FetchStep) -> FetchResult:
    """The step's fetch on a blocking fetcher (the engine awaits the same on its loop)."""
    if step.kind is FetchKind.ROBOTS:
        return fetcher.fetch_robots(step.url, ip=step.ip, hop_delay_s=step.hop_delay_s)
    return fetcher.fetch(step.url, ip=step.ip, extra_headers=step.headers,
                         any_type=step.any_type)


async def fetch_step_async(fetcher: Any, step: FetchStep, control: Any = None) -> FetchResult:
    """:func:`fetch_step` on an ``AsyncFetcher``; ``control`` can end it."""
    if step.kind is FetchKind.ROBOTS:
        return await fetcher.fetch_robots(step.url, ip=step.ip, hop_delay_s=step.hop_delay_s,
                                          control=control)
    return await fetcher.fetch(step.url, ip=step.ip, extra_headers=step.headers,
                               control=control, any_type=step.any_type)


def robots_fetched(ctx: PipelineServices, lease: Lease, step: FetchStep,
                   res: FetchResult) -> LeaseResult:
    """robots.txt is an ordinary polite fetch: the URL goes back to the head of its queue."""
    cfg = ctx.config
    if res.error == "forbidden_ip":  # the address policy, not robots.txt: nothing cached
        return address_refused(lease, res, step.ip, time.time())
    policy = RobotsPolicy.from_fetch(res)
    write = ctx.hosts.robots.stage(lease.host, policy,
                                   ttl_for(policy, cfg.robots_ttl_s, cfg.robots_error_ttl_s))
    if ctx.warc and res.status is not None:
        ctx.warc.write(res)
    end = time.time()
    delay = host_delay(cfg, policy.crawl_delay(ROBOTS_TOKEN), res.elapsed_s)
    result = LeaseResult(Completion(lease, end + delay, Outcome.ROBOTS_FETCH, requeue=lease.entry,
                                    at_head=True), host_writes=[write])
    result.counters[ROBOTS_POLICIES.name(policy.kind)] += 1
    if policy.text:  # its Sitemap: lines are seeds (workers/pipeline/sitemaps.py)
        admit_robots_sitemaps(ctx, result, policy.text)
    if policy.reason and policy.kind in ("unparseable", "unavailable"):
        log.info("robots.txt of %s: %s (%s)", lease.host, policy.kind, policy.reason)
    return result


def probe_fetched(ctx: PipelineServices, lease: Lease, step: FetchStep,
                  res: FetchResult) -> LeaseResult:
    """Once per host, like robots.txt: a polite fetch of a path no site has, to learn how the
    host answers a missing page; the leased URL goes back to the head of its queue."""
    cfg = ctx.config
    probe = probe_of(res)
    write = ctx.hosts.soft404.stage(lease.host, probe, cfg.robots_ttl_s
                                    if probe.status is not None else cfg.robots_error_ttl_s)
    assert step.policy is not None
    delay = host_delay(cfg, step.policy.crawl_delay(ROBOTS_TOKEN), res.elapsed_s)
    result = LeaseResult(Completion(lease, time.time() + delay, Outcome.SOFT404_PROBE,
                                    requeue=lease.entry, at_head=True), host_writes=[write])
    result.counters["soft404_hosts" if probe.soft404_host else "soft404_clean_hosts"] += 1
    if probe.soft404_host:
        log.info("%s answers a missing path with 200 (soft 404): its pages are compared "
                 "with that answer", lease.host)
    return result


def address_refused(lease: Lease, res: FetchResult, ip: str | None,
                    end: float) -> LeaseResult:
    """The host resolved only to addresses the address policy refuses: the URL ends here, with
    its own outcome and the setting that would allow it (nothing was sent)."""
    result = LeaseResult(Completion(lease, end, Outcome.ADDRESS_REFUSED))
    reason = f"{res.error_detail or 'refused address'} ({SETTINGS_HINT})"
    result.record = lease_record(lease, Outcome.ADDRESS_REFUSED, res.started_at,
                                 ip or res.ip, reason=reason)
    return result
