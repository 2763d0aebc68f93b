"""The changing sandbox web (issue 19): pages change as Poisson processes at their configured
rates, the server serves the version the ground truth (sandbox/change_model.py) names, cosmetic
changes touch only the date line, conditional GETs answer 304 exactly while a copy is current,
lying hosts lie, the same seed gives the same web, and with the option off the web is the
static one, byte for byte.

The model's own statistics need no server; everything the server sends is checked over
loopback against the model, at the request's logged start time (the time the server used).
"""

from __future__ import annotations

import dataclasses
import http.client
import math
import statistics
import time
from collections.abc import Callable
from email.utils import formatdate, parsedate_to_datetime
from itertools import pairwise
from urllib.parse import urlsplit

import lxml.html
import pytest

from freshness.estimators import bias_reduced_rate, naive_rate
from sandbox import SandboxConfig, SandboxSite, SandboxWeb
from sandbox.change_model import ChangeModel, WrongLastModified
from sandbox.changing import CLOCK_HEADER, WRONG_OLD_DATE, ChangingReplies
from tests.webs import SandboxWebs

#: Seed 3 gives every kind of host among 12: ETag only, Last-Modified only, both, neither,
#: lying "now" and lying "old". 3600x: a simulated hour per wall second.
WEB = SandboxConfig(seed=3, hosts=12, pages_per_host=30, ips=3, changes=True, change_share=0.6,
                    etag_share=0.5, last_modified_share=0.5, wrong_lm_share=0.3,
                    time_acceleration=3600.0, slow_page_s=0.1, robots_slow_s=0.1, hang_s=1.0)
#: For the statistics: 2000 pages, about 1000 changing, no server. Tolerances are 4 standard
#: errors of the statistic for the sample at hand.
BIG = SandboxConfig(seed=11, hosts=40, pages_per_host=50, ips=8, changes=True)
PLAIN = SandboxConfig(seed=3, hosts=12, pages_per_host=30, ips=3, slow_page_s=0.1,
                      robots_slow_s=0.1, hang_s=1.0)


@pytest.fixture(scope="module")
def web(module_webs: SandboxWebs) -> SandboxWeb:
    return module_webs.shared(WEB)


