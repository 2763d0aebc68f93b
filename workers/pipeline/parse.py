"""Link extraction from fetched HTML with lxml (the hot path; BeautifulSoup only on request).

``parse_html`` never raises: broken markup, empty bodies, binary garbage and wrong encodings
give a :class:`ParsedPage` with ``error`` set and whatever links could be recovered.

Charset choice (measured on the 20 pages in ``vectors/realpages``, see bench/canon_cost.py):
we pick the encoding ourselves (BOM, then the Content-Type charset, then a ``<meta charset>``
prescan of the first 4 KiB, else UTF-8, as the HTML standard orders them) and hand the *bytes*
plus that encoding to libxml2. Letting libxml2 guess on its own decoded 3 of the 20 pages as
ISO-8859-1 (its fallback is Latin-1, not UTF-8): mojibake in titles and links. bs4's
``UnicodeDammit`` (~0.2 ms/page) and w3lib's ``html_to_unicode`` (~0.4 ms/page) detect the same
encodings on these pages but return ``str``; decoding in Python and parsing the ``str`` costs
~0.8 ms/page more than letting libxml2 decode the bytes with a given encoding. Our prescan is
a bounded regex (~1 µs/page).
"""

from __future__ import annotations

import codecs
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from frontier.memo import BoundedMemo
from frontier.useragent import ROBOTS_TOKEN
from frontier.whatwg import join_url
from workers.pipeline.flatscan import ScannedPage

__all__ = ["DEFAULT_MAX_LINKS", "Link", "ParsedPage", "extract_text", "parse_html", "soup"]

DEFAULT_MAX_LINKS = 5000

_SKIP_SCHEMES = ("javascript:", "mailto:", "tel:", "data:")
_LINK_ATTR = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}
_TAGS = ("a", "area", "frame", "iframe", "link", "base", "meta", "title")
_META_CHARSET = re.compile(
    rb"<meta\s[^>]{0,512}?charset\s*=\s*[\"']?\s*([a-zA-Z0-9_:.\-]+)", re.IGNORECASE
)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([a-zA-Z0-9_:.\-]+)", re.IGNORECASE)
# x-robots-tag directives whose value contains a colon (not an agent prefix).
_VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
_TEXT_SKIP = frozenset({"script", "style", "template"})


@dataclass
class Link:
    """An outgoing link: absolute (resolved against the page's base), not yet canonicalized.

    ``nofollow`` is true for ``rel=nofollow`` and for every link of a page whose meta robots
    or X-Robots-Tag says nofollow.
    """

    url: str
    nofollow: bool
    tag: str


@dataclass
class ParsedPage:
    links: list[Link]
    base_url: str
    title: str | None
    meta_nofollow: bool
    meta_noindex: bool
    canonical: str | None
    error: str | None
    #: Links beyond ``max_links`` were dropped (``dropped`` of them).
    truncated: bool = False
    dropped: int = 0
    encoding: str = "utf-8"
    #: The lxml root (for extract_text / user extractors); None when nothing parsed.
    tree: Any = field(default=None, repr=False, compare=False)
    body: bytes = field(default=b"", repr=False, compare=False)
    _soup: Any = field(default=None, repr=False, compare=False)


_local = threading.local()


def _parser(encoding: str) -> etree.HTMLParser:
    """One HTMLParser per (thread, encoding): lxml parsers must not be shared across threads."""
    cache: dict[str, etree.HTMLParser] | None = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    p = cache.get(encoding)
    if p is None:
        p = etree.HTMLParser(
            encoding=encoding, recover=True, no_network=True, remove_comments=True,
            remove_pis=True, huge_tree=False, default_doctype=False,
        )
        cache[encoding] = p
    return p


def _norm_encoding(name: str | bytes | None) -> str | None:
    """Python codec name for a label, with latin-1/ascii read as windows-1252 (HTML rule)."""
    if not name:
        return None
    if isinstance(name, bytes):
        name = name.decode("ascii", "replace")
    try:
        enc = codecs.lookup(name.strip().strip("\"'")).name
    except LookupError:
        return None
    if enc in ("iso8859-1", "ascii", "latin-1"):
        return "cp1252"
    return enc


def sniff_encoding(body: bytes, content_type: str | None) -> str:
    """BOM, then Content-Type charset, then <meta charset> in the first 4 KiB, else utf-8."""
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8"
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if content_type:
        m = _HEADER_CHARSET.search(content_type)
        if m:
            enc = _norm_encoding(m.group(1))
            if enc:
                return enc
    m = _META_CHARSET.search(body, 0, 4096)
    if m:
        enc = _norm_encoding(m.group(1))
        # A meta tag read as ASCII cannot truthfully declare UTF-16 (HTML standard).
        if enc and not enc.startswith("utf-16"):
            return enc
    return "utf-8"


