"""Per-registered-domain budgets (IRLbot): how many URLs a domain may still admit.

Encoder and decoder of lua/budget.lua. Budget keys live in domain partitions (``{d<n>}``),
apart from host partitions, so one domain's count is one key wherever its hosts land.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frontier.keys import domain_partition_of
from frontier.scripts import Store, load_script

_BUDGET = load_script("budget")


@dataclass(frozen=True, slots=True)
class BudgetCall:
    """lua/budget.lua's ARGV: domain prefix, base, per_linker, cap, then per domain: domain,
    n, its n linking domains."""

    prefix: str
    base: int
    per_linker: int
    cap: int
    #: Target domain -> the other registered domains linking to it in this batch.
    linkers: Mapping[str, Sequence[str]]

    def encode(self) -> list[Any]:
        argv: list[Any] = [self.prefix, self.base, self.per_linker, self.cap]
        for dom, others in self.linkers.items():
            argv += [dom, len(others), *others]
        return argv


def decode_budget(raw: Sequence[Any]) -> list[int]:
    """Per domain of the call, the URLs it may still admit (>= 0)."""
    return [int(n) for n in raw]


class Budgets:
    """Reads and spends per-domain budgets (off unless a budget setting is non-zero)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def on(self) -> bool:
        cfg = self.store.config
        return bool(cfg.domain_budget_base or cfg.max_pages_per_domain)

    def _partition(self, domain: str) -> int:
        return domain_partition_of(domain, self.store.partitions)

    def allowance(self, linkers: Mapping[str, Iterable[str]]) -> dict[str, int]:
        """See :meth:`Frontier.domain_allowance`."""
        cfg, keys = self.store.config, self.store.keys
        groups: dict[int, dict[str, list[str]]] = defaultdict(dict)
        for dom, linking in linkers.items():
            groups[self._partition(dom)][dom] = sorted({d for d in linking if d != dom})
        pipe = self.store.pipeline()
        for dp, group in groups.items():
            call = BudgetCall(keys.domain_prefix(dp), cfg.domain_budget_base,
                              cfg.domain_budget_per_linking_domain, cfg.max_pages_per_domain,
                              group)
            pipe.script(_BUDGET, [keys.domain_spent(dp)], call.encode())
        out: dict[str, int] = {}
        for group, raw in zip(groups.values(), pipe.execute(), strict=True):
            out.update(zip(group, decode_budget(raw), strict=True))
        return out

    def queue_spent(self, pipe: Any, spent: Mapping[str, int]) -> None:
        """Count URLs admitted under their domains' budgets."""
        for dom, n in spent.items():
            pipe.command("hincrby", self.store.keys.domain_spent(self._partition(dom)), dom, n)