def _get(web: SandboxWeb, url: str, **headers: str
         ) -> tuple[int, http.client.HTTPMessage, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(web.resolver_map[parts.hostname or ""], web.port,
                                      timeout=5)
    try:
        conn.request("GET", parts.path, headers={"Host": parts.netloc, **headers})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def _model(web: SandboxWeb) -> ChangeModel:
    assert web.changes is not None
    return web.changes


def _pick(web: SandboxWeb, ok: Callable[[str], bool]) -> str:
    """A changing page of the web (not on the hanging host) for which ``ok`` holds now."""
    m = _model(web)
    assert web.site is not None
    for url in m.changing_urls(web.site.page_urls()):
        if ok(url):
            return url
    raise AssertionError("no page fits: the seed no longer gives one")


def _soon(web: SandboxWeb, lo: float = 1.0, hi: float = 3.5) -> Callable[[str], bool]:
    """The page's next change is lo..hi s away, and the one after it comes 0.3 s later or more
    (so the test's two requests see the versions before and after)."""
    m = _model(web)

    def ok(url: str) -> bool:
        now = time.time()
        nxt = m.next_change(url, now)
        if nxt is None or not now + lo <= nxt <= now + hi:
            return False
        after = m.next_change(url, nxt)
        return after is None or after > nxt + 0.3

    return ok


def _four_se(p: float, n: int) -> float:  # of a share p measured on n draws
    return 4 * math.sqrt(p * (1 - p) / n)


# -- the model, no server -----------------------------------------------------------------------
def test_rates_are_log_uniform_in_range_and_shares_as_configured() -> None:
    m = ChangeModel(BIG, epoch=0.0)
    site = SandboxSite(BIG, 80)
    urls = site.page_urls()
    pages = [m.page(u) for u in urls]
    changing = [p for p in pages if p.changing]
    lo, hi = 1 / BIG.change_max_interval_s, 1 / BIG.change_min_interval_s
    assert len(changing) / len(pages) == pytest.approx(
        BIG.change_share, abs=_four_se(BIG.change_share, len(pages)))
    assert all(lo <= p.sim_rate <= hi for p in changing)
    logs = [(math.log(p.sim_rate) - math.log(lo)) / (math.log(hi) - math.log(lo))
            for p in changing]
    for q in (0.1, 0.5, 0.9):  # log-uniform: the quantiles of the position sit at q
        assert statistics.quantiles(logs, n=10)[round(q * 10) - 1] == pytest.approx(
            q, abs=_four_se(q, len(logs)))
    cosmetic = sum(p.cosmetic for p in changing) / len(changing)
    assert cosmetic == pytest.approx(BIG.cosmetic_share,
                                     abs=_four_se(BIG.cosmetic_share, len(changing)))
    assert all(m.rate(u) == 0 for u in site.resource_urls()[:50])  # only pages change


def test_counts_over_a_long_span_match_each_pages_rate() -> None:
    """Over 100 mean intervals of the slowest page, every page's count is within 5 sigma of
    λT, and the pooled count per decade of rates within 3% of the expected."""
    m = ChangeModel(BIG, epoch=1000.0)
    urls = m.changing_urls(SandboxSite(BIG, 80).page_urls())
    span = 100 * BIG.change_max_interval_s  # simulated; acceleration 1: wall = simulated
    by_decade: dict[int, list[float]] = {}
    for url in urls:
        expected = m.rate(url, cosmetic=True) * span
        seen = m.changes_between(url, 1000.0, 1000.0 + span, cosmetic=True)
        assert abs(seen - expected) <= 5 * math.sqrt(expected), (url, seen, expected)
        decade = math.floor(math.log10(m.sim_rate(url)))
        by_decade.setdefault(decade, [0.0, 0.0])
        by_decade[decade][0] += seen
        by_decade[decade][1] += expected
    assert len(by_decade) >= 4  # one change a minute to one a week: four decades
    for decade, (seen, expected) in by_decade.items():
        assert seen / expected == pytest.approx(1.0, abs=0.03), decade


def test_gaps_are_exponential_and_estimators_recover_the_rate() -> None:
    """The Poisson property (exponential gaps: mean 1/λ, sd 1/λ, P(gap > mean) = 1/e), and
    freshness.estimators on regular visits: the bias-reduced estimate is close to λ where the
    naive one is biased low (the lecture's point, on the sandbox's own processes)."""
    m = ChangeModel(BIG, epoch=0.0)
    urls = m.changing_urls(SandboxSite(BIG, 80).page_urls())[:150]
    gaps: list[float] = []
    for url in urls[:20]:
        times = m.change_times(url, 0.0, 300 / m.rate(url, cosmetic=True), cosmetic=True)
        gaps += [(b - a) * m.rate(url, cosmetic=True) for a, b in pairwise(times)]
    n_gaps = len(gaps)
    assert n_gaps > 5000
    # standard errors for Exp(1): of the mean 1/√n, of the sd √(2/n)
    assert statistics.mean(gaps) == pytest.approx(1.0, abs=4 / math.sqrt(n_gaps))
    assert statistics.stdev(gaps) == pytest.approx(1.0, abs=4 * math.sqrt(2 / n_gaps))
    assert sum(g > 1 for g in gaps) / n_gaps == pytest.approx(
        math.exp(-1), abs=_four_se(math.exp(-1), n_gaps))
    naive, reduced = [], []
    n = 40
    for url in urls:
        lam = m.rate(url, cosmetic=True)
        interval = 1 / lam  # one change per visit interval on average
        versions = [m.version_at(url, k * interval) for k in range(n + 1)]
        changed = sum(a != b for a, b in pairwise(versions))
        naive.append(naive_rate(changed, n, interval) / lam)
        reduced.append(bias_reduced_rate(changed, n, interval) / lam)
    assert statistics.mean(naive) == pytest.approx(1 - math.exp(-1), abs=0.03)  # biased low
    assert statistics.mean(reduced) == pytest.approx(1.0, abs=0.06)


def test_ground_truth_answers_agree_with_each_other() -> None:
    m = ChangeModel(WEB, epoch=5000.0)
    site = SandboxSite(WEB, 80)
    urls = m.changing_urls(site.page_urls())
    cosmetic = [u for u in urls if m.page(u).cosmetic]
    real = [u for u in urls if not m.page(u).cosmetic]
    assert cosmetic and real
    t0, t1 = 5000.0, 5000.0 + 3.0  # three simulated hours
    for url in real[:40]:
        changes = m.change_times(url, t0, t1)
        assert len(changes) == m.changes_between(url, t0, t1)
        assert m.is_current(url, t0, t1) == (m.version_at(url, t0) == m.version_at(url, t1))
        if changes:
            assert m.age(url, t0, t1) == pytest.approx(t1 - changes[0])
            assert m.next_change(url, t0) == changes[0]
            assert m.last_change(url, t1) == changes[-1]
            assert m.version_at(url, changes[0]) == m.version_at(url, t0) + 1
            assert m.delays(url, [t0, t1]) == pytest.approx([t1 - c for c in changes])
        else:
            assert m.age(url, t0, t1) == 0.0
    for url in cosmetic[:10]:  # date-line changes happen, but are no real change
        assert m.changes_between(url, t0, t1 + 3600, cosmetic=True) > 0
        assert m.is_current(url, t0, t1 + 3600) and m.content_version_at(url, t1) == 0
    copies = dict.fromkeys(real[:40], t0)
    expected = sum(m.is_current(u, t0, t1) for u in real[:40]) / 40
    assert m.freshness(copies, t1) == expected and 0 < expected < 1
    assert m.mean_age(copies, t1) > 0
    assert m.version_at(real[0], 4000.0) == 0  # before the epoch: version 0


def test_same_seed_same_model_other_seed_other_model() -> None:
    urls = SandboxSite(WEB, 80).page_urls()[::4]
    a, b = ChangeModel(WEB, 100.0), ChangeModel(WEB, 100.0)
    other = ChangeModel(SandboxConfig(**{**WEB.to_dict(), "seed": 4}), 100.0)
    times = [100.0 + 3.7 * k for k in range(5)]
    assert [[a.version_at(u, t) for t in times] for u in urls] == \
        [[b.version_at(u, t) for t in times] for u in urls]
    assert [a.rate(u) for u in urls] != [other.rate(u) for u in urls]


def test_config_rejects_bad_change_settings() -> None:
    for bad in ({"change_share": 1.5}, {"wrong_lm_share": -0.1}, {"time_acceleration": 0.0},
                {"change_min_interval_s": 10.0, "change_max_interval_s": 5.0},
                {"duplicates": True}):
        with pytest.raises(ValueError):
            SandboxConfig(**{**WEB.to_dict(), **bad})


# -- the server --------------------------------------------------------------------------------
def test_server_serves_the_models_version_byte_for_byte(web: SandboxWeb) -> None:
    """Each changing page over HTTP equals the offline ChangingReplies at the request's logged
    start, and the logged version is the model's version at that time."""
    assert web.site is not None
    m = _model(web)
    offline = ChangingReplies(web.site.replies, m)
    urls = m.changing_urls(web.site.page_urls())[:30]
    seen = len(web.read_log())
    bodies = {u: _get(web, u)[2] for u in urls}
    time.sleep(0.3)  # the log is flushed every 0.1 s
    entries = {(e.host, e.path): e for e in web.read_log()[seen:]}
    versions = []
    for url in urls:
        e = entries[urlsplit(url).hostname, urlsplit(url).path]
        host, path = urlsplit(url).hostname or "", urlsplit(url).path
        assert e.version == m.version_at(url, e.start)
        want = offline.serve(host, path, web.site.respond(host, path), e.start)
        assert want[1] == e.version and want[0].body == bodies[url]
        versions.append(e.version)
    assert max(v or 0 for v in versions) > 0  # some pages served a changed version
    static = next(u for u in web.site.page_urls() if not m.page(u).changing
                  and urlsplit(u).hostname != web.site.hang_host)
    _get(web, static)
    time.sleep(0.3)
    assert web.read_log()[-1].version is None  # static pages log no version


def test_virtual_clock_serves_the_requests_time_and_only_when_configured(
        web: SandboxWeb, module_webs: SandboxWebs) -> None:
    """Under ``virtual_clock`` a page is served as the model has it at the time the request's
    header names (body, and a Date of that time); an unreadable header is answered at the
    wall clock. Control: the web without the option ignores the header."""
    virtual = module_webs.shared(dataclasses.replace(WEB, virtual_clock=True))
    assert virtual.site is not None and web.site is not None
    m = _model(virtual)
    offline = ChangingReplies(virtual.site.replies, m)
    urls = m.changing_urls(virtual.site.page_urls())[:20]
    later = [m.wall_time(sim) for sim in (86400.0, 3 * 86400.0)]
    for url in urls:
        host, path = urlsplit(url).hostname or "", urlsplit(url).path
        for t in later:
            status, headers, body = _get(virtual, url, **{CLOCK_HEADER: repr(t)})
            want, _ = offline.serve(host, path, virtual.site.respond(host, path), t)
            assert status == 200 and body == want.body, (url, t)
            assert headers["Date"] == formatdate(int(t), usegmt=True)
    moved = [u for u in urls if m.version_at(u, later[1]) != m.version_at(u, time.time() + 5)]
    assert moved  # pages whose version at the header's time is not today's
    url = moved[0]
    host, path = urlsplit(url).hostname or "", urlsplit(url).path
    for target, header in ((virtual, "soon"), (web, repr(later[1]))):
        model = _model(target)
        assert target.site is not None
        t0 = time.time()
        _, headers, body = _get(target, url, **{CLOCK_HEADER: header})
        t1 = time.time()
        now = [ChangingReplies(target.site.replies, model).serve(
            host, path, target.site.respond(host, path), t)[0].body for t in (t0, t1)]
        assert body in now, (target is web, header)
        assert abs(parsedate_to_datetime(headers["Date"]).timestamp() - t0) < 5


def test_content_change_rewrites_text_keeps_links_cosmetic_change_only_the_date() -> None:
    site = SandboxSite(WEB, 80)
    m = ChangeModel(WEB, 0.0, site.layout)
    offline = ChangingReplies(site.replies, m)
    urls = m.changing_urls(site.page_urls())
    checked = {"cosmetic": 0, "content": 0}
    for url in urls[:40]:
        host, path = urlsplit(url).hostname or "", urlsplit(url).path
        t1 = m.next_change(url, 0.0)
        t2 = m.next_change(url, t1 or 0.0)
        assert t1 is not None and t2 is not None
        base = site.respond(host, path)
        one = offline.serve(host, path, base, t1)[0].body.decode()
        two = offline.serve(host, path, base, t2)[0].body.decode()
        diff = set(one.splitlines()) ^ set(two.splitlines())
        links = [sorted(lxml.html.fromstring(b).xpath("//a/@href")) for b in (one, two)]
        assert links[0] == links[1]  # the link graph stays put
        if m.page(url).cosmetic:
            assert len(diff) == 2 and all('<p class="updated">Updated' in ln for ln in diff)
            checked["cosmetic"] += 1
        else:
            assert len(diff) > 20  # the text is new
            checked["content"] += 1
    assert all(checked.values()), checked


def test_conditional_get_304_exactly_while_current_then_200_with_the_new_body(
        web: SandboxWeb) -> None:
    m = _model(web)
    url = _pick(web, lambda u: m.validators(urlsplit(u).hostname or "").etag and
                _soon(web)(u))
    status, headers, body = _get(web, url)
    fetched, etag = time.time(), headers["ETag"]
    assert status == 200 and etag.startswith('"')
    status2, _, body2 = _get(web, url, **{"If-None-Match": etag})
    assert m.is_current(url, fetched, time.time(), cosmetic=True)
    assert status2 == 304 and body2 == b""
    changed_at = m.next_change(url, fetched)
    assert changed_at is not None
    time.sleep(max(0.0, changed_at - time.time()) + 0.05)
    status3, headers3, body3 = _get(web, url, **{"If-None-Match": etag})
    assert not m.is_current(url, fetched, time.time(), cosmetic=True)
    assert status3 == 200 and headers3["ETag"] != etag and body3 != body
    assert _get(web, url, **{"If-None-Match": headers3["ETag"]})[0] == 304


def test_if_modified_since_on_a_last_modified_only_host(web: SandboxWeb) -> None:
    m = _model(web)

    def fits(u: str) -> bool:
        v = m.validators(urlsplit(u).hostname or "")
        if v.etag or not v.last_modified or v.wrong_lm is not None or not _soon(web)(u):
            return False
        nxt, last = m.next_change(u, time.time()), m.last_change(u, time.time())
        return nxt is not None and (last is None or int(nxt) > int(last))  # new date

    url = _pick(web, fits)
    status, headers, _ = _get(web, url)
    fetched, lm = time.time(), headers["Last-Modified"]
    last = m.last_change(url, fetched)
    assert status == 200 and "ETag" not in headers
    if last is not None:  # the date of the version's start
        assert lm == formatdate(int(last), usegmt=True)
    assert _get(web, url, **{"If-Modified-Since": lm})[0] == 304
    changed_at = m.next_change(url, fetched)
    assert changed_at is not None
    time.sleep(max(0.0, changed_at - time.time()) + 0.05)
    status2, headers2, body2 = _get(web, url, **{"If-Modified-Since": lm})
    assert status2 == 200 and body2
    assert parsedate_to_datetime(headers2["Last-Modified"]) > parsedate_to_datetime(lm)


def _quiet_page_of_a_liar(m: ChangeModel, how: WrongLastModified) -> Callable[[str], bool]:
    """A page of a ``how`` liar with no change 5 s either side of now: its true date is 5 s
    old or more, and stays so through the test."""
    def ok(u: str) -> bool:
        now = time.time()
        return (m.validators(urlsplit(u).hostname or "").wrong_lm is how
                and (m.last_change(u, now) or 0.0) < now - 5
                and (m.next_change(u, now) or math.inf) > now + 5)

    return ok


def test_lying_hosts_give_wrong_dates_and_ignore_conditional_headers(web: SandboxWeb) -> None:
    m = _model(web)
    assert web.site is not None
    for how in WrongLastModified:
        url = _pick(web, _quiet_page_of_a_liar(m, how))
        host, path = urlsplit(url).hostname or "", urlsplit(url).path
        asked = time.time()
        status, headers, _ = _get(web, url)
        last = m.last_change(url, asked)
        truth = (parsedate_to_datetime(web.site.respond(host, path).last_modified or "")
                 .timestamp() if last is None else last)  # never changed: the static date
        assert status == 200 and "ETag" not in headers
        said = parsedate_to_datetime(headers["Last-Modified"]).timestamp()
        assert abs(said - truth) > 4  # a lie
        if how is WrongLastModified.NOW:
            assert abs(said - asked) <= 1.5
        else:
            assert said == WRONG_OLD_DATE
        again = _get(web, url, **{"If-Modified-Since": headers["Last-Modified"],
                                 "If-None-Match": "*"})
        assert again[0] == 200 and again[2]  # conditional headers ignored


def test_hosts_without_validators_send_none(web: SandboxWeb) -> None:
    m = _model(web)
    url = _pick(web, lambda u: (v := m.validators(urlsplit(u).hostname or "")).etag is False
                and not v.last_modified)
    status, headers, _ = _get(web, url)
    assert status == 200 and "ETag" not in headers and "Last-Modified" not in headers


def test_two_servers_same_seed_same_answers(web: SandboxWeb, module_webs: SandboxWebs
                                            ) -> None:
    """A second server given the first one's epoch serves the same bytes at the same
    versions (the first one chose its epoch when it started and reported it)."""
    assert web.site is not None and web.changes is not None
    assert 0 < time.time() - web.change_epoch < 300
    other = module_webs.fresh(SandboxConfig(**{**WEB.to_dict(),
                                              "change_epoch": web.change_epoch}))
    assert other.port != web.port and other.change_epoch == web.change_epoch
    # changed pages whose version holds through both requests (bodies carry the port in links)
    m, now = web.changes, time.time()
    urls = [u for u in m.changing_urls(web.site.page_urls()) if m.version_at(u, now) > 0
            and (m.next_change(u, now) or math.inf) > now + 3][:8]
    assert len(urls) == 8
    seen = len(web.read_log())
    for url in urls:
        (sa, _, ba), (sb, _, bb) = (_get(w, url.replace(f":{web.port}/", f":{w.port}/"))
                                    for w in (web, other))
        assert sa == sb == 200
        assert ba.replace(f":{web.port}".encode(), b"") == \
            bb.replace(f":{other.port}".encode(), b"")
    time.sleep(0.3)
    versions = [e.version for e in web.read_log()[seen:]]
    assert versions == [e.version for e in other.read_log()] and any(versions)


def test_option_off_serves_the_static_web_byte_for_byte(module_webs: SandboxWebs) -> None:
    """Every change knob turned but ``changes`` off: the server's pages and validators are
    those of the plain config's site. Negative control: with changes on they are not."""
    knobs = {"change_share": 0.9, "cosmetic_share": 0.5, "etag_share": 0.1,
             "wrong_lm_share": 0.9, "time_acceleration": 1e6, "change_min_interval_s": 1.0}
    off = module_webs.fresh(SandboxConfig(**{**PLAIN.to_dict(), **knobs}))
    plain = SandboxSite(PLAIN, off.port)
    urls = [u for u in plain.page_urls()[::17] + plain.resource_urls()[::10]
            if urlsplit(u).hostname != plain.hang_host]
    for url in urls:
        host, path = urlsplit(url).hostname or "", urlsplit(url).path
        status, headers, body = _get(off, url)
        want = plain.respond(host, path)
        assert (status, body) == (want.status, want.body), url
        assert (headers["ETag"], headers["Last-Modified"]) == (want.etag, want.last_modified)
    time.sleep(0.3)
    assert off.read_log() and all(e.version is None for e in off.read_log())
    on = SandboxConfig(**{**PLAIN.to_dict(), **knobs, "changes": True})
    changed_web = ChangingReplies(SandboxSite(on, off.port).replies,
                                  ChangeModel(on, time.time() - 3600))
    differ = [u for u in urls if changed_web.serve(
        urlsplit(u).hostname or "", urlsplit(u).path,
        plain.respond(urlsplit(u).hostname or "", urlsplit(u).path), time.time())[0].body
        != plain.respond(urlsplit(u).hostname or "", urlsplit(u).path).body]
    assert len(differ) >= len(urls) // 2
