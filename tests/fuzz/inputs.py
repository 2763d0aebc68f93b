"""Generated inputs for the fuzz targets, from a ``random.Random``: the hypothesis tests draw
one from ``st.randoms()`` (so a failure replays and partly shrinks), bench/fuzz.py from one
seeded generator (so a run of 100,000 inputs is the same run every time).

Hand-written rather than a grammar library: the interesting inputs are small twists of real
ones (a URL with a stray ``%``, a real page with its tags nested 5,000 deep), which a few
pools of pieces and mutations reach faster than a generic grammar would.
"""

from __future__ import annotations

import os
import random
from functools import cache
from pathlib import Path
from typing import Any

from workers.fetch import FetchResult
from workers.fetch.result import ERROR_CLASSES, TRUNCATIONS

VECTORS = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors"))
PAGES_DIR = VECTORS / "realpages"
ROBOTS_DIR = VECTORS / "robots_real"

SCHEMES = ("http", "https", "HTTP", "hTtPs", "ftp", "javascript", "mailto", "data", "file",
           "ws", "", "h\ttp", "tel", "web+x")
SEPARATORS = ("://", ":", ":/", ":\\\\", "//", ":///", ":\t//", "://\n", ":////", "")
HOSTS = ("example.com", "EXAMPLE.com.", "a.b.c.d.e", "xn--nxasmq6b.com", "ex\u00e4mple.de",
         "\u0430pple.com", "127.0.0.1", "0x7f.1", "2130706433", "[::1]", "[fe80::1%25eth0]",
         "[::ffff:127.0.0.1]", "localhost", "..", ".", "a..b", "%41.com", "ex%00ample.com",
         "", "x" * 64 + ".com", ("a" * 63 + ".") * 5 + "com", "\u2603.net", "ß.de",
         "1.2.3.256", "[", "]", "host_name.com", "-lead.com", "xn--.com", "\uff21.com")
PORTS = ("", ":", ":80", ":443", ":8080", ":0", ":65535", ":65536", ":-1", ":abc", ":0080")
USERINFO = ("", "user@", "user:pass@", ":@", "@", "a@b@", "us%40er@", "\u00fc:\u00e4@")
SEGMENTS = ("a", "..", ".", "%2e", "%2E%2e", "\\", "%", "%4", "%41", "%7e", "%2F", "%ZZ",
            " ", "\u00e9", "\u4e2d\u6587", "\ud83d\ude00", "a;jsessionid=ABC", ";sid=1", "|",
            "{x}", "^", "`", "\x00", "\t", "\n", "*", "$", "index.html", "%C3%A9", "%FF")
QUERIES = ("", "?", "?a=1", "?b=2&a=1", "?a=1&a=2", "?sid=9&x=1", "?JSESSIONID=1", "?q=a b",
           "?%", "?&&", "?x=\u00e9", "?a=%7e", "?#", "?q='\"<>", "?" + "k=v&" * 20)
FRAGMENTS = ("", "#", "#top", "#a b", "#\u00e9", "##")


def _pick(rng: random.Random, pool: tuple[str, ...]) -> str:
    return pool[rng.randrange(len(pool))]


def random_text(rng: random.Random, n: int) -> str:
    """Any code points, surrogates and controls included (weighted to ASCII)."""
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.6:
            out.append(chr(rng.randrange(0x20, 0x7F)))
        elif r < 0.7:
            out.append(chr(rng.randrange(0, 0x20)))
        elif r < 0.8:
            out.append(chr(rng.randrange(0xD800, 0xE000)))  # lone surrogates
        else:
            out.append(chr(rng.randrange(0x80, 0x110000)))
    return "".join(out)


