"""The visit driver of bench/freshness.py: revisit policies against the changing sandbox web,
over real HTTP on loopback, each at the same budget.

The driver owns simulated time: every request carries the simulated moment it is made at (as
the wall time the web's clock would show, ``CLOCK_HEADER``; the web runs with
``SandboxConfig.virtual_clock``), and the web answers as of that moment. Visits therefore
happen at exactly their planned times, however loaded the machine, and a run is a function of
its seed; the HTTP, the conditional GETs and the change detection are real. Simulated time
maps to the web's wall time at ``time_acceleration`` simulated seconds per wall second, which
is what sets the resolution of HTTP dates (one wall second).

Every policy keeps, per page, the copy it holds (digest, main-text MinHash, validators) and its
``VisitHistory`` in simulated seconds (history times are whole simulated seconds, offset so
that 0 still means "never"). A shared warm-up first visits every page uniformly (one driver,
the same budget); then each policy gets a copy of the warm-up's state and runs its own plan,
all concurrently against the one server, so they see the same realisation of the change
processes (a function of simulated time).

Scheduling, per policy (what a crawl with a due-time ZSET and a rate limit does): a page is due
``RevisitPlanner.interval_s`` after its last visit (after the time that visit was due, if it
came late: at most ``LATE_CREDIT`` of the interval is credited); due pages are visited
earliest first, at most ``budget`` visits per second (no saving up of unused slots: a policy
whose intervals ask for less than the budget leaves it unspent, one that asks for more falls
behind and its pages wait). Estimator-driven policies replan every ``replan_sim_s`` (rates
from the histories, a prior fitted to all pages' rates) and then move every waiting page's due
time to its last visit plus its new interval. With ``DriveSpec.probe`` (the default) the
rate-driven policies probe censored histories (freshness/explore.py); the probes are counted
and spend the same budget. Each visit is a conditional GET with the validators the page last
gave; bench/freshness_detect.py decides whether it changed.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

import aiohttp
import numpy as np

from bench.freshness_detect import Copy, Outcome, detect
from freshness.estimators import fitted_prior
from freshness.explore import ProbeRule, probes_left
from freshness.history import VisitHistory
from freshness.revisit import RATE_DRIVEN, RevisitPlanner, RevisitPolicy, RevisitSettings
from freshness.validators import http_date_s, strong_last_modified
from sandbox.change_model import ChangeModel
from sandbox.changing import CLOCK_HEADER

#: History times are int(simulated second) + this, so that a visit at second 0 is not "never".
HISTORY_OFFSET = 1_000_000
REQUEST_TIMEOUT_S = 10.0
ORACLE_SUFFIX = "+oracle"
#: A late visit counts as made this share of the page's interval early at most, so that
#: lateness from pages falling due together does not push every later visit back (the plan's
#: frequencies, and so its budget, are kept) and is not made up in a burst either.
LATE_CREDIT = 0.5
#: Policies whose intervals do not depend on rates: never replanned.
UNPLANNED = (RevisitPolicy.FIXED, RevisitPolicy.UNIFORM, RevisitPolicy.ADAPTIVE)


@dataclass(frozen=True)
class Target:
    """The pages to keep fresh and how to reach them (the web's resolver map)."""

    model: ChangeModel
    urls: tuple[str, ...]
    port: int
    resolver_map: dict[str, str]


@dataclass(frozen=True)
class DriveSpec:
    """Budget and times in simulated seconds."""

    budget_per_sim_s: float
    warmup_sim_s: float
    run_sim_s: float
    replan_sim_s: float
    min_interval_s: float
    max_interval_s: float
    #: The fixed policy's interval (default: the uniform one, pages / budget).
    fixed_interval_s: float | None = None
    threshold: float = 0.9
    #: Feed Last-Modified to the histories (off: interval estimators only).
    use_last_modified: bool = True
    seed: int = 0
    #: Probe censored histories under the rate-driven policies (freshness/explore.py).
    probe: ProbeRule | None = field(default_factory=ProbeRule)
    #: Simulated seconds after the fork that every policy runs its own plan unscored (the
    #: time it takes to learn: the estimators' histories, the adaptive rule's intervals).
    unscored_sim_s: float = 0.0


@dataclass
class Page:
    history: VisitHistory = field(default_factory=VisitHistory)
    copy: Copy | None = None
    #: When the schedule counts the last visit as made: its due time, or as much later as
    #: the visit came less LATE_CREDIT of its interval (``Driver.visit``).
    anchor_sim: float = math.nan
    #: The page's next visit is a probe of its censored history (counted when made).
    probing: bool = False
    probes: int = 0
    #: The held copy's Last-Modified is a strong validator (``strong_last_modified``).
    lm_strong: bool = False


@dataclass
class PolicyRun:
    """One policy's state and record: visits are (page index, simulated time, outcome)."""

    name: str
    planner: RevisitPlanner
    pages: list[Page]
    #: Plan with the web's true rates instead of the estimates (a control: what the policy
    #: would do with perfect estimates, through the same visits).
    oracle: bool = False
    visits: list[tuple[int, float, Outcome]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    replans: int = 0
    #: Visits that were probes (part of ``visits``: they spend the same budget).
    probes: int = 0
    probes_at_replan: int = 0
    heap: list[tuple[float, int]] = field(default_factory=list)
    #: Pages under probing (at most ``planner.probe_slots``: one probe episode at a time
    #: when the budget is small; the other censored pages follow the plan until a slot frees).
    exploring: set[int] = field(default_factory=set)
    #: Due probes go before due planned visits (a late probe measures a longer interval).
    probe_heap: list[tuple[float, int]] = field(default_factory=list)


@dataclass
class DriveResult:
    urls: tuple[str, ...]
    start_sim: float
    fork_sim: float
    end_sim: float
    warmup: PolicyRun
    runs: dict[str, PolicyRun]
    wall_s: float
    #: Where scoring starts: the fork plus ``DriveSpec.unscored_sim_s``.
    score_sim: float = math.nan

    def __post_init__(self) -> None:
        if math.isnan(self.score_sim):
            self.score_sim = self.fork_sim


def _uniform_interval(spec: DriveSpec, n: int) -> float:
    return n / spec.budget_per_sim_s


def settings_for(policy: RevisitPolicy, spec: DriveSpec, n: int) -> RevisitSettings:
    return RevisitSettings(policy=policy, budget_per_s=spec.budget_per_sim_s,
                           fixed_interval_s=spec.fixed_interval_s or _uniform_interval(spec, n),
                           min_interval_s=spec.min_interval_s,
                           max_interval_s=spec.max_interval_s, assumed_pages=n,
                           probe=spec.probe)


def _header_time(model: ChangeModel, value: str | None, now_s: int) -> int | None:
    """A Last-Modified header as a history time (simulated), None if absent or unreadable.

    An HTTP date names a wall second, which is ``acceleration`` simulated seconds: we take its
    middle (not its start, which would make every change look older than it is by half of
    that on average), and never later than the visit."""
    wall = http_date_s(value)
    if wall is None:
        return None
    return min(max(int(model.sim_time(wall + 0.5)) + HISTORY_OFFSET, 1), now_s)


class Driver:
    """Runs policies against one web (see the module docstring)."""

    def __init__(self, target: Target, spec: DriveSpec, session: aiohttp.ClientSession) -> None:
        self.target, self.spec, self.session = target, spec, session
        self.model = target.model
        self.n = len(target.urls)
        #: Real changes per simulated second of each page (the oracle runs' rates).
        self.true_rates = np.array([self.model.rate(u) / self.model.acceleration
                                    for u in target.urls])

    # -- one visit ----------------------------------------------------------------------------
    async def _get(self, url: str, held: Copy | None, lm_strong: bool, sim: float
                   ) -> tuple[int, bytes, str | None, str | None, str | None]:
        parts = urlsplit(url)
        headers = {"Host": parts.netloc, CLOCK_HEADER: repr(self.model.wall_time(sim))}
        if held is not None and held.etag:
            headers["If-None-Match"] = held.etag
        if held is not None and held.last_modified and lm_strong:
            headers["If-Modified-Since"] = held.last_modified
        ip = self.target.resolver_map[parts.hostname or ""]
        async with self.session.get(f"http://{ip}:{self.target.port}{parts.path}",
                                    headers=headers, allow_redirects=False) as resp:
            body = await resp.read()
            return (resp.status, body, resp.headers.get("ETag"),
                    resp.headers.get("Last-Modified"), resp.headers.get("Date"))

    async def visit(self, run: PolicyRun, index: int, due: float, sim: float) -> None:
        """Visit page ``index``, due at ``due``, at simulated ``sim``."""
        page = run.pages[index]
        try:
            status, body, etag, lm, date = await self._get(self.target.urls[index], page.copy,
                                                           page.lm_strong, sim)
        except (aiohttp.ClientError, TimeoutError) as exc:
            run.errors[type(exc).__name__] += 1
            self._push(run, index, sim + self.spec.min_interval_s)
            return
        if status not in (200, 304) or (status == 304 and page.copy is None):
            run.errors[f"status {status}"] += 1
            self._push(run, index, sim + self.spec.min_interval_s)
            return
        outcome, page.copy, _ = detect(page.copy, status, body, etag, lm, self.spec.threshold)
        page.lm_strong = strong_last_modified(page.copy.last_modified, date)
        now_s = int(sim) + HISTORY_OFFSET
        lm_s = _header_time(self.model, page.copy.last_modified, now_s) \
            if self.spec.use_last_modified else None
        h = page.history.observe(now_s, outcome.changed, lm_s)
        if run.planner.settings.policy is RevisitPolicy.ADAPTIVE and outcome is not Outcome.FIRST:
            h = replace(h, interval_s=run.planner.interval_s(h, changed=outcome.changed))
        page.history = h
        run.visits.append((index, sim, outcome))
        run.probes += page.probing
        page.probes += page.probing
        interval = self._interval(run, index)
        page.anchor_sim = max(min(due, sim), sim - LATE_CREDIT * interval)
        self._push(run, index, page.anchor_sim + interval)

    def _interval(self, run: PolicyRun, index: int) -> float:
        page = run.pages[index]
        if run.oracle:
            page.probing = False
            return run.planner.interval_at(float(self.true_rates[index]))
        planner = run.planner
        if planner.settings.probe is None or planner.settings.policy not in RATE_DRIVEN:
            return planner.interval_s(page.history)
        planned = planner.interval_at(planner.rate_of(page.history))
        probe = planner.probe_s(page.history)
        if probe is None:
            run.exploring.discard(index)
        elif index in run.exploring or len(run.exploring) < planner.probe_slots:
            run.exploring.add(index)
        page.probing = index in run.exploring and probe is not None and probe < planned
        return min(planned, probe) if page.probing and probe is not None else planned

    @staticmethod
    def _push(run: PolicyRun, index: int, due: float) -> None:
        heapq.heappush(run.probe_heap if run.pages[index].probing else run.heap, (due, index))

    @staticmethod
    def _next_due(run: PolicyRun) -> float:
        return min(run.probe_heap[0][0] if run.probe_heap else math.inf,
                   run.heap[0][0] if run.heap else math.inf)

    @staticmethod
    def _pop_due(run: PolicyRun, sim: float) -> tuple[float, int] | None:
        """Due probes first while they are within the probe share of the visits, then due
        planned visits (earliest first), then due probes anyway (no slot is left unused)."""
        probe = run.planner.settings.probe
        share_ok = probe is not None and run.probes <= probe.max_budget_share * len(run.visits)
        heaps = (run.probe_heap, run.heap, run.probe_heap) if share_ok else (
            run.heap, run.probe_heap)
        for heap in heaps:
            if heap and heap[0][0] <= sim:
                return heapq.heappop(heap)
        return None

    # -- planning -----------------------------------------------------------------------------
    def replan(self, run: PolicyRun) -> None:
        """Rates from every history, with a prior fitted to all pages' own rates (empirical
        Bayes, ``fitted_prior``); then every waiting page is
        due at its last visit (its anchor) plus its new interval."""
        hs = [p.history for p in run.pages]
        run.planner.use_prior(None)  # the page's own rates, to fit the prior to
        prior = fitted_prior([run.planner.rate_of(h) for h in hs],
                             [h.unchanged_s + h.changed_s for h in hs])
        run.planner.use_prior(prior)
        settings = run.planner.settings
        # hold back what the probes spent in the last period, if pages still need probes
        pending = 0 if run.oracle or settings.probe is None else sum(
            probes_left(h, settings.probe, run.planner.probe_floor_s) for h in hs)
        reserve = min(pending, run.probes - run.probes_at_replan) / self.spec.replan_sim_s
        run.probes_at_replan = run.probes
        run.planner.replan(self.true_rates if run.oracle
                           else np.array([run.planner.rate_of(h) for h in hs]),
                           reserve_per_s=reserve)
        run.replans += 1
        run.heap, run.probe_heap = [], []
        for i, p in enumerate(run.pages):
            if not math.isnan(p.anchor_sim):
                self._push(run, i, p.anchor_sim + self._interval(run, i))

    # -- the loop -------------------------------------------------------------------------------
    async def run_until(self, run: PolicyRun, start_sim: float, end_sim: float,
                        replan: bool) -> None:
        """Visit due pages at the budget's pace from simulated ``start_sim`` until ``end_sim``,
        each at exactly its simulated time (one visit at a time per policy: a visit takes no
        simulated time), replanning every ``replan_sim_s``."""
        pace = 1.0 / self.spec.budget_per_sim_s
        next_slot, next_replan = start_sim, start_sim + self.spec.replan_sim_s
        while True:
            at = max(self._next_due(run), next_slot)
            if replan and next_replan <= min(at, end_sim):
                self.replan(run)
                next_replan += self.spec.replan_sim_s
                continue
            if at >= end_sim:
                return
            popped = self._pop_due(run, at)
            assert popped is not None  # something is due
            next_slot = max(next_slot, at - pace) + pace
            await self.visit(run, popped[1], popped[0], at)

    # -- warm-up, fork, main phase --------------------------------------------------------------
    def _warmup_run(self, start_sim: float) -> PolicyRun:
        planner = RevisitPlanner(settings_for(RevisitPolicy.UNIFORM, self.spec, self.n))
        planner.replan(np.zeros(self.n))
        run = PolicyRun("warmup", planner, [Page() for _ in range(self.n)])
        order = list(range(self.n))
        random.Random(self.spec.seed).shuffle(order)
        step = _uniform_interval(self.spec, self.n) / self.n
        run.heap = [(start_sim + k * step, i) for k, i in enumerate(order)]
        heapq.heapify(run.heap)
        return run

    def fork(self, warmup: PolicyRun, policy: RevisitPolicy, oracle: bool = False) -> PolicyRun:
        planner = RevisitPlanner(settings_for(policy, self.spec, self.n))
        interval = _uniform_interval(self.spec, self.n)
        pages = [replace(p, history=replace(p.history, interval_s=interval))
                 for p in warmup.pages]
        run = PolicyRun(policy.value + (ORACLE_SUFFIX if oracle else ""), planner, pages,
                        oracle=oracle)
        self.replan(run)
        return run

    async def drive(self, policies: list[RevisitPolicy],
                    oracles: list[RevisitPolicy] | None = None) -> DriveResult:
        """``policies`` with estimated rates, and ``oracles`` (planned policies) with the true
        ones, all from the same warm-up."""
        t0 = time.time()
        start = 0.0
        warmup = self._warmup_run(start)
        await self.run_until(warmup, start, start + self.spec.warmup_sim_s, replan=False)
        fork_sim = start + self.spec.warmup_sim_s
        runs = {p.value: self.fork(warmup, p) for p in policies}
        for p in oracles or []:
            run = self.fork(warmup, p, oracle=True)
            runs[run.name] = run
        end = fork_sim + self.spec.run_sim_s
        await asyncio.gather(*(self.run_until(r, fork_sim, end, replan=r.planner.settings.policy
                                              not in UNPLANNED) for r in runs.values()))
        return DriveResult(self.target.urls, start, fork_sim, end, warmup, runs,
                           time.time() - t0, fork_sim + self.spec.unscored_sim_s)


def new_session(limit: int = 64) -> aiohttp.ClientSession:
    """A client session for the loopback web (kept-alive connections, no cookies)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, force_close=False),
        timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
        cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True)
