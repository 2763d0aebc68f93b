"""The adaptive revisit rule that Nutch (``AdaptiveFetchSchedule``) and StormCrawler
(``AdaptiveScheduler``) ship: after each visit, multiply the page's interval up when it had not
changed and down when it had, within bounds. It estimates nothing; it is the baseline the
estimator-driven policies are measured against (issue 19).

Nutch's defaults (``db.fetch.schedule.adaptive.*``): ×1.4 unchanged, ×0.8 changed, 60 s to
365 days. StormCrawler's (``scheduler.adaptive.fetchInterval.*``): ×1.5, ×0.5, 1 h to 14 days.
Nutch's optional ``sync_delta`` (shift the next visit by the Last-Modified lag) is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from freshness.closedform import Array

DAY_S = 86_400.0


@dataclass(frozen=True)
class AdaptiveRule:
    """interval × (1 + inc_rate) after an unchanged visit, × (1 − dec_rate) after a changed
    one, clipped to [min_interval_s, max_interval_s]."""

    inc_rate: float = 0.4
    dec_rate: float = 0.2
    min_interval_s: float = 60.0
    max_interval_s: float = 365 * DAY_S

    def __post_init__(self) -> None:
        if not (self.inc_rate >= 0 and 0 <= self.dec_rate < 1):
            raise ValueError(f"inc_rate must be >= 0 and dec_rate in [0, 1): {self}")
        if not 0 < self.min_interval_s <= self.max_interval_s:
            raise ValueError(f"need 0 < min_interval_s <= max_interval_s: {self}")

    def next_interval(self, interval_s: float, changed: bool) -> float:
        """The interval to wait after a visit that found the page ``changed`` or not."""
        factor = (1.0 - self.dec_rate) if changed else (1.0 + self.inc_rate)
        return min(max(interval_s * factor, self.min_interval_s), self.max_interval_s)

    def next_intervals(self, intervals_s: ArrayLike, changed: ArrayLike) -> Array:
        """``next_interval`` for many pages at once (simulations of a whole crawl)."""
        factor = np.where(np.asarray(changed, dtype=bool), 1.0 - self.dec_rate,
                          1.0 + self.inc_rate)
        return np.clip(np.asarray(intervals_s, dtype=float) * factor, self.min_interval_s,
                       self.max_interval_s)


NUTCH = AdaptiveRule(0.4, 0.2, 60.0, 365 * DAY_S)
STORMCRAWLER = AdaptiveRule(0.5, 0.5, 3600.0, 14 * DAY_S)
