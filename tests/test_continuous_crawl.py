"""Continuous crawling on the changing sandbox web (issue 19): one in-process crawl of a real
Redis and real HTTP, with revisits under a budget, read by every test of the module.

What is checked: a revisit sends the last visit's validators and a 304 is recorded as an
unchanged visit with no body and archived as a server-not-modified revisit record; change
detection against the web's ground truth (a page whose only change is its date line is
unchanged, with the exact digest as the negative control, and a content change is changed);
the WARC revisit records read by warcio and listed in the CDXJ index; the revisit budget
holds over every window; revisits skip the URL-seen Bloom filter and new links do not; the
near-duplicate check never takes a revisit for a copy of its own last version.
"""

from __future__ import annotations

import glob
import itertools
import json
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from warcio.archiveiterator import ArchiveIterator

from dedup.service import DedupService
from freshness.validators import strong_last_modified
from frontier.frontier import AdmitLink, Entry, Frontier
from frontier.redisserver import EmbeddedRedis
from frontier.revisits import member_entry
from frontier.urls import host_of
from sandbox import SandboxWeb
from sandbox.change_model import ChangeModel
from tests.continuouskit import CHANGING, continuous_config, crawl_for
from tests.webs import SandboxWebs
from workers.cli.crawl import init_crawl
from workers.cluster.revisits import RevisitOwner
from workers.pipeline.revisit_state import VisitStore
from workers.runtime.revisit_plans import planner_from, planner_settings

#: Revisits a second, crawl-wide; 4 partitions of 1 each.
BUDGET = 4.0
PARTITIONS = 4
CRAWL_S = 20.0


