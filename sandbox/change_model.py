"""When each page of the changing sandbox web changes: the ground truth of issue 19.

A share of the pages change as Poisson processes, each at its own rate drawn log-uniformly
between ``1/change_max_interval_s`` and ``1/change_min_interval_s`` (simulated seconds). The
simulated clock runs ``time_acceleration`` times the wall clock from the web's epoch (wall
time of simulated second 0), so a week of changes fits in minutes of a test. A share of the
changing pages only change a date and counter line ("cosmetic": not a real change).

Every answer is a pure function of (config, epoch, page): a bench in another process builds
the same :class:`ChangeModel` from the config and the epoch the server reports, and asks it
whether a copy fetched at time t was still current at time t' (freshness, age and delay).

How a page's change times are drawn lazily, in O(1) memory and any order of queries: the
events of the page's Poisson process over [0, 2^32 mean intervals) sit in a binary tree of
counts. The root holds the total count; each node splits its count between its halves by a
Binomial(n, 1/2) draw seeded by (seed, page, node); a leaf (one mean interval long) places its
few events uniformly. Given the total, this is exactly the law of a Poisson process. A query
walks one path of 32 nodes (about 0.1 ms). Counts above 4096 use the normal approximation of
the binomial (its error is far below anything a test of rates can see); below, exact draws.
All public times are wall-clock Unix seconds; rates are changes per wall second unless
``sim_`` says otherwise.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from itertools import pairwise
from statistics import NormalDist
from urllib.parse import urlsplit

from .config import SandboxConfig
from .layout import Layout, share_draw

_DEPTH = 32  # leaves of one mean interval each: a horizon of 2^32 mean intervals
_EXACT_LIMIT = 4096  # binomial splits of counts up to this are exact
_NORMAL = NormalDist()
#: Change lists longer than this are refused (a caller asking for years of a fast page).
MAX_LISTED_CHANGES = 1_000_000


class WrongLastModified(StrEnum):
    """How a lying host's Last-Modified is wrong."""

    NOW = "now"  # the time of the request: every visit looks changed
    OLD = "old"  # one fixed date long ago: every visit looks unchanged


@dataclass(frozen=True, slots=True)
class HostValidators:
    """What a host of the changing web sends and honours. A lying host (``wrong_lm`` set)
    sends a wrong Last-Modified, no ETag, and answers conditional GETs with 200 anyway."""

    etag: bool
    last_modified: bool
    wrong_lm: WrongLastModified | None = None

    @property
    def conditional(self) -> bool:
        return self.wrong_lm is None


@dataclass(frozen=True, slots=True)
class PageChanges:
    """A page's change process: rate in changes per simulated second (0: never changes)."""

    host: str
    path: str
    sim_rate: float
    cosmetic: bool

    @property
    def changing(self) -> bool:
        return self.sim_rate > 0


def _uniform(digest: bytes) -> float:
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64


@lru_cache(maxsize=1 << 16)  # nearby queries of a page share the top of their paths
def _left_count(prefix: bytes, level: int, index: int, n: int) -> int:
    """How many of a node's ``n`` events fall in its left half: Binomial(n, 1/2), seeded by
    the page (``prefix``) and the node."""
    if n == 0:
        return 0
    node = b"%d:%d" % (level, index)
    if n <= 512:  # n fair bits straight from the hash
        bits = hashlib.blake2b(prefix + node, digest_size=64).digest()
        return (int.from_bytes(bits, "big") >> (512 - n)).bit_count()
    digest = hashlib.blake2b(prefix + node, digest_size=8).digest()
    if n <= _EXACT_LIMIT:
        return random.Random(digest).getrandbits(n).bit_count()
    z = _NORMAL.inv_cdf(_uniform(digest))
    return min(n, max(0, round(n / 2 + math.sqrt(n) / 2 * z)))


