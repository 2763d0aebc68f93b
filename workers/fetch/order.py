"""The ``trawl.fetch`` task message: one leased URL to fetch, as JSON on the broker.

One encoder and one decoder for the scheduler (which sends) and the task (which receives), so
the positional JSON form is written down once. A list, not an object, keeps the messages
small and readable in Flower: ``[url, partition, lease id, host, entry, ip(, score)]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from frontier.frontier import Entry, Lease


class BadMessage(ValueError):
    """A task message that carries no lease we can honour (its URL comes back when the
    lease expires)."""


@dataclass(frozen=True, slots=True)
class FetchOrder:
    """Fetch the leased URL, connecting to ``ip`` (None: the worker resolves the host)."""

    lease: Lease
    ip: str | None = None

    def to_json(self) -> list[Any]:
        lease = self.lease
        msg: list[Any] = [lease.entry.url, lease.partition, lease.lease_id, lease.host,
                          lease.entry.encode(), self.ip]
        if lease.score:
            msg.append(lease.score)
        return msg

    @classmethod
    def from_json(cls, msg: Any) -> FetchOrder:
        if not isinstance(msg, Sequence) or isinstance(msg, str) or not 5 <= len(msg) <= 7:
            raise BadMessage(f"not a fetch order: {msg!r}"[:300])
        try:
            _url, partition, lease_id, host, entry = msg[:5]
            ip = msg[5] if len(msg) > 5 else None
            score = float(msg[6]) if len(msg) > 6 else 0.0
            lease = Lease(int(partition), str(lease_id), str(host), Entry.decode(str(entry)),
                          score)
        except (ValueError, TypeError, OverflowError) as exc:  # Overflow: 10**400, Infinity
            raise BadMessage(f"bad fetch order {msg!r}: {exc}"[:300]) from exc
        if ip is not None and not isinstance(ip, str):
            raise BadMessage(f"bad IP in fetch order: {msg!r}"[:300])
        entry = lease.entry
        if not (lease.host and lease.lease_id and entry.url.startswith(("http://", "https://"))):
            # an empty host or lease id names no lease; an empty or schemeless URL is no fetch
            raise BadMessage(f"fetch order without a URL, host or lease: {msg!r}"[:300])
        # NaN would reach the completion script as a score (no ZADD takes it); negative
        # numbers name no lease.
        if not math.isfinite(score) or min(lease.partition, entry.depth, entry.attempts,
                                           entry.hops) < 0:
            raise BadMessage(f"fetch order out of range: {msg!r}"[:300])
        return cls(lease, ip)


def decode_batch(batch: Any) -> tuple[list[FetchOrder], list[BadMessage]]:
    """The ``trawl.fetch`` argument: its orders, and a rejection for each element that is
    not one (a batch that is not a list at all is one rejection, not an error in the task)."""
    if not isinstance(batch, list):
        return [], [BadMessage(f"not a batch of fetch orders: {batch!r}"[:300])]
    orders: list[FetchOrder] = []
    bad: list[BadMessage] = []
    for msg in batch:
        try:
            orders.append(FetchOrder.from_json(msg))
        except BadMessage as exc:
            bad.append(exc)
    return orders, bad
