"""Every counter of a crawl, with what it means and who writes it: the one table that the
frontier's scripts, the workers, the JSONL records, the summary, ``trawl status`` and the
progress bar share.

Counters live per partition in the stats hash ``<prefix>s`` (``Keys.stats``) and are summed
over the partitions by ``Frontier.stats()``. A counter is either one fixed name
(:class:`CounterSpec`) or a family of names built as prefix + member (:class:`CounterFamily`,
e.g. ``err:`` + ``timeout``): code that bumps a family member calls :meth:`CounterFamily.name`,
never builds the string itself. The Lua scripts write their fixed names literally;
tests/frontier/test_counters.py checks that every name written anywhere, in Python or Lua, and every
field of the stats hashes after a real crawl, is registered here.

The ways a lease ends are :class:`Outcome` values, and each is also the counter the completion
script (frontier/lua/complete.lua) bumps and the ``outcome`` field of the URL's JSONL record.
A *final* outcome ends the URL (it gets a JSONL record and counts towards ``accounted``); the
others put the URL back in its queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    FETCHED = "fetched"
    FAILED = "failed"
    ROBOTS_BLOCKED = "robots_blocked"
    #: the host resolved only to addresses the address policy refuses (allow_private_ips):
    #: nothing was sent
    ADDRESS_REFUSED = "address_refused"
    #: its host's domain was dropped from the running crawl by an operator (``trawl drop``,
    #: frontier/dropped.py): nothing sent
    DROPPED = "dropped"
    #: a 2xx page whose body the network cut short (disconnect, time) on its last try, or
    #: cut for another reason than our size cap: recorded with what arrived, never lost
    TRUNCATED = "truncated"
    #: back at the queue's tail, to be fetched again after a backoff
    RETRY = "retries"
    #: the host's robots.txt was fetched instead; the URL is back at the queue's head
    ROBOTS_FETCH = "robots_fetches"
    #: the host's soft-404 probe was fetched instead; back at the head
    SOFT404_PROBE = "soft404_probes"
    #: its IP was busy (per-IP politeness); back at the head
    DEFERRED = "deferred"
    #: the broker refused its task; back at the head
    UNSENT = "unsent"
    #: a revisit (continuous crawling) ended: the URL is back in its revisit schedule, or
    #: dropped from it (gone, now disallowed). Not final: the URL was accounted at its first
    #: visit, so ``accounted`` still equals ``admitted``.
    REVISITED = "revisits"

    @property
    def final(self) -> bool:
        return self in FINAL


#: Outcomes that end a URL: fetched + truncated + failed + robots_blocked + address_refused
#: + dropped = admitted.
FINAL = frozenset({Outcome.FETCHED, Outcome.TRUNCATED, Outcome.FAILED, Outcome.ROBOTS_BLOCKED,
                   Outcome.ADDRESS_REFUSED, Outcome.DROPPED})


class Shown(StrEnum):
    """Where a counter is reported besides the raw totals (``trawl status --json``)."""

    #: summary ``errors``, the error column of ``trawl status``, the progress bar's errors
    ERRORS = "errors"
    #: summary ``links``: what happened to links, pages and leases on the way
    LINKS = "links"
    #: only in the raw totals (and, if listed in :data:`SUMMARY_TOTALS`, a summary line)
    TOTALS = "totals"
    #: the frontier's bookkeeping kept in the stats hash: not a counter, never reported
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class CounterSpec:
    """One counter: its stored name, what it counts, and the code that bumps it."""

    name: str
    meaning: str
    written_by: str
    shown: Shown = Shown.TOTALS


@dataclass(frozen=True, slots=True)
class CounterFamily:
    """Counters named ``prefix + member``, one per member (an error kind, a scope reason)."""

    prefix: str
    meaning: str
    #: what a member is, and where its values come from
    member: str
    written_by: str
    shown: Shown

    def name(self, member: str) -> str:
        """The stored name of ``member``'s counter: the only place such a name is built."""
        return self.prefix + member

    def member_of(self, name: str) -> str | None:
        """The member a stored name counts, or None if the name is not of this family."""
        if not name.startswith(self.prefix):
            return None
        return name[len(self.prefix):] or None

    def members(self, stats: Mapping[str, int]) -> dict[str, int]:
        """``{member: count}`` of the family's counters in ``stats``, sorted by member."""
        return {self.member_of(k) or "": v for k, v in sorted(stats.items())
                if lookup(k) is self}

    def total(self, stats: Mapping[str, int]) -> int:
        return sum(self.members(stats).values())


