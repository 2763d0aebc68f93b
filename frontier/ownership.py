"""Which member owns which partition: balanced rendezvous (highest-random-weight) hashing.

Every member computes the same assignment from the same list of live members, so no
coordinator is needed. Plain rendezvous hashing moves only the partitions of a member that
joins or leaves, but its loads are binomial (64 partitions over 4 members: 16 ± 3.5). Here
each member has a quota (P // N, or one more for the first P % N members in hash order), and
(partition, member) pairs are taken in descending weight while the member has room. Loads are
then exactly even within 1, and a join or leave still moves close to 1/N of the partitions
(measured in tests/frontier/test_ownership.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import xxhash


def _weight(member: str, partition: int) -> int:
    return xxhash.xxh64_intdigest(f"{member}\x00{partition}".encode())


def assign(members: Sequence[str], partitions: int) -> dict[str, list[int]]:
    """Partition lists per member (sorted); every partition has exactly one owner."""
    live = sorted(set(members))
    out: dict[str, list[int]] = {m: [] for m in live}
    if not live:
        return out
    base, extra = divmod(partitions, len(live))
    by_rank = sorted(live, key=lambda m: xxhash.xxh64_intdigest(m.encode()))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_rank)}
    pairs = sorted(((_weight(m, p), p, m) for p in range(partitions) for m in live),
                   reverse=True)
    owner: dict[int, str] = {}
    for _w, p, m in pairs:
        if p not in owner and quota[m] > 0:
            owner[p] = m
            quota[m] -= 1
    for p, m in owner.items():
        out[m].append(p)
    for parts in out.values():
        parts.sort()
    return out