def random_url(rng: random.Random) -> str:
    """A URL from pools of odd pieces, sometimes with a random edit or as random text."""
    if rng.random() < 0.1:
        return random_text(rng, rng.randrange(40))
    parts = [_pick(rng, SCHEMES), _pick(rng, SEPARATORS), _pick(rng, USERINFO),
             _pick(rng, HOSTS), _pick(rng, PORTS)]
    if rng.random() < 0.2:  # a relative reference
        parts = [_pick(rng, ("", "/", "//", "./", "../", "?", "#", "\\\\", " "))]
    for _ in range(rng.randrange(5)):
        parts.append("/" + _pick(rng, SEGMENTS))
    parts += [_pick(rng, QUERIES), _pick(rng, FRAGMENTS)]
    url = "".join(parts)
    if rng.random() < 0.2:
        at = rng.randrange(len(url) + 1)
        url = url[:at] + random_text(rng, rng.randrange(1, 6)) + url[at:]
    if rng.random() < 0.03:
        url += "/" + "p" * rng.choice((2000, 2100, 8200))
    return url


def random_base(rng: random.Random) -> str | None:
    """A page URL links are resolved against: None, or an http(s) URL as the crawl has them."""
    if rng.random() < 0.3:
        return None
    host = rng.choice(("example.com", "a.example:8080", "xn--bcher-kva.example", "10.0.0.1"))
    path = rng.choice(("/", "/dir/page.html", "/a/b/", "/x?y=1", "/%7Ea/"))
    return f"{rng.choice(('http', 'https'))}://{host}{path}"


# -- robots.txt ----------------------------------------------------------------------------

ROBOTS_KEYS = ("User-agent", "user-agent", "USERAGENT", "User agent", "Allow", "Disallow",
               "disallow", "Dissallow", "Crawl-delay", "crawl delay", "Sitemap", "Foo", "")
AGENT_VALUES = ("*", "trawl", "Trawl/1.0", "TRAWL BOT", "googlebot", "*bot", "tra", " ",
                "\u00fcbot", "")
DELAYS = ("5", "0.5", "-1", "nan", "inf", "1e308", "1e309", "abc", "", "10 # c", "0x10")