@dataclass
class Crawl:
    web: SandboxWeb
    frontier: Frontier
    out: Path
    records: list[dict[str, Any]]
    started: float
    ended: float

    def by_url(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in sorted(self.records, key=lambda r: r["fetched_at"]):
            if r.get("status") in (200, 304):
                out[r["url"]].append(r)
        return out

    def warc_records(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(glob.glob(str(self.out / "warc" / "*.warc.gz"))):
            with open(path, "rb") as fh:
                records = ArchiveIterator(fh)
                for rec in records:
                    h = rec.rec_headers
                    out.append({"type": rec.rec_type, "uri": h.get_header("WARC-Target-URI"),
                                "file": Path(path).name, "offset": records.get_record_offset(),
                                "id": h.get_header("WARC-Record-ID"),
                                "to": h.get_header("WARC-Concurrent-To"),
                                "date": h.get_header("WARC-Date"),
                                "profile": h.get_header("WARC-Profile"),
                                "refers_uri": h.get_header("WARC-Refers-To-Target-URI"),
                                "refers_date": h.get_header("WARC-Refers-To-Date"),
                                "payload": h.get_header("WARC-Payload-Digest"),
                                "status": rec.http_headers.get_statuscode()
                                if rec.http_headers else None,
                                "http": dict(rec.http_headers.headers) if rec.http_headers
                                else {},
                                "body": len(rec.content_stream().read())})
        return out


@pytest.fixture(scope="module")
def crawl(redis_server: EmbeddedRedis, module_webs: SandboxWebs,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    web = module_webs.shared(CHANGING)
    out = tmp_path_factory.mktemp("continuous")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    cfg = continuous_config(web, "cont", str(out), partitions=PARTITIONS,
                            revisit_budget_pages_s=BUDGET, revisit_burst_s=1.0)
    frontier = init_crawl(client, cfg, list(web.seeds))
    started = time.time()
    crawl_for(redis_server.url, frontier, CRAWL_S)
    ended = time.time()
    records = [json.loads(line) for f in glob.glob(str(out / "records" / "*.jsonl"))
               for line in Path(f).read_text().splitlines()]
    yield Crawl(web, frontier, out, records, started, ended)
    client.close()


def _model(c: Crawl) -> ChangeModel:
    assert c.web.changes is not None
    return c.web.changes


def test_304_path(crawl: Crawl) -> None:
    """A revisit of a page that did not change sends the last ETag / Last-Modified; the 304
    is an unchanged visit with no body, counted, and archived as a server-not-modified
    revisit record whose request carries the validator."""
    not_modified = [r for r in crawl.records if r.get("status") == 304]
    assert len(not_modified) >= 5, "too few 304s to judge"
    for r in not_modified:
        assert r.get("revisit") and r["outcome"] == "revisits" and r["bytes"] == 0, r
        assert r["change"] == {"changed": False, "by": "not_modified"}
        assert r["conditional"], r
    st = crawl.frontier.stats()
    assert st["revisit_not_modified"] == len(not_modified)
    warc = crawl.warc_records()
    by_id = {w["id"]: w for w in warc}
    requests = {w["to"]: w for w in warc if w["type"] == "request"}
    sent = 0
    for w in warc:
        if w["type"] == "revisit" and w["status"] == "304":
            assert w["profile"].endswith("/revisit/server-not-modified")
            assert w["body"] == 0
            req = requests[w["id"]]["http"]
            assert "If-None-Match" in req or "If-Modified-Since" in req
            last = [f for f in warc if f["type"] == "response" and f["uri"] == w["uri"]
                    and f["date"] < w["date"]][-1]  # the copy the validator came from
            if last["http"].get("ETag"):
                assert req["If-None-Match"] == last["http"]["ETag"]  # verbatim
                sent += 1
    assert sum(1 for w in by_id.values() if w["type"] == "revisit" and w["status"] == "304") \
        == len(not_modified)
    assert sent >= 1, "no ETag sent back"


def test_if_modified_since_only_after_a_strong_last_modified(crawl: Crawl) -> None:
    """A revisit sends If-Modified-Since only when the last 200's Last-Modified was a strong
    validator (its Date a second or more later, RFC 9110 8.8.2.2): the lying hosts' "now"
    Last-Modified never goes back (a 304 from it would hide a change), the honest hosts' does.
    Both kinds occur, so the check is not vacuous; without the rule the weak ones are sent."""
    warc = crawl.warc_records()
    requests = {w["to"]: w for w in warc if w["type"] == "request"}
    copies: dict[str, list[dict[str, Any]]] = {}
    for w in sorted((w for w in warc if w["type"] in ("response", "revisit")),
                    key=lambda w: w["date"]):
        copies.setdefault(w["uri"], []).append(w)
    weak = strong_sent = 0
    for visits in copies.values():
        for last, visit in itertools.pairwise(visits):
            if last["status"] != "200" or visit["id"] not in requests:
                continue  # after a 304 the strength of the older copy carries over
            sent = "If-Modified-Since" in requests[visit["id"]]["http"]
            lm, date = last["http"].get("Last-Modified"), last["http"].get("Date")
            if strong_last_modified(lm, date):
                strong_sent += sent
            elif lm:
                weak += 1
                assert not sent, (visit["uri"], lm, date)
    assert weak >= 1 and strong_sent >= 1, (weak, strong_sent)


def test_change_detection_against_ground_truth(crawl: Crawl) -> None:
    """Between two visits: a page whose only changes were its date line is unchanged (by the
    similarity test: its digest differs, the negative control), a page whose text changed is
    changed. Pairs with a change during either fetch are left out (which version was
    served is then unknown)."""
    model = _model(crawl)
    cosmetic, content, quiet = [], [], []
    for url, visits in crawl.by_url().items():
        page = model.page(url)
        for prev, cur in itertools.pairwise(visits):
            if cur.get("status") != 200 or not cur.get("revisit"):
                continue
            t0, t1 = prev["fetched_at"], cur["fetched_at"]
            # the server took its time between a fetch's start and its end: a change then
            # leaves the version served unknown here
            if any(model.change_times(url, r["fetched_at"] - 0.002,
                                      r["fetched_at"] + r["elapsed_s"] + 0.002, cosmetic=True)
                   for r in (prev, cur)):
                continue
            real = model.changes_between(url, t0, t1)
            every = model.changes_between(url, t0, t1, cosmetic=True)
            if real:
                content.append(cur)
            elif every and page.cosmetic:
                cosmetic.append(cur)
            elif not every:
                quiet.append(cur)
    print(f"pairs: content {len(content)}, cosmetic {len(cosmetic)}, quiet {len(quiet)}")
    assert len(cosmetic) >= 2 and len(content) >= 5, "too few pairs to judge"
    for r in cosmetic:
        assert r["change"]["changed"] is False and r["change"]["by"] == "similar", r["change"]
        assert r["change"]["digest_same"] is False  # the digest alone would say changed
        assert r["change"]["similarity"] >= 0.8
    for r in content:
        assert r["change"]["changed"] is True, (r["url"], r["change"])
    for r in quiet:
        assert r["change"]["changed"] is False and r["change"]["by"] == "digest"


def test_warc_revisit_records(crawl: Crawl) -> None:
    """An unchanged 200 is an identical-payload-digest revisit record naming the earlier full
    copy (same URI, its payload digest, a date not after its own); each is in the CDXJ
    index as warc/revisit."""
    warc = crawl.warc_records()
    full: dict[str, list[dict[str, Any]]] = defaultdict(list)
    revisits = []
    for w in warc:
        if w["type"] == "response":
            full[w["uri"]].append(w)
        elif w["type"] == "revisit":
            revisits.append(w)
    identical = [w for w in revisits if w["profile"].endswith("/identical-payload-digest")]
    assert len(identical) >= 5
    for w in revisits:
        assert w["refers_uri"] == w["uri"] and w["refers_date"] <= w["date"]
        assert full[w["uri"]], "a revisit record with no full copy before it"
    for w in identical:
        assert w["status"] == "200" and w["body"] == 0
        earlier = [f for f in full[w["uri"]] if f["date"] < w["date"]]
        assert earlier and earlier[-1]["payload"] == w["payload"]
        assert earlier[-1]["date"][:19] == w["refers_date"][:19]
    kinds = {(w["file"], w["offset"]): w["type"] for w in warc}
    same = [r for r in crawl.records if r.get("change", {}).get("by") == "digest"]
    wrong = [(r, kinds.get(tuple(r["warc"]))) for r in same
             if kinds.get(tuple(r["warc"])) != "revisit"]
    assert same and not wrong, wrong
    assert len(identical) == len(same)
    lines = [json.loads(line.split(" ", 2)[2])
             for f in glob.glob(str(crawl.out / "warc" / "*.cdxj*"))
             for line in Path(f).read_text().splitlines()]
    assert sum(1 for x in lines if x.get("mime") == "warc/revisit") == len(revisits)


def test_budget_holds_over_every_window(crawl: Crawl) -> None:
    """Revisits a second stay within the budget over every 4 s window (plus the partitions'
    bursts), and the budget was binding: revisits were due and waited."""
    times = sorted(r["fetched_at"] for r in crawl.records if r.get("revisit"))
    assert len(times) >= BUDGET * CRAWL_S / 3
    # each bucket holds max(1, its rate x revisit_burst_s): at most partitions + budget x 1 s
    window, burst = 4.0, PARTITIONS + BUDGET * 1.0
    j = 0
    worst = 0
    for i, t in enumerate(times):
        while times[j] < t - window:
            j += 1
        worst = max(worst, i - j + 1)
    print(f"revisits {len(times)}, most in {window:g} s: {worst} (cap {BUDGET * window + burst})")
    assert worst <= BUDGET * window + burst + 1
    assert crawl.frontier.revisits.status().due > 0, "the budget never bound"


def test_revisits_skip_the_bloom_filter(crawl: Crawl) -> None:
    """Every URL entered a host queue once through the URL-seen test (admitted) and then only
    as a promoted revisit; a link to a tracked URL is still refused as seen."""
    st = crawl.frontier.stats()
    first = {r["url"] for r in crawl.records if not r.get("revisit")}
    assert st["revisits_promoted"] > 0 and st["revisits"] > 0
    assert st["admitted"] >= len(first)
    url = next(r["url"] for r in crawl.records if r.get("revisit"))
    res = crawl.frontier.admit([AdmitLink(host_of(url), url, Entry(url, 1))])
    assert res.admitted == 0 and res.rejected == 1  # the filter still guards new links
    assert sum(1 for r in crawl.records if r["url"] == url) >= 2


def test_dedup_never_flags_a_page_as_its_own_copy(crawl: Crawl) -> None:
    """No revisit is recorded as an exact or near duplicate of its own URL; the control: the
    same page's text under another URL is a duplicate of it."""
    revisits = [r for r in crawl.records if r.get("revisit")]
    assert revisits
    assert not [r for r in revisits if r.get("dup_kind") in ("exact", "near")
                and r.get("dup_of") == r["url"]]
    url = next(r["url"] for r in revisits if r.get("status") == 200
               and r.get("content_type") == "text/html")
    body = urllib.request.urlopen(urllib.request.Request(
        url.replace(host_of(url), f"{crawl.web.resolver_map[urlsplit(url).hostname]}:"
                    f"{crawl.web.port}"), headers={"Host": host_of(url)}), timeout=5).read()
    dedup = DedupService(crawl.frontier.r, crawl.frontier.config.namespace,
                         crawl.frontier.config.dedup_config())
    copy = dedup.check(url + "?copy", host_of(url), body, record=False)
    assert copy.kind in ("exact", "near") and copy.canonical_url is not None
    assert dedup.check(url, host_of(url), body, record=False).canonical_url != url


def test_replan_due_replans_each_partition_once_a_period_and_times_it(crawl: Crawl) -> None:
    """A member's replan thread calls ``replan_due`` every second: each held partition is
    replanned once per ``revisit_replan_s``, and each replan's time is observed in
    trawl_revisit_replan_duration_seconds (parsed from the registry's Prometheus text)."""
    from tests.promtext import of_registry, value
    from workers.runtime import metrics
    from workers.runtime.metrics import WorkerMetrics

    fr = crawl.frontier
    owner = RevisitOwner(Frontier(fr.r, fr.config.replace(revisit_policy="freshness",
                                                          revisit_replan_s=60.0)))
    counted = WorkerMetrics("worker", "w", fr.config.namespace)
    metrics.activate(counted)
    try:
        now = time.time()
        assert owner.replan_due(now, range(PARTITIONS)) == PARTITIONS
        assert owner.replan_due(now + 30, range(PARTITIONS)) == 0  # within the period
        assert owner.replan_due(now + 61, [1]) == 1
    finally:
        metrics.activate(None)
    scraped = of_registry(counted.registry)
    assert value(scraped, "trawl_revisit_replan_duration_seconds_count") == PARTITIONS + 1
    assert value(scraped, "trawl_revisit_replan_duration_seconds_sum") > 0


def test_replan_moves_only_scheduled_urls(crawl: Crawl) -> None:
    """An owner's replan under the freshness policy stores the partition's plan (and its
    fitted prior) for the workers and moves each scheduled URL to its last visit + its new
    interval, and never puts back a URL that left the schedule meanwhile (ZADD XX: the
    one-place invariant)."""
    fr = crawl.frontier
    cfg = fr.config.replace(revisit_policy="freshness")
    owner = RevisitOwner(Frontier(fr.r, cfg))
    p = max(range(PARTITIONS), key=lambda q: fr.r.zcard(fr.keys.revisits(q)))
    key = fr.keys.revisits(p)
    before = {m: t for m, t in fr.r.zrange(key, 0, -1, withscores=True)}
    assert len(before) >= 2
    gone = next(iter(before))
    fr.r.zrem(key, gone)  # as if promoted into its host queue just now
    moved = owner.replan(p)
    after = {m: t for m, t in fr.r.zrange(key, 0, -1, withscores=True)}
    assert gone not in after and set(after) == set(before) - {gone}
    assert moved == len(after)
    plan = planner_from(planner_settings(cfg), fr.r.get(fr.keys.revisit_plan(p)))
    assert plan.replanned and plan.mu is not None
    # the prior fitted to the partition's pages (empirical Bayes) travels with the plan, so
    # a worker's intervals (checked below) use the owner's prior, not the settings' weak one
    assert plan.prior is not None and plan.prior != planner_settings(cfg).prior
    store = VisitStore(fr.r, cfg)
    for member, due in after.items():
        url = member_entry(member).url
        (history,) = store.history_store(p).get_many([url])
        assert history is not None
        assert due == pytest.approx(history.last_visit_s + plan.interval_s(history))
