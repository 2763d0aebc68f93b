"""Request preparation: the URL and headers exactly as the requests-based fetcher sent them.

Why byte-for-byte requests' behaviour: the crawl's stored URLs, WARC request records and the
servers' view of us did not change when the fetcher dropped requests for plain urllib3
(``tests/workers/test_fetch.py`` compares against ``requests.PreparedRequest`` on thousands of
URLs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import quote, urlparse, urlsplit, urlunparse

import urllib3.util


class _BadURL(ValueError):
    pass


class _BadEscape(ValueError):
    pass


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
#: requote_uri leaves a URL made only of these unchanged (no "%": escapes may be rewritten)
_REQUOTE_IDENTITY = re.compile(r"[A-Za-z0-9_.\-~!#$&'()*+,/:;=?@\[\]]*")
_HEADER_NAME = re.compile(r"^[^:\s][^:\r\n]*$")
_HEADER_VALUE = re.compile(r"^\S[^\r\n]*$|^$")


def _unquote_unreserved(uri: str) -> str:
    """requests.utils.unquote_unreserved: decode %XX escapes of unreserved characters only."""
    parts = uri.split("%")
    for i in range(1, len(parts)):
        h = parts[i][0:2]
        if len(h) == 2 and h.isalnum():
            try:
                c = chr(int(h, 16))
            except ValueError:
                raise _BadEscape(h) from None
            if c in _UNRESERVED:
                parts[i] = c + parts[i][2:]
            else:
                parts[i] = f"%{parts[i]}"
        else:
            parts[i] = f"%{parts[i]}"
    return "".join(parts)


def _requote_uri(uri: str) -> str:
    """requests.utils.requote_uri: normalize escapes, quote what is illegal, keep the rest."""
    if _REQUOTE_IDENTITY.fullmatch(uri):
        return uri
    try:
        return quote(_unquote_unreserved(uri), safe="!#$%&'()*+,/:;=?@[]~")
    except _BadEscape:
        return quote(uri, safe="!#$&'()*+,/:;=?@[]~")


class _Target(NamedTuple):
    scheme: str
    host: str  #: as in the URL (IPv6 in brackets): Host header, SNI, certificate name
    port: int | None
    path: str  #: request target: path and query


#: An http(s) URL that urllib3's parse_url and requests' requote leave as it is: lower-case
#: scheme and ASCII host, no userinfo, no leading-zero port, path/query only of characters
#: neither quotes, no "%" and no fragment. (Dot segments are checked apart.)
_SIMPLE_URL = re.compile(
    r"(https?)://([a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*)(?::([1-9][0-9]{0,4}))?"
    r"(/[A-Za-z0-9\-._~!$&'()*+,;=:@/]*)?(?:\?([A-Za-z0-9\-._~!$&'()*+,;=:@/?]*))?"
)


def _prepare_url(url: str) -> _Target:
    """:func:`_prepare_url_full`, without the parsing work for URLs it would not change."""
    m = _SIMPLE_URL.fullmatch(url)
    if m is not None:
        scheme, host, port_s, path, query = m.groups()
        port = int(port_s) if port_s else None
        if (port is None or port <= 65535) and (path is None or "/." not in path):
            path = path or "/"
            return _Target(scheme, host, port, f"{path}?{query}" if query else path)
    return _prepare_url_full(url)


def _prepare_url_full(url: str) -> _Target:
    """The URL as requests prepared it (``PreparedRequest.prepare_url`` then ``path_url``).

    urllib3's ``parse_url`` normalizes (scheme/host case, IDNA, dot segments, invalid
    characters), then requests re-quotes the whole URL; raises :class:`_BadURL` or
    ``LocationParseError`` for what requests refused.
    """
    u = url.lstrip()
    p = urllib3.util.parse_url(u)
    if not p.scheme:
        raise _BadURL(
            f"Invalid URL {u!r}: No scheme supplied. Perhaps you meant https://{u}?"
        )
    if p.scheme not in ("http", "https"):
        raise _BadURL(f"not an absolute http(s) URL: {url!r}")
    if not p.host:
        raise _BadURL(f"Invalid URL {u!r}: No host supplied")
    if p.host.startswith(("*", ".")):
        raise _BadURL("URL has an invalid label.")
    netloc = f"{p.auth}@{p.host}" if p.auth else p.host
    if p.port:
        netloc += f":{p.port}"
    prepared = urlunparse((p.scheme, netloc, p.path or "/", "", p.query, p.fragment))
    requoted = _requote_uri(prepared)
    p = urllib3.util.parse_url(requoted)  # the host and port we used came from the final URL
    if p.scheme not in ("http", "https") or not p.host:
        raise _BadURL(f"not an absolute http(s) URL: {url!r}")
    s = urlsplit(requoted)
    path = s.path or "/"
    return _Target(p.scheme, p.host, p.port, f"{path}?{s.query}" if s.query else path)


def _check_header(name: str, value: str) -> None:
    """requests' check_header_validity: a bad extra header is the caller's bug, raised."""
    if not isinstance(name, str) or not _HEADER_NAME.match(name):
        raise ValueError(f"Invalid leading whitespace, reserved character(s), or return "
                         f"character(s) in header name: {name!r}")
    if not isinstance(value, str) or not _HEADER_VALUE.match(value):
        raise ValueError(f"Invalid leading whitespace, reserved character(s), or return "
                         f"character(s) in header value: {value!r}")


def _merge_headers(headers: dict[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """``headers`` updated with ``extra``, case-insensitively, as requests' headers did.

    A name given again keeps its first position but takes the new spelling and value.
    """
    merged: dict[str, tuple[str, str]] = {k.lower(): (k, v) for k, v in headers.items()}
    for k, v in extra.items():
        merged[k.lower()] = (k, v)
    for k, v in merged.values():
        _check_header(k, v)
    return dict(merged.values())


def _redirect_location_error(location: str) -> Exception | None:
    """The exception requests' redirect resolution raised for this Location, if any.

    With ``allow_redirects=False`` requests still resolved the next hop of a redirect (to fill
    ``Response.next``); a Location that is not UTF-8 (after the latin-1 round trip) or that
    ``urlparse`` rejects made the whole fetch fail as ``fetch_error``. Kept as it was.
    """
    try:
        loc = location.encode("latin1").decode("utf8")
        if loc.startswith("//"):
            loc = "http:" + loc
        parsed = urlparse(loc)
        parsed.geturl()
    except (UnicodeError, ValueError) as e:
        return e
    return None


def _hostname(url: str) -> str | None:
    try:
        return (urlsplit(url).hostname or "").lower() or None
    except ValueError:
        return None
