"""The fuzzed properties, one checker per target, shared by the hypothesis tests (tests/fuzz)
and the bounded fuzz run (bench/fuzz.py), so both hold the code to the same contract.

A checker takes one generated input, runs the code under test and returns a short outcome
label (``"ok"``, ``"rejected:<reason>"``...) for the run's tallies. A broken property raises
:class:`PropertyFailed`; any other exception escaping a checker is a crash of the code under
test (the documented rejections, :class:`~frontier.urls.InvalidURL` and
:class:`~workers.fetch.order.BadMessage`, are caught here and count as outcomes).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ada_url import URL
from kombu.exceptions import DecodeError
from kombu.serialization import loads as kombu_loads
from warcio.archiveiterator import ArchiveIterator

from frontier.urls import InvalidURL, ParamStripper, canonicalize, host_of
from workers.fetch import FetchResult
from workers.fetch.order import BadMessage, FetchOrder, decode_batch
from workers.fetch.result import ROBOTS_MAX_BYTES
from workers.pipeline import parse
from workers.pipeline.parse import parse_html
from workers.pipeline.robots import RobotsPolicy
from workers.pipeline.robots_rules import _LINE_BREAK as ROBOTS_LINE_BREAK
from workers.pipeline.robots_rules import parse_rules
from workers.storage.warc import WarcWriter
from workers.storage.warc_records import stored_headers, warc_value

STRIP = ParamStripper(["jsessionid", "phpsessid", "sid"])
#: Lines every robots.txt reader must ignore (§2.1): inserting them changes no decision.
NOISE_LINES = ("X-Fuzz-Noise: /", "# a comment line", "Sitemap: https://example.com/s.xml", "")
AGENTS = ("trawl", "googlebot", "*")


class PropertyFailed(AssertionError):
    """A generated input broke a stated property (not a crash: the code returned)."""


def expect(cond: bool, what: str, *detail: object) -> None:
    if not cond:
        raise PropertyFailed(" ".join([what, *(repr(d)[:300] for d in detail)]))


# -- URL canonicalization -------------------------------------------------------------------

def check_canonical(c: str, max_length: int) -> None:
    """What every canonical URL is: http(s), ASCII without blanks or controls, no fragment,
    within ``max_length``, re-parsed by a WHATWG parser and by urllib to itself, and a fixed
    point of :func:`canonicalize` (also with session-id stripping and against any base)."""
    expect(c.startswith(("http://", "https://")), "not http(s)", c)
    expect(len(c) <= max_length, "over max_length", len(c), max_length)
    expect(c.isascii() and all(" " < ch < "\x7f" for ch in c), "blank/control/non-ASCII", c)
    expect("#" not in c, "fragment kept", c)
    parsed = URL(c)  # raises if the output does not re-parse
    expect(parsed.href == c, "WHATWG re-parse changes it", c, parsed.href)
    expect(host_of(c) == parsed.host, "host_of disagrees with the parser", c, parsed.host)
    parts = urlsplit(c)
    expect(parts.scheme in ("http", "https") and bool(parts.netloc), "urllib split", c)
    expect(canonicalize(c, max_length=max_length) == c, "not idempotent", c)
    expect(canonicalize(c, "http://other.example/x/y", max_length=max_length) == c,
           "an absolute canonical URL depends on the base", c)


def check_canonicalize(url: str, base: str | None = None, max_length: int = 2048) -> str:
    """For any str: a canonical URL (see :func:`check_canonical`) or ``InvalidURL`` with a
    reason; never another exception. Stripping session ids and sorting the query keep it
    canonical; stripping twice strips nothing more."""
    try:
        c = canonicalize(url, base, max_length=max_length)
    except InvalidURL as exc:
        expect(isinstance(exc.reason, str) and bool(exc.reason), "InvalidURL without reason")
        return "rejected:" + exc.reason.split(" ", 1)[0]
    check_canonical(c, max_length)
    try:
        stripped = canonicalize(url, base, max_length=max_length, strip=STRIP)
    except InvalidURL as exc:
        raise PropertyFailed(f"strip= rejects a URL canonicalized without it: {url!r}") from exc
    check_canonical(stripped, max_length)
    expect(canonicalize(stripped, max_length=max_length, strip=STRIP) == stripped,
           "stripping is not idempotent", stripped)
    expect(len(stripped) <= len(c), "stripping made it longer", c, stripped)
    ordered = canonicalize(url, base, max_length=max_length, sort_query=True)
    expect(canonicalize(ordered, max_length=max_length, sort_query=True) == ordered,
           "sort_query is not idempotent", ordered)
    return "ok"


# -- robots.txt ----------------------------------------------------------------------------

def _decisions(policy: RobotsPolicy, paths: Sequence[str]) -> list[Any]:
    return [(policy.allowed(p, a), policy.crawl_delay(a)) for a in AGENTS for p in paths]


def check_robots(body: bytes, paths: Sequence[str], noise_at: Sequence[int] = ()) -> str:
    """Any bytes parse (kind "parsed": the "unparseable" guard never fires); the rules answer
    any path with a bool (the matcher itself, not the policy's catch-all), ``/robots.txt``
    is always allowed, a Crawl-delay is finite and >= 0; the Redis form round-trips to the
    same decisions; and lines §2.1 says to ignore (inserted at ``noise_at``) change none."""
    policy = RobotsPolicy.from_text_bytes(body)
    expect(policy.kind == "parsed", "robots body not parsed", policy.kind, policy.reason)
    expect(policy.truncated == (len(body) > ROBOTS_MAX_BYTES), "truncated flag", len(body))
    expect(len(policy.text.encode("utf-8", "surrogatepass")) <= 3 * ROBOTS_MAX_BYTES,
           "parsed text beyond the cap")
    rules = parse_rules(policy.text)
    for agent in AGENTS:
        for path in paths:
            expect(isinstance(rules.allowed(path, agent), bool), "allowed() not a bool")
        expect(rules.allowed("/robots.txt", agent), "/robots.txt disallowed", agent)
        delay = rules.crawl_delay(agent)
        expect(delay is None or (math.isfinite(delay) and delay >= 0), "crawl delay", delay)
    before = _decisions(policy, paths)
    again = RobotsPolicy.from_bytes(policy.to_bytes())
    expect((again.kind, again.text, again.truncated) == (policy.kind, policy.text,
                                                         policy.truncated), "cache form")
    expect(_decisions(again, paths) == before, "decisions change through the cache form")
    if noise_at:
        lines = ROBOTS_LINE_BREAK.split(policy.text)  # the parser's own line split
        for i, at in enumerate(sorted(noise_at, reverse=True)):
            lines.insert(at % (len(lines) + 1), NOISE_LINES[i % len(NOISE_LINES)])
        noisy = RobotsPolicy("parsed", text="\n".join(lines),
                             _rp=parse_rules("\n".join(lines)))
        expect(_decisions(noisy, paths) == before, "ignorable lines changed a decision",
               noise_at)
    return "blocks-some" if not all(d[0] for d in before) else "allows-all"


# -- HTML link extraction ------------------------------------------------------------------

LINK_TAGS = frozenset({"a", "area", "frame", "iframe", "link"})


def check_parse(body: bytes, url: str, content_type: str | None = None,
                max_links: int = parse.DEFAULT_MAX_LINKS) -> str:
    """Any body gives a page (never an exception); at most ``max_links`` links, ``truncated``
    only when full; every link an absolute URL as a WHATWG parser serializes it; every http(s)
    link canonicalizes to a canonical URL or a reasoned ``InvalidURL``; a second parse
    (resolution memo warm) gives the same links."""
    page = parse_html(body, url, content_type, max_links=max_links)
    expect(len(page.links) <= max_links, "more links than max_links", len(page.links))
    expect(not page.truncated or len(page.links) == max_links, "truncated but not full")
    expect(page.error is None or (isinstance(page.error, str) and len(page.error) <= 300),
           "error", page.error)
    expect(page.title is None or page.title == " ".join(page.title.split()) != "",
           "title not collapsed", page.title)
    expect(page.canonical is None or isinstance(page.canonical, str), "canonical")
    URL(page.base_url)
    for link in page.links:
        expect(link.tag in LINK_TAGS and isinstance(link.nofollow, bool), "link fields", link)
        expect(not page.meta_nofollow or link.nofollow, "meta nofollow not applied", link)
        if link.url.startswith(("http://", "https://")):
            expect(URL(link.url).href == link.url, "link not serialized", link.url)
            check_canonicalize(link.url)
    again = parse_html(body, url, content_type, max_links=max_links)
    expect([(lk.url, lk.nofollow, lk.tag) for lk in again.links]
           == [(lk.url, lk.nofollow, lk.tag) for lk in page.links], "second parse differs")
    if page.error and page.error.startswith("unparseable"):
        return "unparseable"
    return "truncated" if page.truncated else ("links" if page.links else "no-links")


def check_resolve(pairs: Sequence[tuple[str, str]]) -> str:
    """The memoized link resolution answers as ``join_url`` does, whatever was memoized
    before (its key is the href and only the part of the base the href depends on). The memo
    is private to parse.py; it is called directly because no public answer tells a memo hit
    from a fresh resolution."""
    for href, base in pairs:
        memo = parse._resolve(href, base)
        expect(memo == parse._join(href, base), "memo answer differs", href, base, memo)
    return "ok"


# -- WARC writer ---------------------------------------------------------------------------

def check_warc(results: Sequence[FetchResult], directory: Path, max_bytes: int) -> str:
    """Random fetches written by :class:`WarcWriter` (rotating at ``max_bytes``) read back by
    warcio with digests checked: one warcinfo per file, then a response and its request per
    fetch with a status, in order; same payload bytes, status, URI, IP and truncation; plain
    headers as stored; each returned location seeks to its own gzip member."""
    with WarcWriter(directory, "fuzz", max_bytes=max_bytes) as writer:
        locations = [writer.write(r) for r in results]
    written = [(r, loc) for r, loc in zip(results, locations, strict=True)
               if r.status is not None]
    expect(all(loc is None for r, loc in zip(results, locations, strict=True)
               if r.status is None), "a fetch without status was written")
    records: list[tuple[str, Any, bytes]] = []
    for path in writer.files:
        with open(path, "rb") as fh:
            kinds = []
            for rec in ArchiveIterator(fh, check_digests="raise"):
                payload = rec.raw_stream.read()  # reading to the end checks the digests
                kinds.append(rec.rec_type)
                records.append((path.name, rec, payload))
        expect(kinds[:1] == ["warcinfo"] and kinds[1:] == ["response", "request"]
               * ((len(kinds) - 1) // 2), "record order", kinds)
    fetches = [(n, rec, p) for n, rec, p in records if rec.rec_type != "warcinfo"]
    expect(len(fetches) == 2 * len(written), "record count", len(fetches), len(written))
    for i, (result, loc) in enumerate(written):
        (name, resp, payload), (_, req, _) = fetches[2 * i], fetches[2 * i + 1]
        _check_response(result, resp, payload)
        rid = resp.rec_headers.get_header("WARC-Record-ID")
        expect(req.rec_headers.get_header("WARC-Concurrent-To") == rid, "request not paired")
        assert loc is not None
        expect(loc.filename == name, "location names another file", loc.filename, name)
        with open(directory / loc.filename, "rb") as fh:
            fh.seek(loc.offset)
            member = fh.read(loc.length)
        head = gzip.decompress(member)[:4096]
        expect(head.startswith(b"WARC/1.1\r\n") and rid.encode() in head,
               "location does not seek to its response record")
    return f"files:{min(len(writer.files), 3)}"


def _check_response(result: FetchResult, rec: Any, payload: bytes) -> None:
    h = rec.rec_headers
    expect(rec.digest_checker.passed is not False and not rec.digest_checker.problems,
           "digest problems", rec.digest_checker.problems)
    expect(payload == result.body, "payload differs", len(payload), len(result.body))
    uri = h.get_header("WARC-Target-URI")
    expect(uri == _as_written(result.url), "target URI", uri, result.url)
    ip = h.get_header("WARC-IP-Address")
    expect(ip == _as_written(result.ip), "IP", ip, result.ip)
    expect(h.get_header("WARC-Truncated") == result.cut_reason
           or (result.cut_reason is None and result.error == "content_type_skipped"),
           "WARC-Truncated", h.get_header("WARC-Truncated"), result.cut_reason)
    expect(rec.http_headers.get_statuscode() == str(result.status), "status",
           rec.http_headers.get_statuscode(), result.status)
    stored = stored_headers(result)
    if all(_plain_header(k, v) for k, v in stored):
        expect(rec.http_headers.headers == stored, "plain headers not kept",
               rec.http_headers.headers, stored)


def _as_written(value: str | None) -> str | None:
    """A WARC header value as the writer puts it (lone surrogates, which no fetched URL or
    IP has, backslash-escaped) and warcio reads it back."""
    if not value:
        return None
    return warc_value(value).encode("utf-8", "backslashreplace").decode("utf-8")


_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _plain_header(name: str, value: str) -> bool:
    """A header a server may send as is: token name, printable ASCII value, no edge blanks."""
    return (bool(name) and set(name) <= _TCHAR and value.isascii() and value.isprintable()
            and value == value.strip())


# -- task messages -------------------------------------------------------------------------

def as_received(value: Any) -> Any:
    """``value`` as the task receives it: through JSON (NaN and Infinity included, as
    Python's json writes them), which e.g. joins a surrogate pair into one character."""
    return json.loads(json.dumps(value))


def check_order(msg: Any) -> str:
    """Any JSON value: a :class:`FetchOrder` whose fields are typed and in range and whose
    JSON form decodes back to an equal order, or :class:`BadMessage`; nothing else."""
    msg = as_received(msg)
    try:
        order = FetchOrder.from_json(msg)
    except BadMessage as exc:
        expect(bool(str(exc)) and len(str(exc)) <= 300, "BadMessage text", str(exc))
        return "rejected"
    lease = order.lease
    entry = lease.entry
    expect(isinstance(lease.partition, int) and lease.partition >= 0, "partition", lease)
    expect(isinstance(lease.lease_id, str) and isinstance(lease.host, str), "ids", lease)
    expect(all(isinstance(n, int) and n >= 0 for n in (entry.depth, entry.attempts,
                                                        entry.hops)), "entry numbers", entry)
    expect(isinstance(lease.score, float) and math.isfinite(lease.score), "score", lease)
    expect(order.ip is None or isinstance(order.ip, str), "ip", order.ip)
    wire = json.loads(json.dumps(order.to_json(), allow_nan=False))
    expect(FetchOrder.from_json(wire) == order, "JSON round trip", order)
    return "accepted"


def check_batch(batch: Any) -> str:
    """The task's batch: each element an order or one counted rejection; a batch that is not
    a list is one rejection, not an exception in the task."""
    batch = as_received(batch)
    orders, bad = decode_batch(batch)
    size = len(batch) if isinstance(batch, list) else 1
    expect(len(orders) + len(bad) == size, "orders + rejections != batch", size)
    expect(all(isinstance(b, BadMessage) for b in bad), "rejection type")
    return "some-accepted" if orders else "all-rejected"


def check_body(raw: bytes) -> str:
    """Arbitrary bytes as a JSON task body: kombu's decoder (what Celery runs, accepting
    JSON only) gives a value or raises ``DecodeError``, which Celery's consumer acks away
    (``on_decode_error``), or hands an empty body over as it is; a value's batch goes
    through :func:`check_batch`."""
    try:
        payload = kombu_loads(raw, "application/json", "utf-8", accept={"application/json"})
    except DecodeError:
        return "undecodable"
    if isinstance(payload, bytes):  # an empty body: kombu hands it over undecoded
        expect(payload == b"" == raw, "undecoded non-empty body", raw)
        return "empty"
    args = payload[0] if isinstance(payload, list) and payload else None
    check_batch(args[0] if isinstance(args, list) and args else payload)
    return "decoded"
