"""Sitemaps (sitemaps.org protocol) as a seed source: the ``Sitemap:`` lines of robots.txt,
sitemap index files and sitemaps in XML, gzipped XML or text.

A sitemap is an ordinary crawl URL of its host: admitted like any link (scope, the URL-seen
test), leased under the host's politeness and robots.txt, fetched under the fetcher's body cap.
What differs is the reading of its body (:func:`parse_sitemap`): its ``<loc>`` URLs are
admitted as links, an index's children as further sitemaps.

Depth rule: a sitemap named in robots.txt is admitted at depth 0 (it is a seed); the URLs a
sitemap lists, pages or child sitemaps, at the sitemap's depth + 1. An index at depth
``SITEMAP_MAX_NESTING`` or more has its children counted, not admitted: an index that nests
endlessly (or names itself under ever new URLs) stops there.

Why not ultimate-sitemap-parser: it does its own fetching, and its parse-from-string path
reads the whole document with no cap on URLs kept nor on the inflated size of a gzipped
file. Here the body is inflated with ``max_length`` (a gzip bomb costs at most
``SITEMAP_MAX_BYTES``) and read by lxml's pull parser in chunks, elements cleared as they end,
with entities not resolved, no network and no DTD accepted (defusedxml's protections).

The caps are module constants from the protocol, not settings: 50,000 URLs and 50 MB
uncompressed per file.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from lxml import etree

from frontier.records import Entry
from frontier.urls import host_of
from workers.fetch import FetchResult
from workers.pipeline.links import add_link
from workers.pipeline.result import LeaseResult
from workers.pipeline.robots import RobotsPolicy, robots_sitemaps
from workers.pipeline.services import PipelineServices

log = logging.getLogger(__name__)

#: The protocol's caps per file: URLs kept, bytes after gzip inflation.
SITEMAP_MAX_URLS = 50_000
SITEMAP_MAX_BYTES = 50 * 1024 * 1024
#: Index levels followed: an index at this depth or deeper has its children counted only.
SITEMAP_MAX_NESTING = 3
#: Media types a sitemap comes as (these must be in ``allowed_content_types`` to be fetched).
XML_TYPES = frozenset({"application/xml", "text/xml"})
GZIP_TYPES = frozenset({"application/gzip", "application/x-gzip"})
SITEMAP_TYPES = XML_TYPES | GZIP_TYPES | {"text/plain"}
_CHUNK = 64 * 1024
_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@dataclass
class Sitemap:
    """What one sitemap file listed (up to the caps) and why it was cut or skipped."""

    #: "urlset", "index" or "text"
    kind: str
    #: (URL, lastmod or None), in file order
    locs: list[tuple[str, str | None]] = field(default_factory=list)
    #: entries past SITEMAP_MAX_URLS, counted not kept
    dropped: int = 0
    #: "max_urls", "max_bytes" or None
    cut: str | None = None
    #: malformed XML, a DTD: the reason (entries before it are kept)
    error: str | None = None


class _Inflated:
    """A body in chunks of at most 64 KiB, gunzipped as it is read, SITEMAP_MAX_BYTES in all:
    never whole in memory (a gzip bomb costs a chunk at a time, then stops at the cap)."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.over = False

    def __iter__(self) -> Iterator[bytes]:
        body, left = self.body, SITEMAP_MAX_BYTES
        if not body.startswith(b"\x1f\x8b"):
            for i in range(0, min(len(body), left), _CHUNK):
                yield body[i:min(i + _CHUNK, left)]
            self.over = len(body) > left
            return
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        data = body
        while left > 0:
            try:
                out = d.decompress(data, min(_CHUNK, left))
            except zlib.error:
                raise ValueError("bad gzip data") from None
            data = d.unconsumed_tail
            if not out:
                return
            left -= len(out)
            yield out
        self.over = bool(data) or not d.eof


#: A last path segment named like a sitemap (sitemap.xml, sitemap_index.xml.gz, post-sitemap2.txt):
#: how an index's children are named by convention, though no robots.txt line declares them.
_SITEMAP_NAME = re.compile(r"sitemap[^/]*\.(?:xml|txt)(?:\.gz)?$", re.IGNORECASE)