class _Process:
    """The tree of counts of one page (unit rate: times in mean intervals)."""

    __slots__ = ("prefix", "root")

    def __init__(self, seed: int, key: tuple[str, str]) -> None:
        self.prefix = repr((seed, "chg", *key)).encode()
        mean = 2.0**_DEPTH  # Poisson(2^32): the normal approximation is exact to ~1e-5
        z = _NORMAL.inv_cdf(_uniform(self._hash(b"root")))
        self.root = max(0, round(mean + math.sqrt(mean) * z))

    def _hash(self, node: bytes) -> bytes:
        return hashlib.blake2b(self.prefix + node, digest_size=8).digest()

    def _left(self, level: int, index: int, n: int) -> int:
        return _left_count(self.prefix, level, index, n)

    def _leaf(self, index: int, n: int) -> list[float]:
        rng = random.Random(self._hash(b"leaf:%d" % index))
        return sorted(index + rng.random() for _ in range(n))

    def count(self, x: float) -> int:
        """Events in [0, x] (x in mean intervals)."""
        if x < 0:
            return 0
        if x >= 2.0**_DEPTH:
            raise ValueError(f"time {x:.3g} mean intervals is past the model's horizon")
        n, index, before = self.root, 0, 0
        for level in range(_DEPTH):
            left = self._left(level, index, n)
            index *= 2
            if x >= (index + 1) * 2.0 ** (_DEPTH - level - 1):
                before += left
                n -= left
                index += 1
            else:
                n = left
        return before + sum(1 for t in self._leaf(index, n) if t <= x)

    def kth(self, k: int) -> float | None:
        """Time of the k-th event (1-based), in mean intervals; None past the horizon."""
        if not 1 <= k <= self.root:
            return None
        n, index = self.root, 0
        for level in range(_DEPTH):
            left = self._left(level, index, n)
            index *= 2
            if k > left:
                k -= left
                n -= left
                index += 1
            else:
                n = left
        return self._leaf(index, n)[k - 1]


