"""What the stages of one URL produce (:class:`LeaseResult`) and its JSONL record."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dedup.service import DedupResult, Features
from frontier.counters import Outcome
from frontier.frontier import AdmitLink, Completion, Entry, Lease
from frontier.hostcache import HostCacheWrite


@dataclass(frozen=True, slots=True)
class FetchFigures:
    """What one HTTP fetch cost: which fetch (a ``FetchKind`` value: robots, probe, page), its
    body bytes and its wall time; counted by the worker's metrics at write-back."""

    kind: str
    body_bytes: int
    seconds: float


@dataclass
class LeaseResult:
    """How one leased URL ended: its completion, the links to admit, counters, its record."""

    completion: Completion
    links: list[AdmitLink] = field(default_factory=list)
    counters: Counter[str] = field(default_factory=Counter)
    record: dict[str, Any] | None = None
    #: Set while the page waits for its near-duplicate check
    #: (``workers.pipeline.lease.process_leases``).
    pending: PendingDedup | None = None
    #: (host, url, depth, hops) of links the worker's seen-memo already knows: not sent to
    #: the URL-seen test, unless Redis restarted (``workers.app.tasks.apply_results``).
    known: list[tuple[str, str, int, int]] = field(default_factory=list)
    #: What this URL taught about its host (robots.txt, soft-404 probe), for Redis: written
    #: in the completion pipeline, before the lease completes.
    host_writes: list[HostCacheWrite] = field(default_factory=list)
    #: The HTTP fetch this result came from (kind, body bytes, seconds), for the worker's
    #: metrics (workers/runtime/metrics.py); None when nothing was sent.
    fetched: FetchFigures | None = None
    #: Continuous crawling: the visit of a tracked URL, for the completer's schedule and
    #: history writes (workers/pipeline/revisit.py ``Visit``).
    visit: Any = None


@dataclass
class PendingDedup:
    """A parsed page whose near-duplicate check is batched with the other pages of its task:
    ``finish`` completes its :class:`LeaseResult` from the check's answer."""

    url: str
    host: str
    features: Features
    finish: Callable[[DedupResult], None]


def lease_record(lease: Lease, outcome: Outcome, started_at: float, ip: str | None,
            **fields: Any) -> dict[str, Any]:
    return entry_record(lease.host, lease.entry, outcome, started_at, ip,
                        lease.entry.attempts + 1, **fields)


def entry_record(host: str, entry: Entry, outcome: Outcome, at: float, ip: str | None,
                 attempts: int, **fields: Any) -> dict[str, Any]:
    """The JSONL record of a URL of ``host``'s queue that ended at ``at``; ``attempts``
    counts its fetches (none for a queued URL ended unleased)."""
    rec: dict[str, Any] = {"url": entry.url, "outcome": outcome, "fetched_at": round(at, 4),
                           "host": host, "ip": ip, "depth": entry.depth, "attempts": attempts}
    rec.update({k: v for k, v in fields.items() if v is not None})
    return rec
