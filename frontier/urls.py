"""URL canonicalization for the link path: one function, one set of rules.

Every link a worker extracts goes through :func:`canonicalize` before the URL filter and the
Bloom URL-seen test, so two spellings of one resource must give one string, and the string must
still fetch the same resource. The rules, in order:

1. **Resolve** ``url`` against ``base`` with a WHATWG URL parser (ada-url, C++). This is what
   browsers do, so it is what page authors test against; Python's ``urljoin`` is RFC 3986 and
   differs on backslashes, tabs/newlines, ``http:foo`` forms, IPv4 shorthands, IDNA, etc.
   The WHATWG parser already: strips leading/trailing C0 controls and spaces, removes tab/CR/LF,
   lowercases scheme and host, maps the host through IDNA/UTS #46 to punycode, normalizes IPv4
   (``0x7f.1`` -> ``127.0.0.1``), removes the default port (80/443), keeps other ports, removes
   dot segments (also ``%2e`` forms), turns ``\\`` into ``/`` in the path, makes an empty path
   ``/`` and percent-encodes what must be encoded (non-ASCII as UTF-8, spaces, ``"<>`` ...).
2. **Scheme**: only ``http`` and ``https``; anything else raises :class:`InvalidURL`.
3. **Host**: trailing dots are stripped (``example.com.`` -> ``example.com``); an empty host
   raises :class:`InvalidURL`, and so does a name DNS cannot carry (RFC 1035: over 253
   characters, or a label over 63), which could never resolve.
4. **Percent-encoding** (RFC 3986 §6.2.2): escapes of unreserved characters
   (``A-Z a-z 0-9 - . _ ~``) are decoded, other escapes get uppercase hex, a ``%`` not followed by
   two hex digits becomes ``%25``, and the few ASCII characters WHATWG leaves raw but RFC 3986
   forbids (``^ | ` { } \\`` and spaces/quotes in the query) are encoded.
5. **Fragment** dropped: it never reaches the server.
6. **Query kept in its order.** Sorting query arguments (w3lib does it for Scrapy's request
   fingerprints) merges distinct resources on servers where the order matters (positional
   arguments, repeated keys such as ``?a=1&a=2``, signed URLs whose signature covers the raw
   query). A crawler that fetches the canonical URL must not change what it asks for, so
   ``sort_query=True`` exists only as an opt-in for de-duplication keys.
7. **Session ids** (opt-in, ``strip=ParamStripper(names)``): query parameters whose key is one
   of ``names`` (case-insensitive; ``CrawlConfig.session_id_params``) are removed, the rest of
   the query kept exactly and in order (a query left empty loses its ``?``), and so are
   ``;name=value`` path parameters (``/a;jsessionid=ABC?x=1`` -> ``/a?x=1``). A session id
   makes one page an endless family of URLs, and the server ignores a stale or missing one.
   Runs after rule 4, so ``%73id`` is ``sid`` by then; costs nothing for a URL with no ``?``
   and no ``;``.
8. **Length**: a result longer than ``max_length`` (default 2048) raises :class:`InvalidURL`;
   longer URLs are nearly always traps or garbage, and many servers refuse them anyway.

Userinfo (``user:pass@``) is kept as WHATWG serializes it. The same rules and the measured
suite results are in ``docs/canonicalization.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from frontier.whatwg import join_url, normalize_url

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "InvalidURL",
    "ParamStripper",
    "canonicalize",
    "finish_href",
    "host_of",
]

DEFAULT_MAX_LENGTH = 2048


class InvalidURL(ValueError):
    """A link that cannot become a crawlable URL; ``reason`` says why (for metrics/logs)."""

    def __init__(self, reason: str, url: str = "") -> None:
        super().__init__(f"{reason}: {url[:200]!r}" if url else reason)
        self.reason = reason
        self.url = url


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Only escapes that change: lowercase hex, unreserved characters, or a stray "%".
_PCT = re.compile(
    r"%(?:([0-9A-Fa-f][a-f]|[a-f][0-9A-Fa-f]|2[DEde]|3[0-9]|4[1-9A-Fa-f]|5[0-9AaFf]"
    r"|6[1-9A-Fa-f]|7[0-9AaEe])|(?![0-9A-Fa-f]{2}))"
)
# ASCII characters WHATWG leaves raw in path/query that RFC 3986 does not allow there.
#: A "." or ".." path segment (what stripping ";sid=x" from "..;sid=x" can leave behind).
_DOT_SEGMENT = re.compile(r"/\.\.?(?=/|$)")
_RAW = re.compile(r"[\^|`{}\\ \"<>]")
_RAW_TABLE = str.maketrans({c: f"%{ord(c):02X}" for c in "^|`{}\\ \"<>"})
_EMPTY_HOST = re.compile(r"^[\x00-\x20]*https?:[/\\\t\n\r]*(?:[?#]|$)", re.IGNORECASE)
_SCHEME = re.compile(r"^[\x00-\x20]*([A-Za-z][A-Za-z0-9+.\-]*):")


def _pct(m: re.Match[str]) -> str:
    hx = m.group(1)
    if hx is None:
        return "%25"
    c = chr(int(hx, 16))
    if c in _UNRESERVED:
        return c
    return "%" + hx.upper()


class ParamStripper:
    """Removes session-id query parameters and ``;name=value`` path parameters by name.

    Build it once per worker (``ParamStripper(cfg.session_id_params)``) and pass it to
    :func:`canonicalize` as ``strip=``; the names are matched case-insensitively.
    """

    __slots__ = ("_names", "_path_param", "_query_key")

    def __init__(self, names: Iterable[str]) -> None:
        self._names = frozenset(n.lower() for n in names if n)
        alt = "|".join(sorted((re.escape(n) for n in self._names), key=len, reverse=True))
        # Never matches anything when no names are given.
        alt = alt or "(?!)"
        self._path_param = re.compile(f";(?:{alt})=[^;/?]*", re.IGNORECASE)
        # Searched in "&" + the lowercased query: a literal first character and no IGNORECASE
        # make it ~3x faster (serialized URLs are ASCII, so lowercasing keeps positions).
        self._query_key = re.compile(f"&(?:{alt})(?=[=&]|$)")

    @property
    def names(self) -> frozenset[str]:
        return self._names

    def __call__(self, rest: str) -> str:
        """``rest``: the path and query of a serialized URL (from its first ``/``)."""
        q = rest.find("?")
        if q < 0:
            return self._path_param.sub("", rest) if ";" in rest else rest
        path = rest[:q]
        if ";" in path:
            path = self._path_param.sub("", path)
        query = rest[q + 1 :]
        if self._query_key.search("&" + query.lower()):
            names = self._names
            kept = [item for item in query.split("&")
                    if item.partition("=")[0].lower() not in names]
            return path + "?" + "&".join(kept) if kept else path
        return path + "?" + query if len(path) != q else rest


def finish_href(href: str, sort_query: bool = False,
                strip: ParamStripper | None = None) -> str:
    """Apply rules 2-7 to a WHATWG-serialized http(s) href (output of the parser).

    Split out so tests can apply our extra steps to the WHATWG suite's expected hrefs.
    """
    if href.startswith("https://"):
        start = 8
    elif href.startswith("http://"):
        start = 7
    else:
        scheme = href.split(":", 1)[0]
        raise InvalidURL(f"unsupported scheme {scheme!r}", href)
    hash_at = href.find("#")
    if hash_at >= 0:
        href = href[:hash_at]
    slash = href.find("/", start)
    if slash < 0:  # not produced by the parser for special schemes, but be safe
        href += "/"
        slash = len(href) - 1
    netloc = href[start:slash]
    if "." in netloc:
        at = netloc.rfind("@") + 1
        hostport = netloc[at:]
        if not hostport.startswith("["):
            host, colon, port = hostport.partition(":")
            if host.endswith("."):
                host = host.rstrip(".")
                if not host:
                    raise InvalidURL("empty host", href)
                netloc = netloc[:at] + host + colon + port
                href = href[:start] + netloc + href[slash:]
                slash = start + len(netloc)
    if len(netloc) > 63:  # a label over 63 needs a netloc over 63: short ones skip this
        _check_host_length(netloc, href)
    rest = href[slash:]
    if "%" in rest and _PCT.search(rest):
        rest = _PCT.sub(_pct, rest)
    if _RAW.search(rest):
        rest = rest.translate(_RAW_TABLE)
    if strip is not None and ("?" in rest or ";" in rest):
        stripped = strip(rest)
        if stripped != rest and _DOT_SEGMENT.search(stripped.partition("?")[0]):
            # "/..;jsessionid=x/" stripped leaves "/../", which a parser resolves: parse again
            # so the canonical URL stays a fixed point (found by tests/fuzz)
            return finish_href(normalize_url(href[:slash] + stripped), sort_query, strip)
        rest = stripped
    if sort_query and "?" in rest:
        path, _, query = rest.partition("?")
        rest = path + "?" + "&".join(sorted(query.split("&")))
    return href[:slash] + rest


def _check_host_length(netloc: str, href: str) -> None:
    """Raise InvalidURL for a host name over 253 characters or with a label over 63: DNS
    cannot carry it, so it is a bad link, not a host to queue and fail to resolve."""
    hostport = netloc[netloc.rfind("@") + 1:]
    if hostport.startswith("["):
        return
    host = hostport.partition(":")[0]
    if len(host) > 253 or any(len(label) > 63 for label in host.split(".")):
        raise InvalidURL("host name too long", href)


def canonicalize(
    url: str,
    base: str | None = None,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    sort_query: bool = False,
    strip: ParamStripper | None = None,
) -> str:
    """Resolve ``url`` against ``base`` and return the canonical http(s) URL.

    ``strip`` removes session-id parameters (rule 7); None keeps every parameter.
    Raises :class:`InvalidURL` (with ``reason``) for anything that is not crawlable.
    """
    if len(url) > 4 * max_length:  # don't even parse obvious garbage
        raise InvalidURL("too long", url)
    try:
        href = join_url(base, url) if base else normalize_url(url)
    except ValueError:
        raise InvalidURL(_diagnose(url, base), url) from None
    href = finish_href(href, sort_query, strip)
    if len(href) > max_length:
        raise InvalidURL("too long", href)
    return href


def _diagnose(url: str, base: str | None) -> str:
    """A short reason for a parser failure (only on the error path, so it may be slow)."""
    if _EMPTY_HOST.match(url):
        return "empty host"
    m = _SCHEME.match(url)
    if m and m.group(1).lower() not in ("http", "https"):
        return f"unsupported scheme {m.group(1).lower()!r}"
    if not m and not base:
        return "relative URL without base"
    return "unparseable URL"


def host_of(canonical_url: str) -> str:
    """The politeness key ``host[:port]`` of an already-canonical URL (no parsing; userinfo
    dropped). Every host of the crawl is this one: queues, records, dedup's mirror hosts."""
    start = canonical_url.find("://") + 3
    end = canonical_url.find("/", start)
    netloc = canonical_url[start:] if end < 0 else canonical_url[start:end]
    at = netloc.rfind("@")
    if at >= 0:
        netloc = netloc[at + 1 :]
    return netloc.lower()
