"""Writing a batch of finished leases back to Redis: records, links, completions, hints.

Called by the fetch engine's completer (workers/runtime/engine.py) for every batch of URLs whose
fetch and parse ended, so the batching of Redis round trips is per batch of pages while
each URL still completes as soon as its own page is done.

The steps, one function each: merge the pages' links and counters (:func:`_merge`), set aside
the links the worker's seen-memo knows (:func:`_set_aside_known`), write records' effects in
one pipeline (:func:`_write`), admit again what the memo skipped if Redis restarted
(:func:`_readmit_if_restarted`), then the scheduler's hints and budget counts
(:func:`_after_admission`).

Counters go to the partition of the lease they describe (a batch's own counters to its first
lease's partition), not all to partition 0: in the pipeline each partition's counters sit
next to its completion script, so on one server the ``hincrby`` calls of a batch still merge
into one EVALSHA (frontier/slotpipe.py), and on a cluster they go to nodes the completions
already visit, instead of adding partition 0's node (one hot key) to every batch's round
trips. Readers sum the partitions (``Frontier.stats()``). Measured with bench/stage_cost.py
(1,500 pages, one server, one run each, partition 0 vs spread): EVALSHA 0.47 vs 0.46 a page;
HINCRBY run inside scripts 12.4 vs 13.4 a page (a counter is now bumped once per partition
with pages in the batch), 11.8 vs 15.8 us a page of Redis time, against 320 us of scripts;
apply_results 0.173 vs 0.185 ms a page, whole loop 4.29 vs 4.26 ms: within noise.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from frontier.counters import Outcome
from frontier.frontier import AdmitBatch, AdmitLink, AdmitResult, Entry, Lease, ip_token
from frontier.psl import registered_domain
from workers.pipeline.lease import LeaseResult
from workers.runtime import metrics
from workers.runtime.drop_sweep import end_dropped_hosts
from workers.runtime.visits import VisitWrites, plan_visits

log = logging.getLogger(__name__)

#: (host, url, depth, hops) of a link the seen-memo answered (``LeaseResult.known``).
KnownLink = tuple[str, str, int, int]


@dataclass
class _Batch:
    """What one call of :func:`apply_results` sends: links to admit and counters per partition."""

    #: the partition for counters of the whole batch (stale messages, memo hits, ...)
    home: int
    links: dict[str, AdmitLink] = field(default_factory=dict)
    counters: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    #: links popped from ``links`` because the memo holds them
    known: list[AdmitLink] = field(default_factory=list)
    #: links the pipeline already set aside as known to the memo
    set_aside: list[KnownLink] = field(default_factory=list)

    def count(self, name: str, amount: int) -> None:
        self.counters[self.home][name] += amount


def apply_results(ctx: Any, results: list[tuple[LeaseResult, str | None]],
                  stale: list[tuple[Lease, str | None]]) -> None:
    """Records first, then links, completions, IP releases and counters in one pipeline;
    then the scheduler's due hints (and budget counts) in a second one.

    Links are admitted before the lease completes, so the crawl never looks finished while a
    page's links are still on their way into the frontier.
    """
    # before plan_visits, which makes a revisit's outcome ``revisits``
    drops = {r.completion.lease.host: r.completion.lease.partition for r, _ in results
             if r.completion.outcome is Outcome.DROPPED}
    visits = plan_visits(ctx, results) if ctx.config.continuous else None
    batch = _merge(ctx, results, stale)
    _set_aside_known(ctx, batch, results)
    admitted, replies, sent, hints = _write(ctx, batch, results, stale, visits)
    admissions = [(admitted, replies[:len(admitted)])]
    if ctx.seen is not None:
        admissions += _readmit_if_restarted(ctx, batch, str(replies[-1].get("run_id")))
    _after_admission(ctx, admissions, hints, sent)
    if drops:  # the rest of those hosts' queues: one script call a partition
        end_dropped_hosts(ctx, drops)


def _merge(ctx: Any, results: list[tuple[LeaseResult, str | None]],
           stale: list[tuple[Lease, str | None]]) -> _Batch:
    """Write the records; merge the pages' links and counters (none past ``max_pages``)."""
    first = results[0][0].completion.lease if results else stale[0][0] if stale else None
    batch = _Batch(first.partition if first is not None else 0)
    links = batch.links
    for res, _ip in results:
        if res.record is not None and ctx.records is not None:  # None: JSONL left out
            ctx.records.write(res.record)
        for link in res.links:
            # Two pages of the batch linking to one URL: two in-links, both cash shares.
            before = links.get(link.url)
            links[link.url] = (link if before is None
                               else before._replace(priority=before.priority + link.priority))
        batch.counters[res.completion.lease.partition].update(res.counters)
    if stale:
        batch.count("stale_messages", len(stale))
    if ctx.config.max_pages and links:
        total = int(ctx.client.get(ctx.frontier.keys.admitted_total) or 0)
        if total >= ctx.config.max_pages:
            batch.count("links_over_max_pages", len(links))
            links.clear()
    return batch


def _set_aside_known(ctx: Any, batch: _Batch, results: list[tuple[LeaseResult, str | None]]
                     ) -> None:
    """Links the memo knows are counted as seen and not sent to the URL-seen test."""
    memo, links = ctx.seen, batch.links
    # Links the pipeline already set aside as known to the memo (memo.server was set then),
    # once per URL, as the links above are merged.
    batch.set_aside = list({k[1]: k for res, _ip in results for k in res.known
                            if k[1] not in links}.values())
    if memo is not None and memo.server is not None:
        for url in [u for u in links if u in memo]:
            batch.known.append(links.pop(url))
    if batch.known or batch.set_aside:
        batch.count("seen_rejected", len(batch.known) + len(batch.set_aside))
        batch.count("seen_memo_hits", len(batch.known) + len(batch.set_aside))