_LUA, _PIPE = "frontier/lua/", "workers/pipeline/lease.py"
_DONE = _LUA + "complete.lua (the lease's outcome)"
_REVISIT = "workers/runtime/visits.py"

#: The fixed counters. Order: the summary's reading order, then the rest by writer.
FIXED: tuple[CounterSpec, ...] = (
    CounterSpec("fetched", "final: pages fetched, any status not retried", _DONE),
    CounterSpec("truncated", "final: pages whose body came cut short on the last try (JSONL "
                "has the reason; bodies cut by max_body_bytes are fetched)", _DONE),
    CounterSpec("failed", "final: URLs given up after max_retries (JSONL has the reason)", _DONE),
    CounterSpec("admitted", "URLs that passed the URL-seen test into a host queue",
                _LUA + "admit.lua"),
    CounterSpec("seen_rejected", "links refused as already seen (Bloom filter or the "
                "worker's memo)", _LUA + "admit.lua, workers/runtime/completion.py"),
    CounterSpec("robots_blocked", "final: URLs robots.txt disallows", _DONE),
    CounterSpec("address_refused", "final: URLs whose host resolved only to refused addresses "
                "(private, loopback, link-local, ...: allow_private_ips); nothing sent", _DONE),
    CounterSpec("dropped", "final: URLs of a domain an operator dropped from the running "
                "crawl (trawl drop); nothing sent", _DONE + ", " + _LUA + "drop_queued.lua"),
    CounterSpec("redirects", "redirect targets sent for admission", _PIPE),
    CounterSpec("retries", "fetches to be tried again after a backoff", _DONE),
    CounterSpec("robots_fetches", "robots.txt fetched in a URL's place", _DONE),
    CounterSpec("requeued", "expired leases put back by reap (a worker died or stalled)",
                _LUA + "reap.lua"),
    CounterSpec("queued", "URLs in host queues now (a gauge)",
                _LUA + "admit/acquire/complete/reap.lua"),
    CounterSpec("inflight", "leases out now (a gauge)", _LUA + "acquire/complete/reap.lua"),
    CounterSpec("deferred", "leases sent back because their IP was busy", _DONE, Shown.LINKS),
    CounterSpec("stale", "completions of leases that had already expired",
                _LUA + "complete.lua", Shown.LINKS),
    CounterSpec("over_host_cap", "links refused: their host reached max_pages_per_host",
                _LUA + "admit.lua", Shown.LINKS),
    CounterSpec("trap_query_variants", "links refused: too many query variants of one path",
                _LUA + "admit.lua", Shown.LINKS),
    CounterSpec("over_domain_budget", "links refused: their domain's budget is spent",
                _LUA + "admit.lua", Shown.LINKS),
    CounterSpec("reprioritized", "in-links that raised a queued URL's priority",
                _LUA + "admit.lua", Shown.LINKS),
    CounterSpec("soft404_probes", "soft-404 probes fetched in a URL's place", _DONE),
    CounterSpec("unsent", "leases sent back because the broker refused their task", _DONE,
                Shown.LINKS),
    CounterSpec("stale_messages", "task messages whose leases were no longer current",
                "workers/runtime/completion.py", Shown.LINKS),
    CounterSpec("seen_memo_hits", "seen_rejected answered by the worker's memo, no Redis trip",
                "workers/runtime/completion.py"),
    CounterSpec("links_over_max_pages", "links dropped: max_pages already admitted",
                "workers/runtime/completion.py", Shown.LINKS),
    CounterSpec("skipped_content_type", "pages not downloaded: content type not wanted", _PIPE,
                Shown.LINKS),
    CounterSpec("parse_errors", "pages lxml could not parse whole", _PIPE, Shown.LINKS),
    CounterSpec("soft404_pages", "pages found to be the host's soft 404", _PIPE, Shown.LINKS),
    CounterSpec("soft404_hosts", "hosts answering a missing path with 200", _PIPE, Shown.LINKS),
    CounterSpec("soft404_clean_hosts", "hosts answering a missing path properly", _PIPE),
    CounterSpec("sitemaps_from_robots", "Sitemap: lines of robots.txt sent to admission", _PIPE),
    CounterSpec("sitemaps_read", "responses read as sitemaps", _PIPE),
    CounterSpec("sitemap_links", "URLs of sitemaps sent to admission", _PIPE),
    CounterSpec("sitemap_errors", "sitemaps malformed or with a DTD (entries before kept)", _PIPE),
    CounterSpec("sitemap_cut_urls", "sitemaps cut at 50,000 URLs", _PIPE),
    CounterSpec("sitemap_cut_bytes", "sitemaps cut at 50 MB uncompressed", _PIPE),
    CounterSpec("sitemap_cut_nesting", "sitemap indexes too deep: children not followed", _PIPE),
    CounterSpec("sitemap_urls_dropped", "sitemap entries past a cap, counted not admitted", _PIPE),
    CounterSpec("redirects_seen", "redirect responses", _PIPE),
    CounterSpec("redirects_too_long", "redirects not followed: over max_redirects hops", _PIPE),
    CounterSpec("links_nofollow", "links not followed: rel=nofollow", _PIPE, Shown.LINKS),
    CounterSpec("links_invalid", "links that do not canonicalize to a URL", _PIPE, Shown.LINKS),
    CounterSpec("links_over_page_cap", "links dropped: past max_links_per_page on their page",
                _PIPE, Shown.LINKS),
    CounterSpec("links_dup_skipped", "links of duplicate pages, not followed", _PIPE,
                Shown.LINKS),
    CounterSpec("links_soft404_skipped", "links of soft-404 pages, not followed", _PIPE,
                Shown.LINKS),
    CounterSpec("component_errors", "calls of a plug-in component that raised (logged)",
                "workers/components/chain.py", Shown.TOTALS),
    CounterSpec("pages_dropped_by_pipeline", "page records a pipeline component dropped",
                "workers/components/chain.py", Shown.TOTALS),
    CounterSpec("fenced", "completions refused: the partition had moved to another owner",
                "workers/cluster/member.py", Shown.LINKS),
    CounterSpec("revisits", "revisits done (continuous crawling): fetches of a tracked URL "
                "after its first", _DONE),
    CounterSpec("revisits_promoted", "revisits moved from the schedule into host queues",
                _LUA + "promote_revisits.lua"),
    CounterSpec("revisit_unchanged", "revisits that found no change (304, same digest, or "
                "similar text)", _REVISIT),
    CounterSpec("revisit_changed", "revisits that found the page changed", _REVISIT),
    CounterSpec("revisit_not_modified", "revisits answered 304 Not Modified (no body)",
                _REVISIT),
    CounterSpec("revisit_similar", "unchanged revisits whose bytes changed but whose text "
                "stayed similar (a date or counter line)", _REVISIT),
    CounterSpec("revisit_failed", "revisits that failed (tried again at the longest interval)",
                _REVISIT),
    CounterSpec("revisit_dropped", "tracked URLs dropped from the schedule (gone, a redirect, "
                "now disallowed, their domain dropped by trawl drop)",
                _REVISIT + ", " + _LUA + "drop_queued.lua"),
    CounterSpec("seq", "the partition's last lease number", _LUA + "acquire.lua",
                Shown.INTERNAL),
    CounterSpec("bfs_asked", "hosts asked of the partition in bfs mode (one in 32 goes "
                "to the oldest due host)", _LUA + "acquire.lua", Shown.INTERNAL),
    CounterSpec("bloom_layer", "the partition's current Bloom layer", _LUA + "admit.lua",
                Shown.INTERNAL),
    CounterSpec("bloom_fill", "URLs in the current Bloom layer", _LUA + "admit.lua",
                Shown.INTERNAL),
    CounterSpec("orphan_seq", "last lease number of an owner lost without a release: its "
                "leases no worker began are re-queued at once", _LUA + "claim.lua",
                Shown.INTERNAL),
    CounterSpec("released", "1 while the partition's last owner released it cleanly",
                _LUA + "release_partition.lua", Shown.INTERNAL),
)