def fetch_as_sitemap(url: str, robots: RobotsPolicy | None) -> bool:
    """Read the body whatever its media type: ``allowed_content_types`` (HTML and text by
    default) is about pages, and a sitemap is XML or gzip. True for a URL its host's
    robots.txt declares, or one named like a sitemap; :func:`is_sitemap` still decides on
    the body (its type and root), and ``max_body_bytes`` caps it like any fetch."""
    if robots is not None and url in robots.sitemaps():
        return True
    return _SITEMAP_NAME.search(url.partition("?")[0]) is not None


def is_sitemap(res: FetchResult, url: str, robots: RobotsPolicy | None) -> bool:
    """Worth reading as a sitemap: named in its host's robots.txt (any sitemap type), or
    XML/gzip whose root is ``<urlset>``/``<sitemapindex>`` (an index's children, sitemaps
    linked from pages). An HTML page costs one set lookup."""
    content_type, body = res.content_type, res.body
    if content_type not in SITEMAP_TYPES or not body:
        return False
    if robots is not None and url in robots.sitemaps():
        return True
    if content_type == "text/plain":
        return False
    head = body[:4096]
    if head.startswith(b"\x1f\x8b"):
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(body[:_CHUNK], 4096)
        except zlib.error:
            return False
    return b"<urlset" in head or b"<sitemapindex" in head


def parse_sitemap(body: bytes, content_type: str | None) -> Sitemap:
    """Read one sitemap body (never raises; what went wrong is ``error``)."""
    chunks = _Inflated(body)
    try:
        it = iter(chunks)
        first = next(it, b"")
        rest = _prepend(first, it)
        if content_type == "text/plain" or first[:1024].lstrip()[:1] != b"<":
            sm = _parse_text(rest)
        else:
            sm = _parse_xml(first, rest, chunks)
    except ValueError as exc:  # bad gzip data
        return Sitemap("unknown", error=str(exc))
    if chunks.over and sm.cut is None:
        sm.cut = "max_bytes"
    return sm


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _parse_text(chunks: Iterable[bytes]) -> Sitemap:
    sm = Sitemap("text")
    tail = b""
    for chunk in _with_end(chunks):
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for raw in lines:
            line = raw.strip().decode("utf-8", "replace")
            if not line.startswith(("http://", "https://")):
                continue
            if len(sm.locs) < SITEMAP_MAX_URLS:
                sm.locs.append((line, None))
            else:
                sm.dropped += 1
                sm.cut = "max_urls"
        if len(tail) > _CHUNK:  # no URL is this long: a line of garbage
            tail = b""
    return sm


def _with_end(chunks: Iterable[bytes]) -> Iterator[bytes]:
    yield from chunks
    yield b"\n"


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _parse_xml(first: bytes, chunks: Iterable[bytes], source: _Inflated) -> Sitemap:
    sm = Sitemap("urlset")
    head = first.upper()
    if b"<!DOCTYPE" in head or b"<!ENTITY" in head:
        sm.error = "DTD not allowed in a sitemap"
        return sm
    parser = etree.XMLPullParser(events=("start", "end"), resolve_entities=False,
                                 no_network=True, load_dtd=False, huge_tree=False)
    entry_tag = "url"
    depth = 0
    try:
        for chunk in chunks:
            parser.feed(chunk)
            for event, elem in parser.read_events():
                name = _local(elem.tag)
                if event == "start":
                    depth += 1
                    if depth == 1:
                        if name == "sitemapindex":
                            sm.kind, entry_tag = "index", "sitemap"
                        elif name != "urlset":
                            sm.error = f"root element <{name}> is not a sitemap"
                            return sm
                    continue
                depth -= 1
                if depth != 1:  # inside an entry (read with it) or the root's end
                    continue
                if name == entry_tag:
                    if len(sm.locs) < SITEMAP_MAX_URLS:
                        loc = elem.findtext(f"{_NS}loc") or elem.findtext("loc")
                        mod = elem.findtext(f"{_NS}lastmod") or elem.findtext("lastmod")
                        if loc and loc.strip():
                            sm.locs.append((loc.strip(), mod.strip() if mod else None))
                    else:
                        sm.dropped += 1
                        sm.cut = "max_urls"
                # keep memory flat: every child of the root, entry or not, is dropped once
                # read (a file of millions of unknown elements builds no tree)
                parent = elem.getparent()
                elem.clear()
                if parent is not None:
                    parent.remove(elem)
        if not source.over:  # a file cut at the byte cap ends unclosed: that is the cut
            parser.close()
    except etree.XMLSyntaxError as exc:
        sm.error = f"malformed XML: {exc}"[:300]
    return sm