def _robots_tokens(value: str, header: bool) -> set[str]:
    """Directives for us from a meta robots content or an X-Robots-Tag header value."""
    out: set[str] = set()
    agent: str | None = None
    for part in value.split(","):
        part = part.strip()
        if header and ":" in part:
            name, _, rest = part.partition(":")
            name = name.strip().lower()
            if name not in _VALUED:
                agent = name
                part = rest.strip()
        if agent is None or agent == ROBOTS_TOKEN:
            for tok in part.lower().split():
                out.add(tok)
    return out


def _parse_tree(body: bytes, encoding: str) -> tuple[Any, bool]:
    """(root, whether libxml2 stopped at its depth limit and dropped the rest of the page:
    flatscan.py then reads the links)."""
    try:
        parser = _parser(encoding)
    except LookupError:  # libxml2/iconv lacks this codec: decode in Python instead
        parser = None
    if parser is None:
        parser = _parser_str()
        root = etree.fromstring(body.decode(encoding, "replace").replace("\x00", "\ufffd"),
                                parser)
    else:
        root = etree.fromstring(body, parser)
    return root, any(e.type_name == "ERR_RESOURCE_LIMIT" for e in parser.error_log)


def _parser_str() -> etree.HTMLParser:
    p = getattr(_local, "str_parser", None)
    if p is None:
        p = _local.str_parser = etree.HTMLParser(recover=True, no_network=True)
    return p


def parse_html(
    body: bytes,
    url: str,
    content_type: str | None = None,
    x_robots_tag: str | list[str] | None = None,
    *,
    max_links: int = DEFAULT_MAX_LINKS,
    agent: str = ROBOTS_TOKEN,
) -> ParsedPage:
    """Extract links, title, canonical and robots directives from an HTML body. Never raises."""
    page = ParsedPage(links=[], base_url=url, title=None, meta_nofollow=False,
                      meta_noindex=False, canonical=None, error=None, body=body)
    if x_robots_tag:
        values = [x_robots_tag] if isinstance(x_robots_tag, str) else list(x_robots_tag)
        for v in values:
            toks = _robots_tokens(v, header=True)
            _apply_robots(page, toks)
    if not body or not body.strip():
        page.error = "empty body"
        return page
    try:
        page.encoding = sniff_encoding(body, content_type)
        root, too_deep = _parse_tree(body, page.encoding)
    except Exception as exc:  # lxml raises on "Document is empty" and similar
        page.error = f"unparseable: {type(exc).__name__}: {exc}"[:300]
        return page
    if root is None:
        page.error = "unparseable: no document"
        return page
    page.tree = root
    if _looks_binary(body):
        page.error = "binary content (control bytes), parsed anyway"
    try:
        if too_deep:
            page.error = ("nested deeper than libxml2's limit (256 elements): links read by a "
                          "flat scan of the tags")
            _walk(page, ScannedPage(body.decode(page.encoding, "replace"), _TAGS), url,
                  max_links, agent)
        else:
            _walk(page, root, url, max_links, agent)
    except Exception as exc:  # keep what was recovered
        page.error = f"extraction failed: {type(exc).__name__}: {exc}"[:300]
    if page.meta_nofollow:
        for link in page.links:
            link.nofollow = True
    return page


_CONTROL = bytes(c for c in range(32) if c not in (9, 10, 12, 13))


def _looks_binary(body: bytes) -> bool:
    """More than 10% C0 control bytes in the first KiB: not text, whatever the header says."""
    head = body[:1024]
    return len(head) - len(head.translate(None, _CONTROL)) > len(head) // 10


def _apply_robots(page: ParsedPage, toks: set[str]) -> None:
    if "none" in toks or "nofollow" in toks:
        page.meta_nofollow = True
    if "none" in toks or "noindex" in toks:
        page.meta_noindex = True