#: Fetch errors by kind (a retry or a failure each count once).
ERRORS = CounterFamily(
    "err:", "fetch attempts that ended in an error, by kind",
    "an error of workers/fetch (timeout, connect_error, ...), http_<status> of a retryable "
    "status, internal_error, or bad_message (workers/app/tasks.py)", _PIPE, Shown.ERRORS)
#: robots.txt fetches by the policy they gave.
ROBOTS_POLICIES = CounterFamily(
    "robots:", "robots.txt fetched, by the policy it gave",
    "a kind of workers.pipeline.robots.KINDS",
    _PIPE, Shown.LINKS)
#: Response bodies cut short, by why.
TRUNCATIONS = CounterFamily(
    "cut:", "page fetches whose body was cut short (each try), by WARC-Truncated reason",
    "a reason of workers.fetch.TRUNCATIONS (length: max_body_bytes; time, disconnect: retried)",
    _PIPE, Shown.TOTALS)
#: Pages found to duplicate a page crawled before.
DUPLICATES = CounterFamily(
    "dup_", "pages duplicating one crawled before", "exact or near (dedup/service.py)",
    _PIPE, Shown.TOTALS)
#: Links the scope refused, by reason.
LINKS_REFUSED = CounterFamily(
    "links_", "links refused by the crawl's scope, by reason",
    "a reason of frontier.scope.REASONS (too_deep also counts a page's links past max_depth), "
    "or filter_<reason> of a url_filters component (workers/components/chain.py)",
    _PIPE, Shown.LINKS)

