"""Writing a batch of finished leases back to Redis: records, links, completions, hints.

Called by the fetch engine's completer (workers/engine.py) for every batch of URLs whose
fetch and parse ended, so the batching of Redis round trips is per batch of pages while
each URL still completes as soon as its own page is done.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, defaultdict
from typing import Any

from frontier.frontier import AdmitLink, AdmitResult, Entry, Lease, ip_token
from frontier.psl import registered_domain
from workers.pipeline import LeaseResult

log = logging.getLogger(__name__)


def apply_results(ctx: Any, results: list[tuple[LeaseResult, str | None]],
                  stale: list[tuple[Lease, str | None]]) -> None:
    """Records first, then links, completions, IP releases and counters in one pipeline;
    then the scheduler's due hints (and budget counts) in a second one.

    Links are admitted before the lease completes, so the crawl never looks finished while a
    page's links are still on their way into the frontier.
    """
    frontier = ctx.frontier
    links: dict[str, AdmitLink] = {}
    counters: Counter[str] = Counter()
    for res, _ip in results:
        if res.record is not None:
            ctx.records.write(res.record)
        for link in res.links:
            # Two pages of the batch linking to one URL: two in-links, both cash shares.
            before = links.get(link.url)
            links[link.url] = (link if before is None
                               else before._replace(priority=before.priority + link.priority))
        counters.update(res.counters)
    if stale:
        counters["stale_messages"] += len(stale)
    if ctx.config.max_pages and links:
        total = int(ctx.client.get(frontier.keys.admitted_total) or 0)
        if total >= ctx.config.max_pages:
            counters["links_over_max_pages"] += len(links)
            links = {}
    memo = ctx.seen
    known: list[AdmitLink] = []
    # Links the pipeline already set aside as known to the memo (memo.server was set then),
    # once per URL, as the links above are merged.
    set_aside = list({k[1]: k for res, _ip in results for k in res.known
                      if k[1] not in links}.values())
    if memo is not None and memo.server is not None:
        for url in [u for u in links if u in memo]:
            known.append(links.pop(url))
    if known or set_aside:
        counters["seen_rejected"] += len(known) + len(set_aside)
        counters["seen_memo_hits"] += len(known) + len(set_aside)
    allowance = _domain_allowance(frontier, results) if links and frontier.budgets_on else None
    pipe = frontier.pipeline()
    batch = frontier.queue_admit(pipe, links.values(), allowance=allowance,
                                 domain_of=registered_domain)
    frontier.queue_complete(pipe, [r.completion for r, _ in results])
    ip_next = time.time() + ctx.config.ip_delay_s
    frontier.queue_ip_release(pipe, [
        (ip, ip_token(r.completion.lease), ip_next) for r, ip in results if ip
    ] + [(ip, ip_token(lease), time.time()) for lease, ip in stale if ip])
    frontier.queue_counters(pipe, 0, counters)
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
    if memo is not None:
        pipe.command("INFO", "server")
    replies = pipe.execute()
    admissions = [(batch, replies[:len(batch)])]
    if memo is not None:
        server = str(replies[-1].get("run_id"))
        if set_aside and server != memo.server:
            known += [AdmitLink(h, u, Entry(u, d, 0, hops)) for h, u, d, hops in set_aside]
        if known and server != memo.server:
            # Redis restarted since it answered for the memo's URLs, and may have lost the
            # last of them: those skipped here go through the URL-seen test after all.
            log.warning("Redis run_id changed: %d links skipped as seen admitted again",
                        len(known))
            memo.clear()
            again = frontier.pipeline()
            rebatch = frontier.queue_admit(again, known)
            frontier.queue_counters(again, 0, Counter({"seen_rejected": -len(known),
                                                       "seen_memo_hits": -len(known)}))
            admissions.append((rebatch, again.execute()[:len(rebatch)]))
            links.update((k.url, k) for k in known)
        memo.add(links, server)
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