def _write(ctx: Any, batch: _Batch, results: list[tuple[LeaseResult, str | None]],
           stale: list[tuple[Lease, str | None]], visits: VisitWrites | None = None,
           ) -> tuple[AdmitBatch, list[Any], dict[int, float], dict[int, float]]:
    """The first pipeline: admissions, completions, IP releases, counters (and, on one server,
    the completions' due hints; the Redis ``run_id`` if there is a memo). Returns the
    admission batch, the replies, the hints sent and the hints still to send."""
    frontier = ctx.frontier
    allowance = (_domain_allowance(frontier, results)
                 if batch.links and frontier.budgets_on else None)
    pipe = frontier.pipeline()
    admitted = frontier.queue_admit(pipe, batch.links.values(), allowance=allowance,
                                    domain_of=registered_domain)
    # What the pages taught about their hosts goes in before their leases complete, so the
    # worker given a host next finds it.
    frontier.queue_host_cache_writes(pipe, [w for r, _ in results for w in r.host_writes])
    if visits is not None:  # histories first: the schedule entry must find its history
        visits.queue(ctx, pipe)
    frontier.queue_complete(pipe, [r.completion for r, _ in results])
    ip_next = time.time() + ctx.config.ip_delay_s
    frontier.queue_ip_release(pipe, [
        (ip, ip_token(r.completion.lease), ip_next) for r, ip in results if ip
    ] + [(ip, ip_token(lease), time.time()) for lease, ip in stale if ip])
    for partition, counters in batch.counters.items():
        frontier.queue_counters(pipe, partition, counters)
    # Due hints for the partitions' scheduler: each completed host is due again at its next
    # allowed time (if it has URLs left), each host an admission woke at the time it reported.
    # On one server the completions' hints ride in this pipeline, after the completions they
    # follow; only earlier wake-ups of the admissions need a second round trip.
    hints: dict[int, float] = {}
    for res, _ip in results:
        c = res.completion
        hints[c.lease.partition] = min(hints.get(c.lease.partition, c.next_allowed),
                                       c.next_allowed)
    sent: dict[int, float] = {}
    if not pipe.cluster:
        frontier.queue_due_hints(pipe, hints)
        sent, hints = hints, {}
    if ctx.seen is not None:
        pipe.command("INFO", "server")
    return admitted, pipe.execute(), sent, hints


def _readmit_if_restarted(ctx: Any, batch: _Batch, server: str
                          ) -> list[tuple[AdmitBatch, list[Any]]]:
    """If Redis restarted since it answered for the memo's URLs (it may have lost the last of
    them), the links skipped here go through the URL-seen test after all. Then the memo
    learns this batch's links under ``server``."""
    memo, frontier, known = ctx.seen, ctx.frontier, batch.known
    again: list[tuple[AdmitBatch, list[Any]]] = []
    if batch.set_aside and server != memo.server:
        known += [AdmitLink(h, u, Entry(u, d, 0, hops)) for h, u, d, hops in batch.set_aside]
    if known and server != memo.server:
        log.warning("Redis run_id changed: %d links skipped as seen admitted again",
                    len(known))
        memo.clear()
        pipe = frontier.pipeline()
        rebatch = frontier.queue_admit(pipe, known)
        frontier.queue_counters(pipe, batch.home, Counter({"seen_rejected": -len(known),
                                                           "seen_memo_hits": -len(known)}))
        again.append((rebatch, pipe.execute()[:len(rebatch)]))
        batch.links.update((k.url, k) for k in known)
    memo.add(batch.links, server)
    return again


def _after_admission(ctx: Any, admissions: list[tuple[AdmitBatch, list[Any]]],
                     hints: dict[int, float], sent: dict[int, float]) -> None:
    """The second pipeline: due hints of hosts the admissions woke (earlier than any hint
    already sent), the ``max_pages`` total and the domains' budget counts."""
    frontier = ctx.frontier
    totals = AdmitResult()
    for admitted, answers in admissions:
        if admitted:
            part = admitted.totals(answers)
            totals.admitted += part.admitted
            totals.rejected += part.rejected
            for d, n in part.by_domain.items():
                totals.by_domain[d] = totals.by_domain.get(d, 0) + n
            for p, t in admitted.woken(answers).items():
                if t < sent.get(p, math.inf):
                    hints[p] = min(hints.get(p, t), t)
    counted = metrics.active()
    if counted is not None and totals.admitted:
        counted.links_admitted.inc(totals.admitted)
    pipe = frontier.pipeline()
    frontier.queue_due_hints(pipe, hints)
    if ctx.config.max_pages and totals.admitted:
        pipe.command("incrby", frontier.keys.admitted_total, totals.admitted)
    frontier.queue_domain_spent(pipe, totals.by_domain)
    if len(pipe):
        pipe.execute()


def _domain_allowance(frontier: Any, results: list[tuple[LeaseResult, str | None]]
                      ) -> dict[str, int]:
    """Budgets of the registered domains linked from this batch's pages (IRLbot): each
    linking page's domain counts towards the budget of every other domain it links to."""
    linkers: dict[str, set[str]] = defaultdict(set)
    for res, _ip in results:
        if res.links:
            source = registered_domain(res.completion.lease.host)
            for link in res.links:
                linkers[registered_domain(link.host)].add(source)
    return frontier.domain_allowance(linkers)