FAMILIES: tuple[CounterFamily, ...] = (ERRORS, ROBOTS_POLICIES, DUPLICATES, LINKS_REFUSED,
                                       TRUNCATIONS)

_BY_NAME = {c.name: c for c in FIXED}


def lookup(name: str) -> CounterSpec | CounterFamily | None:
    """The registry entry of a stored name (a fixed name first, then a family), or None."""
    spec = _BY_NAME.get(name)
    if spec is not None:
        return spec
    for family in FAMILIES:
        if family.member_of(name) is not None:
            return family
    return None


def unregistered(names: Iterable[str]) -> list[str]:
    """The names in ``names`` that no registry entry describes."""
    return sorted({n for n in names if lookup(n) is None})


def _registered(*names: str) -> tuple[str, ...]:
    missing = unregistered(names)
    if missing:
        raise ValueError(f"not in frontier/counters.py: {missing}")
    return names


#: Counters reported even while zero (``Frontier.stats()`` starts from these).
COUNTERS = _registered(
    "admitted", "seen_rejected", "queued", "inflight", "fetched", "truncated", "failed",
    "robots_blocked", "address_refused", "dropped", "redirects", "retries", "robots_fetches",
    "deferred", "requeued", "stale", "over_host_cap", "trap_query_variants", "over_domain_budget",
    "reprioritized", "soft404_probes", "unsent",
)

#: The summary's own lines: (summary name, counter).
SUMMARY_TOTALS: tuple[tuple[str, str], ...] = tuple(zip(
    ("pages_fetched", "pages_truncated", "pages_failed", "urls_admitted", "urls_seen_rejected",
     "robots_blocked", "address_refused", "dropped", "redirects", "retries",
     "robots_fetches", "requeued_leases", "queued", "inflight"),
    _registered("fetched", "truncated", "failed", "admitted", "seen_rejected",
                "robots_blocked", "address_refused", "dropped", "redirects", "retries",
                "robots_fetches", "requeued", "queued", "inflight"), strict=True))

#: The columns of ``trawl status`` (then the errors, :func:`errors`).
STATUS_COLUMNS = _registered("queued", "inflight", "admitted", "fetched", "failed",
                             "robots_blocked", "retries")


def accounted(stats: Mapping[str, int]) -> int:
    """URLs that ended: the final outcomes. Equals ``admitted`` once a crawl is done."""
    return sum(stats.get(outcome.value, 0) for outcome in FINAL)


def errors(stats: Mapping[str, int]) -> int:
    """Fetch attempts that ended in an error (the ``err:`` family)."""
    return ERRORS.total(stats)


def shown_in(stats: Mapping[str, int], shown: Shown) -> dict[str, int]:
    """The counters of ``stats`` reported under ``shown``, sorted by name."""
    out = {}
    for name, value in sorted(stats.items()):
        entry = lookup(name)
        if entry is not None and entry.shown is shown:
            out[name] = value
    return out