def random_robots(rng: random.Random) -> bytes:
    """A robots.txt: random bytes, a real file mutated, or lines from pools of odd pieces."""
    r = rng.random()
    if r < 0.15:
        return rng.randbytes(rng.randrange(300))
    if r < 0.35 and real_robots():
        return mutate(rng, rng.choice(real_robots()), real_robots(), links=False)
    lines = []
    for _ in range(rng.randrange(1, 30)):
        key = _pick(rng, ROBOTS_KEYS)
        if key.lower().startswith("user"):
            value = _pick(rng, AGENT_VALUES)
        elif "delay" in key.lower():
            value = _pick(rng, DELAYS)
        else:
            value = random_path(rng)
        sep = _pick(rng, (":", ": ", " :", "", "  : \t"))
        lines.append(f"{key}{sep}{value}" + _pick(rng, ("", "", " # note", "#", "\x00")))
    text = _pick(rng, ("\n", "\r\n", "\r", "\n\n")).join(lines)
    data = text.encode(rng.choice(("utf-8", "utf-8", "utf-16", "latin-1")), "replace")
    if rng.random() < 0.1:
        data = b"\xef\xbb\xbf" + data
    if rng.random() < 0.02:  # over the 500 KiB parse cap
        data = data * (520_000 // max(1, len(data)) + 1)
    return data


def random_path(rng: random.Random) -> str:
    parts = [_pick(rng, ("/", "", "*", "/*", "?", "$"))]
    for _ in range(rng.randrange(4)):
        parts.append(_pick(rng, SEGMENTS) + _pick(rng, ("", "/", "*", "$", "?", "*$")))
    return "".join(parts)


def random_paths(rng: random.Random, n: int = 6) -> list[str]:
    return [random_path(rng) if rng.random() < 0.5 else random_url(rng) for _ in range(n)]


# -- HTML ----------------------------------------------------------------------------------

@cache
def real_pages() -> tuple[bytes, ...]:
    return tuple(p.read_bytes() for p in sorted(PAGES_DIR.glob("*.html")))


@cache
def real_robots() -> tuple[bytes, ...]:
    return tuple(p.read_bytes() for p in sorted(ROBOTS_DIR.iterdir()) if p.is_file()) \
        if ROBOTS_DIR.is_dir() else ()


LINK_ELEMENTS = ("<a href=\"{}\">x</a>", "<a href='{}' rel='nofollow'>", "<area href={}>",
                 "<iframe src=\"{}\"></iframe>", "<frame src=\"{}\">", "<base href=\"{}\">",
                 "<link rel=canonical href=\"{}\">", "<a href=\"{}\"", "<a\x00href=\"{}\">")
NOISE = ("<meta name=robots content=nofollow>", "<meta charset=\"{}\">", "<title> t\n i </title>",
         "<!--", "-->", "<![CDATA[", "<script>", "</script>", "<svg><a xlink:href='/s'>",
         "\x00", "\xef\xbb\xbf", "<?xml version='1.0'?>", "<!DOCTYPE html>", "&#0;", "&amp",
         "</html>", "<html>", "<body>", "<table><tr><td>", "<form>", "<select>", "</a>")
CHARSETS = ("utf-8", "utf-16", "iso-8859-1", "shift_jis", "cp500", "x-unknown", "utf-7",
            "gb18030", "koi8-r", "\"'", "utf-16be")


def link_element(rng: random.Random) -> bytes:
    el = _pick(rng, LINK_ELEMENTS).format(random_url(rng).replace('"', "&quot;"))
    return el.encode("utf-8", "surrogatepass" if rng.random() < 0.05 else "replace")


def noise_element(rng: random.Random) -> bytes:
    return _pick(rng, NOISE).format(_pick(rng, CHARSETS)).encode("utf-8")


def random_html(rng: random.Random) -> bytes:
    """Random bytes, a small page from link/noise pieces, or a real page mutated."""
    r = rng.random()
    if r < 0.2:
        return rng.randbytes(rng.randrange(2000))
    if r < 0.5 or not real_pages():
        return b"".join(link_element(rng) if rng.random() < 0.5 else noise_element(rng)
                        for _ in range(rng.randrange(1, 60)))
    return mutate(rng, rng.choice(real_pages()), real_pages())


def mutate(rng: random.Random, data: bytes, pool: tuple[bytes, ...], links: bool = True,
           rounds: int | None = None) -> bytes:
    """A few random edits: byte flips, random bytes, deletions, truncations, splices from
    another document of ``pool``, duplicated slices, deep tag nesting, hostile links."""
    out = bytearray(data)
    for _ in range(rounds if rounds is not None else rng.randrange(1, 6)):
        n = len(out)
        at = rng.randrange(n + 1)
        op = rng.randrange(9 if links else 6)
        if op == 0 and n:  # flip bytes
            for _ in range(rng.randrange(1, 20)):
                i = rng.randrange(n)
                out[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[at:at] = rng.randbytes(rng.randrange(1, 64))
        elif op == 2:
            del out[at:at + rng.randrange(1, 4096)]
        elif op == 3:
            del out[at:]
        elif op == 4 and pool:  # splice a slice of another document
            other = rng.choice(pool)
            start = rng.randrange(len(other) + 1)
            out[at:at] = other[start:start + rng.randrange(1, 8192)]
        elif op == 5:
            out[at:at] = out[at:at + rng.randrange(1, 2048)] * rng.randrange(1, 4)
        elif op == 6:  # deep nesting, closed or not
            depth = rng.choice((10, 300, 5000, 20_000))
            tag = _pick(rng, ("div", "a href=/n", "table", "b", "span", "ul><li"))
            opened = f"<{tag}>".encode() * depth
            closed = f"</{tag.split()[0]}>".encode() * (depth if rng.random() < 0.5 else 0)
            out[at:at] = opened + link_element(rng) + closed
        elif op == 7:
            out[at:at] = b"".join(link_element(rng) for _ in range(rng.randrange(1, 40)))
        else:
            out[at:at] = noise_element(rng)
    return bytes(out)


CONTENT_TYPES = (None, "text/html", "text/html; charset=utf-8", "text/html; charset=utf-16",
                 "text/html;charset=\"shift_jis\"", "text/html; charset=bogus",
                 "application/xhtml+xml", "text/html; charset=cp1252; charset=utf-8")


# -- WARC records --------------------------------------------------------------------------

HEADER_NAMES = ("Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding",
                "Set-Cookie", "Location", "X-Robots-Tag", "Server", "ETag", "Link")
HEADER_VALUES = ("text/html", "gzip", "chunked", "identity", "0", "12", "a=1; Path=/",
                 "W/\"x\"", "", "  padded  ", "v\r\n folded", "\u00e9t\u00e9",
                 "attachment; filename=\u00e9.txt", "\x00\x7f", "\ud800", "a\rb", "a\nb")


def random_headers(rng: random.Random) -> list[tuple[str, str]]:
    headers = []
    for _ in range(rng.randrange(12)):
        if rng.random() < 0.8:
            name = _pick(rng, HEADER_NAMES)
            value = _pick(rng, HEADER_VALUES) if rng.random() < 0.7 else random_text(rng, 20)
        else:
            name, value = random_text(rng, rng.randrange(12)), random_text(rng, 30)
        headers.append((name, value))
    return headers


def fetched_url(rng: random.Random) -> str:
    """A URL a fetch can have: the fetcher only sends http(s) URLs (canonical ones, but the
    rest of it is left odd here), and warcio reads a response's HTTP head only under them."""
    rest = random_url(rng)
    return rng.choice(("http://", "https://")) + rest.split("://", 1)[-1].lstrip(":/")


def random_fetch(rng: random.Random) -> FetchResult:
    """A fetch as a hostile server (and redirect) could leave it; ``status=None`` sometimes."""
    r = rng.random()
    body = (rng.randbytes(rng.randrange(3000)) if r < 0.7 else
            b"" if r < 0.8 else rng.choice(real_pages() or (b"<html>",))[: rng.randrange(200_000)])
    truncated = rng.random() < 0.2
    return FetchResult(
        url=fetched_url(rng),
        ip=rng.choice((None, "203.0.113.9", "2001:db8::1", random_text(rng, 8))),
        status=None if rng.random() < 0.05 else rng.choice((200, 200, 301, 404, 500, 999,
                                                             100, rng.randrange(100, 1000))),
        reason=rng.choice(("OK", "", "Not Found", random_text(rng, 15))),
        headers=random_headers(rng), body=body,
        error=rng.choice((None, None, *ERROR_CLASSES)),
        truncated=truncated,
        truncation=rng.choice((None, *TRUNCATIONS)) if truncated else None,
        request_headers=random_headers(rng),
        http_version=rng.choice(("HTTP/1.1", "HTTP/1.0")),
        started_at=rng.choice((0.0, rng.uniform(0, 4.1e9), 1_765_000_000.999_999_7)),
    )


# -- task messages -------------------------------------------------------------------------

def random_json(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value Python's decoder can return (big ints, NaN/Infinity included)."""
    r = rng.randrange(10 if depth < 3 else 7)
    if r == 0:
        return None
    if r == 1:
        return rng.choice((True, False))
    if r == 2:
        return rng.choice((0, -1, 1, 2**63, -(2**64), 10**400, rng.randrange(-1000, 1000)))
    if r == 3:
        return rng.choice((0.5, -0.0, 1e308, float("inf"), float("-inf"), float("nan"), 1e-320))
    if r in (4, 5, 6):
        return rng.choice(("", "0 http://a/", "1.2.3 http://a/", "x", "-1 u", "1.-1.0 u",
                           "\u0661 u", "1_0 u", "9" * 30 + " u", random_text(rng, 12)))
    if r in (7, 8):
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(8))]
    return {random_text(rng, 4): random_json(rng, depth + 1) for _ in range(rng.randrange(4))}


def random_order(rng: random.Random) -> Any:
    """A valid fetch order with one or two fields replaced by random JSON, or random JSON."""
    if rng.random() < 0.2:
        return random_json(rng)
    msg: list[Any] = [random_url(rng), rng.randrange(64), f"L{rng.randrange(10**6)}",
                      rng.choice(("example.com", "a.example:8080")),
                      f"{rng.randrange(5)}.{rng.randrange(3)}.{rng.randrange(3)} http://x/",
                      rng.choice((None, "203.0.113.9")), rng.uniform(-5, 5)]
    del msg[rng.randrange(5, 8):]
    for _ in range(rng.randrange(3)):
        msg[rng.randrange(len(msg))] = random_json(rng)
    return msg