def _walk(page: ParsedPage, root: Any, url: str, max_links: int, agent: str) -> None:
    base = url
    parts = _BaseParts.of(base)
    base_seen = False
    links = page.links
    seen_links = 0
    for el in root.iter(_TAGS):
        tag = el.tag
        attr = _LINK_ATTR.get(tag)
        if attr is not None:
            raw = el.get(attr)
            if raw is None:
                continue
            rel = el.get("rel") if tag != "frame" and tag != "iframe" else None
            nofollow = rel is not None and "nofollow" in rel.lower().split()
        elif tag == "link":
            rel = el.get("rel")
            if rel is None or "canonical" not in rel.lower().split():
                continue
            raw = el.get("href")
            if raw is None:
                continue
            nofollow = False
        elif tag == "base":
            href = el.get("href")
            if not base_seen and href is not None:
                base_seen = True
                resolved = _resolve(href.strip(), url)
                if resolved is not None:
                    base = resolved
                    parts = _BaseParts.of(base)
                    page.base_url = resolved
            continue
        elif tag == "meta":
            name = el.get("name")
            if name is not None and name.strip().lower() in ("robots", agent):
                _apply_robots(page, _robots_tokens(el.get("content") or "", header=False))
            continue
        else:  # title
            if page.title is None and el.text is not None:
                page.title = " ".join(el.text.split()) or None
            continue
        raw = raw.strip()
        if not raw or raw[:11].lower().startswith(_SKIP_SCHEMES):
            continue
        if seen_links >= max_links and tag != "link":
            page.dropped += 1  # past the cap: not even resolved (a page of a million links)
            continue
        resolved = _resolve(raw, base, parts)
        if resolved is None:
            continue
        if tag == "link" and page.canonical is None:
            page.canonical = resolved
        if seen_links >= max_links:
            page.dropped += 1
            continue
        seen_links += 1
        links.append(Link(resolved, nofollow, tag))
    page.truncated = page.dropped > 0


#: (the part of the base a href's resolution depends on, href) -> resolved URL or None.
_RESOLVED: BoundedMemo[tuple[str, str], str | None] = BoundedMemo(100_000)


@dataclass(frozen=True, slots=True)
class _BaseParts:
    """The parts of a base URL that links resolve against, cut once per page."""

    scheme: str  # "https:"
    origin: str | None  # scheme, userinfo, host and port; None for a base without a path
    directory: str | None  # up to the last "/" of the path

    @classmethod
    def of(cls, base: str) -> _BaseParts:
        cut = base.find("/", base.find("://") + 3) if "://" in base else -1
        if cut < 0:
            return cls(base[: base.find(":") + 1], None, None)
        path = base.split("?", 1)[0].split("#", 1)[0]
        return cls(base[: base.find(":") + 1], base[:cut], path[: path.rfind("/") + 1])


def _base_part(href: str, parts: _BaseParts) -> str | None:
    """The part of the base (a WHATWG-serialized URL) that resolving ``href`` depends on, or
    None when that is the whole base (a query or fragment alone, an empty href)."""
    if not href.isprintable():
        return None  # tabs, newlines, controls: the parser drops them, which may shift meaning
    head = href[:8].lower()
    if head.startswith(("http://", "https://")):
        return ""  # absolute with an authority: the base plays no part
    if href.startswith("//"):
        return parts.scheme
    if parts.origin is None:
        return None
    if href.startswith("/"):
        return parts.origin
    if not href or href[0] in "?#" or ":" in href.split("/", 1)[0]:
        return None  # depends on the whole base, or may carry a scheme of its own
    return parts.directory


def _resolve(href: str, base: str, parts: _BaseParts | None = None) -> str | None:
    """``join_url(base, href)``, memoized: a site's navigation links recur on every page and
    resolving one costs ~2 us (issue 7's profile). The key is the href and the part of the
    base its resolution depends on, so a hit returns what ``join_url`` would. ``parts``:
    ``_BaseParts.of(base)``, for callers resolving many links against one base."""
    part = _base_part(href, parts if parts is not None else _BaseParts.of(base))
    if part is None:
        return _join(href, base)
    key = (part, href)
    try:
        return _RESOLVED[key]
    except KeyError:
        return _RESOLVED.put(key, _join(href, base))


def _join(href: str, base: str) -> str | None:
    try:
        return join_url(base, href)
    except ValueError:
        return None


def extract_text(tree_or_body: Any) -> str:
    """Visible text (no script/style/template), whitespace collapsed. Accepts a root or bytes."""
    root = tree_or_body
    if isinstance(root, ParsedPage):
        root = root.tree
    elif isinstance(root, bytes | str):
        if isinstance(root, str):
            root = root.encode("utf-8")
        if not root.strip():
            return ""
        try:
            root, _too_deep = _parse_tree(root, sniff_encoding(root, None))
        except Exception:
            return ""
    if root is None:
        return ""
    parts: list[str] = []
    for el in root.iter():
        tag = el.tag
        if isinstance(tag, str) and tag not in _TEXT_SKIP and el.text:
            parts.append(el.text)
        if el.tail:
            parts.append(el.tail)
    return " ".join(" ".join(parts).split())


def soup(page: ParsedPage) -> Any:
    """A BeautifulSoup tree of the page for user extractors, built on first use only."""
    if page._soup is None:
        from bs4 import BeautifulSoup  # imported lazily: not on the hot path

        page._soup = BeautifulSoup(page.body, "lxml", from_encoding=page.encoding)
    return page._soup