#: lastmod of each listed URL, for the revisit work: a Redis hash per host
#: (``Keys.sitemap_lastmod``, URL -> lastmod) kept this long after its last write.
LASTMOD_TTL_S = 30 * 24 * 3600


def read_sitemap(ctx: PipelineServices, result: LeaseResult, entry: Entry, res: FetchResult
                 ) -> dict[str, object]:
    """A fetched sitemap read (:func:`parse_sitemap`) and its URLs admitted; record fields."""
    return admit_sitemap(ctx, result, entry, parse_sitemap(res.body, res.content_type))


def admit_sitemap(ctx: PipelineServices, result: LeaseResult, entry: Entry, sm: Sitemap
                  ) -> dict[str, object]:
    """Admit what ``sm`` lists as links of depth ``entry.depth + 1`` (scope, robots and
    politeness apply to them as to any link); keep their lastmod; count every cut and skip.
    Returns the fields of the sitemap's record."""
    counters = result.counters
    counters["sitemaps_read"] += 1
    fields: dict[str, object] = {"sitemap": sm.kind, "sitemap_urls": len(sm.locs)}
    if sm.error:
        counters["sitemap_errors"] += 1
        fields["sitemap_error"] = sm.error
        log.info("sitemap %s: %s", entry.url, sm.error)
    if sm.cut:
        if sm.cut == "max_urls":
            counters["sitemap_cut_urls"] += 1
        else:
            counters["sitemap_cut_bytes"] += 1
        fields["sitemap_cut"] = sm.cut
        fields["sitemap_dropped"] = sm.dropped
        counters["sitemap_urls_dropped"] += sm.dropped
        log.info("sitemap %s cut (%s): %d entries not kept", entry.url, sm.cut, sm.dropped)
    if sm.kind == "index" and entry.depth >= SITEMAP_MAX_NESTING:
        counters["sitemap_cut_nesting"] += 1
        counters["sitemap_urls_dropped"] += len(sm.locs)
        fields["sitemap_cut"] = "max_nesting"
        fields["sitemap_dropped"] = len(sm.locs)
        log.info("sitemap index %s at depth %d: its %d children not followed", entry.url,
                 entry.depth, len(sm.locs))
        return fields
    template = Entry("", entry.depth + 1, 0, 0)
    lastmods: dict[str, dict[str, str]] = {}
    admitted = 0
    for loc, mod in sm.locs:
        url = add_link(ctx, result, loc, template, base=entry.url)
        if url is None:
            continue
        admitted += 1
        if mod:
            lastmods.setdefault(host_of(url), {})[url] = mod[:64]
    counters["sitemap_links"] += admitted
    fields["sitemap_admitted"] = admitted
    if lastmods:
        _store_lastmods(ctx, lastmods)
    return fields


def _store_lastmods(ctx: PipelineServices, lastmods: dict[str, dict[str, str]]) -> None:
    frontier = ctx.hosts.frontier  # the pipeline's one handle on Redis
    try:
        pipe = frontier.r.pipeline(transaction=False)
        for host, mods in lastmods.items():
            key = frontier.keys.sitemap_lastmod(frontier.partition(host), host)
            pipe.hset(key, mapping=mods)
            pipe.expire(key, LASTMOD_TTL_S)
        pipe.execute()
    except Exception as exc:  # Redis away: the URLs are admitted all the same
        log.warning("sitemap lastmod not stored: %s", exc)


def admit_robots_sitemaps(ctx: PipelineServices, result: LeaseResult, text: str) -> None:
    """The ``Sitemap:`` lines of a robots.txt, admitted as depth-0 links (seeds)."""
    for url in robots_sitemaps(text):
        if add_link(ctx, result, url, Entry("", 0, 0, 0)) is not None:
            result.counters["sitemaps_from_robots"] += 1