class ChangeModel:
    """The ground truth of the changing web (see the module docstring).

    ``epoch``: the wall time of simulated second 0 (the server reports it in its ready line,
    ``SandboxWeb.change_epoch``). Queries before the epoch see version 0. "Real" changes
    are the content changes; the ``cosmetic=True`` variants count date-line changes too."""

    def __init__(self, config: SandboxConfig, epoch: float, layout: Layout | None = None
                 ) -> None:
        self.config, self.epoch = config, epoch
        self.acceleration = config.time_acceleration
        self.layout = layout if layout is not None else Layout(config)
        self._log_lo = math.log(1.0 / config.change_max_interval_s)
        self._log_hi = math.log(1.0 / config.change_min_interval_s)

    # -- time ---------------------------------------------------------------------------
    def sim_time(self, wall: float) -> float:
        return (wall - self.epoch) * self.acceleration

    def wall_time(self, sim: float) -> float:
        return self.epoch + sim / self.acceleration

    # -- pages and hosts ------------------------------------------------------------------
    def page(self, url: str) -> PageChanges:
        parts = urlsplit(url)
        return self.page_at(parts.hostname or "", parts.path or "/")

    def page_at(self, host: str, path: str) -> PageChanges:
        """The change process of a generated page; other URLs (resources, specials, unknown
        paths) and the hanging host's pages never change."""
        seed, cfg = self.config.seed, self.config
        if (host == self.layout.hang_host or path not in self.layout.page_of.get(host, {})
                or share_draw(seed, "changes", host, path) >= cfg.change_share):
            return PageChanges(host, path, 0.0, False)
        v = share_draw(seed, "change-rate", host, path)
        rate = math.exp(self._log_lo + v * (self._log_hi - self._log_lo))
        return PageChanges(host, path, rate,
                           share_draw(seed, "cosmetic", host, path) < cfg.cosmetic_share)

    def validators(self, host: str) -> HostValidators:
        seed, cfg = self.config.seed, self.config
        if share_draw(seed, "wrong-lm", host) < cfg.wrong_lm_share:
            how = (WrongLastModified.NOW if share_draw(seed, "wrong-lm-how", host) < 0.5
                   else WrongLastModified.OLD)
            return HostValidators(False, True, how)
        return HostValidators(share_draw(seed, "etag", host) < cfg.etag_share,
                              share_draw(seed, "last-modified", host) < cfg.last_modified_share)

    def changing_urls(self, urls: Sequence[str]) -> list[str]:
        return [u for u in urls if self.page(u).changing]

    # -- rates ----------------------------------------------------------------------------
    def sim_rate(self, url: str) -> float:
        return self.page(url).sim_rate

    def rate(self, url: str, cosmetic: bool = False) -> float:
        """Changes per wall second (real ones only unless ``cosmetic``)."""
        p = self.page(url)
        return 0.0 if p.cosmetic and not cosmetic else p.sim_rate * self.acceleration

    # -- raw versions: what the server serves (every change alters the bytes) --------------
    def _process(self, p: PageChanges) -> _Process:
        return _Process(self.config.seed, (p.host, p.path))

    def count_at(self, p: PageChanges, t: float) -> int:
        """The version of page ``p`` at wall time t."""
        if not p.changing:
            return 0
        return self._process(p).count(self.sim_time(t) * p.sim_rate)

    def time_of(self, p: PageChanges, k: int) -> float | None:
        """Wall time at which version k of page ``p`` began; None for 0 or past the horizon."""
        x = self._process(p).kth(k) if p.changing and k >= 1 else None
        if x is None:
            return None
        wall = self.wall_time(x / p.sim_rate)
        # the first float the version holds at: rounding must not put it a hair before x
        while self.sim_time(wall) * p.sim_rate < x:
            wall = math.nextafter(wall, math.inf)
        return wall

    def version_at(self, url: str, t: float) -> int:
        """The version served at wall time t: changes (real and cosmetic) since the epoch."""
        return self.count_at(self.page(url), t)

    def version_time(self, url: str, version: int) -> float | None:
        """Wall time at which ``version`` began; None for version 0 (before the epoch)."""
        return self.time_of(self.page(url), version)

    def last_change(self, url: str, t: float) -> float | None:
        """Wall time of the last change (real or cosmetic) at or before t; None: none yet."""
        p = self.page(url)
        return self.time_of(p, self.count_at(p, t))

    def next_change(self, url: str, t: float) -> float | None:
        """Wall time of the first change (real or cosmetic) after t; None: never."""
        p = self.page(url)
        return self.time_of(p, self.count_at(p, t) + 1) if p.changing else None

    # -- real changes: the ground truth of freshness ------------------------------------------
    def content_version_at(self, url: str, t: float) -> int:
        p = self.page(url)
        return 0 if p.cosmetic else self.count_at(p, t)

    def changes_between(self, url: str, t0: float, t1: float, cosmetic: bool = False) -> int:
        """Changes in (t0, t1]."""
        p = self.page(url)
        if (p.cosmetic and not cosmetic) or t1 <= t0:
            return 0
        return self.count_at(p, t1) - self.count_at(p, t0)

    def change_times(self, url: str, t0: float, t1: float, cosmetic: bool = False
                     ) -> list[float]:
        """Wall times of the changes in (t0, t1], in order."""
        p = self.page(url)
        if (p.cosmetic and not cosmetic) or t1 <= t0:
            return []
        first, last = self.count_at(p, t0) + 1, self.count_at(p, t1)
        if last - first + 1 > MAX_LISTED_CHANGES:
            raise ValueError(f"{url}: {last - first + 1} changes in the span, more than "
                             f"{MAX_LISTED_CHANGES}; ask changes_between for counts")
        return [t for k in range(first, last + 1) if (t := self.time_of(p, k)) is not None]

    def is_current(self, url: str, fetched_at: float, t: float, cosmetic: bool = False) -> bool:
        """Whether a copy fetched at ``fetched_at`` still matched the page at ``t``."""
        return self.changes_between(url, fetched_at, t, cosmetic) == 0

    def age(self, url: str, fetched_at: float, t: float, cosmetic: bool = False) -> float:
        """How long the copy has been out of date at t (0 while current)."""
        p = self.page(url)
        if (p.cosmetic and not cosmetic) or t <= fetched_at:
            return 0.0
        first = self.time_of(p, self.count_at(p, fetched_at) + 1)
        return t - first if first is not None and first <= t else 0.0

    def freshness(self, copies: Mapping[str, float], t: float) -> float:
        """Share of ``copies`` (URL -> time fetched) that are current at t (real changes)."""
        if not copies:
            return 1.0
        return sum(self.is_current(u, f, t) for u, f in copies.items()) / len(copies)

    def mean_age(self, copies: Mapping[str, float], t: float) -> float:
        if not copies:
            return 0.0
        return sum(self.age(u, f, t) for u, f in copies.items()) / len(copies)

    def delays(self, url: str, visits: Sequence[float]) -> list[float]:
        """For each real change between the first and last of ``visits`` (wall times,
        sorted), how long it waited until the next visit saw it."""
        out: list[float] = []
        for prev, cur in pairwise(visits):
            out += [cur - c for c in self.change_times(url, prev, cur)]
        return out
