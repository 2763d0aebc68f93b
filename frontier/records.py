"""The values that cross the frontier's boundary: queue entries, leases, completions, links.

Workers and the scheduler build and read these; the frontier's parts encode them into the
arguments of its Lua scripts (frontier/admission.py, frontier/leases.py) and decode them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from frontier.counters import Outcome


@dataclass(frozen=True, slots=True)
class Entry:
    """A queued URL with its crawl depth, failed attempts so far and redirect hops."""

    url: str
    depth: int = 0
    attempts: int = 0
    hops: int = 0
    #: A revisit of a page fetched before (continuous crawling, frontier/revisits.py): it
    #: skipped the URL-seen test and goes ahead of new URLs in its host queue.
    revisit: bool = False

    def encode(self) -> str:
        """``"depth url"``, or ``"depth.attempts.hops url"`` once either is non-zero, and
        ``"depth.attempts.hops.r url"`` for a revisit: the form stored in host queues and
        leases (the Lua scripts split it at the first space; lua/promote_revisits.lua writes
        the revisit form)."""
        if self.revisit:
            return f"{self.depth}.{self.attempts}.{self.hops}.r {self.url}"
        if self.attempts == 0 and self.hops == 0:
            return f"{self.depth} {self.url}"
        return f"{self.depth}.{self.attempts}.{self.hops} {self.url}"

    @classmethod
    def decode(cls, text: str) -> Entry:
        head, _, url = text.partition(" ")
        if "." in head:
            depth, attempts, hops, *flag = head.split(".")
            return cls(url, int(depth), int(attempts), int(hops), flag == ["r"])
        return cls(url, int(head))


@dataclass(frozen=True, slots=True)
class Lease:
    """One leased URL: its host may not be leased again until the lease ends."""

    partition: int
    lease_id: str
    host: str
    entry: Entry
    #: The URL's queue score when it was leased (priority orderings: -priority; OPIC: -cash).
    score: float = 0.0

    @property
    def priority(self) -> float:
        return -self.score


def ip_token(lease: Lease) -> str:
    """The per-IP in-flight token of a lease (unique crawl-wide)."""
    return f"{lease.partition}:{lease.lease_id}"


@dataclass(frozen=True, slots=True)
class Completion:
    """How a lease ends. ``outcome`` (frontier.counters.Outcome) is also the counter the
    completion bumps."""

    lease: Lease
    next_allowed: float
    outcome: Outcome
    requeue: Entry | None = None
    at_head: bool = False
    #: Continuous crawling: the URL's next visit time, added to its partition's revisit
    #: schedule by the same script that ends the lease (lua/complete.lua); None: not tracked.
    revisit_at: float | None = None


@dataclass(slots=True)
class AdmitResult:
    admitted: int = 0
    rejected: int = 0
    #: Registered domain -> URLs admitted under its budget (only when budgets were given).
    by_domain: dict[str, int] = field(default_factory=dict)


class AdmitLink(NamedTuple):
    """A link to admit. ``priority`` is what the link adds to its target under the indegree
    (1 per link) and opic (a share of the linking page's cash) orderings; bfs ignores it and
    random draws its own."""

    host: str
    url: str
    entry: Entry
    priority: float = 1.0
