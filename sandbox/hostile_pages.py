"""The hostile web's pages: charsets, HTML that is too deep or too wide, links that should
not be followed, redirects that loop or never end, robots.txt files that are huge, binary,
endless or elsewhere. Every link out of the crawl's scope points to ``elsewhere.example``.
"""

from __future__ import annotations

import asyncio
import random

from .hostile import DOMAIN, Conn, Handler
from .hostile_wire import ELSEWHERE, MB, PAGE, html


def _page(body: bytes, ctype: str = "text/html") -> Handler:
    async def handle(conn: Conn) -> None:
        await conn.reply("200 OK", body, ctype)
    return handle


INVALID_CHARSET = _page(html("<a href='/charset-ok'>ok</a>"), "text/html; charset=x-no-such")
MIXED_CHARSET = _page(
    "<html><head><meta charset='utf-8'><title>caf\u00e9</title></head><body>".encode()
    + "<p>na\u00efve caf\u00e9 </p>".encode("latin-1") + "<p>\u2603 \u00e9</p>".encode()
    + b"<p>\x81\x8d\x8f\x90\x9d\xff\xfe</p><a href='/mixed-ok'>ok</a></body></html>")
LYING_META = _page(
    b"<html><head><meta charset='utf-16'><meta http-equiv='Content-Type' content='text/html;"
    b" charset=windows-1251'></head><body><a href='/meta-ok'>ok</a></body></html>")
BINARY_HTML = _page(random.Random(21).randbytes(200_000))


async def deep_nesting(conn: Conn) -> None:
    """100,000 nested ``<div>``s with a link at the bottom."""
    if conn.path != "/":
        await conn.reply("200 OK", PAGE)
        return
    depth = 100_000
    await conn.reply("200 OK", b"<html><body>" + b"<div>" * depth + b"<a href='/deep-link'>"
                     b"deep</a>" + b"</div>" * depth + b"</body></html>")


async def million_links(conn: Conn) -> None:
    """A million links (out of scope: the page's base is elsewhere), 15 MB."""
    head = f"<html><head><base href='{ELSEWHERE}/'></head><body>".encode()
    links = b"".join(b"<a href=%d>l</a>" % i for i in range(1_000_000))
    await conn.reply("200 OK", head + links + b"</body></html>")


async def base_elsewhere(conn: Conn) -> None:
    """``<base>`` pointing to another host of this web: relative links go there."""
    if conn.host.startswith("base-target."):
        await conn.reply("200 OK", PAGE)
        return
    target = conn.origin(conn.host.replace("base-other.", "base-target.", 1))
    await conn.reply("200 OK", html(f"<base href='{target}/'><a href='from-base'>rel</a>"))


ODD_SCHEMES = _page(html(
    "<a href='javascript:alert(1)'>js</a><a href='JaVaScRiPt:void(0)'>js2</a>"
    "<a href='data:text/html,<a href=/evil>x</a>'>data</a><a href='mailto:a@b.example'>m</a>"
    "<a href='tel:+15555550100'>t</a><a href='vbscript:x'>vb</a><a href='/schemes-ok'>ok</a>"))


def _long_urls() -> bytes:
    long_path = "/" + "p" * 100_000
    long_host = ".".join(["a" * 63] * 5) + ".hostile.test"
    long_label = "b" * 300 + ".hostile.test"
    return html(f"<a href='{long_path}'>long path</a><a href='/q?{'x=1&' * 1000}'>long q</a>"
                f"<a href='http://{long_host}/'>long host</a>"
                f"<a href='http://{long_label}/'>long label</a><a href='/long-ok'>ok</a>")


async def long_urls(conn: Conn) -> None:
    await conn.reply("200 OK", _long_urls())


#: Cyrillic letters that look like Latin ones: "hоstile.test" (о U+043E), "аpple.example".
IDN = _page(html("<a href='http://h\u043estile.test/'>homograph of the crawl's domain</a>"
                 "<a href='http://\u0430pple.example/'>homograph</a>"
                 "<a href='http://xn--80ak6aa92e.com/'>punycode</a><a href='/idn-ok'>ok</a>"))


# -- redirects -----------------------------------------------------------------------------
def _redirect(location: str) -> bytes:
    return f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n" \
           f"Connection: close\r\n\r\n".encode()


async def redirect_private(conn: Conn) -> None:
    """A redirect to a host of the crawl's domain that resolves to the cloud metadata
    address (a crawl maps ``metadata.hostile.test`` to 169.254.169.254)."""
    await conn.send(_redirect(f"http://metadata.{DOMAIN}/latest/meta-data/"))


async def redirect_loop(conn: Conn) -> None:
    """``/`` -> ``/loop-a`` -> ``/loop-b`` -> ``/`` ..."""
    nxt = {"/": "/loop-a", "/loop-a": "/loop-b"}.get(conn.path, "/")
    await conn.send(_redirect(nxt))


async def redirect_chain(conn: Conn) -> None:
    """``/`` -> ``/hop/1`` -> ... -> ``/hop/50`` -> a page."""
    n = int(conn.path.rsplit("/", 1)[1]) if conn.path.startswith("/hop/") else 0
    if n >= 50:
        await conn.reply("200 OK", PAGE)
    else:
        await conn.send(_redirect(f"/hop/{n + 1}"))


# -- robots.txt ----------------------------------------------------------------------------
async def robots_huge(conn: Conn) -> None:
    """A 100 MB robots.txt: one rule, then comments."""
    size = 100 * MB
    await conn.head("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(size))])
    await conn.send(b"User-agent: *\nDisallow: /secret\n")
    await conn.stream(b"# a comment line of a very long robots.txt\n" * 1000, size)


async def robots_binary(conn: Conn) -> None:
    await conn.reply("200 OK", random.Random(7).randbytes(50_000), "text/plain")


async def robots_endless(conn: Conn) -> None:
    """A robots.txt that never ends: a byte a second."""
    await conn.head("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "100000")])
    await conn.send(b"User-agent: *\n")
    while True:
        await asyncio.sleep(1.0)
        await conn.send(b"#")


async def robots_elsewhere(conn: Conn) -> None:
    """robots.txt redirects to another host of this web, whose robots.txt disallows all."""
    if conn.host.startswith("robots-target."):
        await conn.reply("200 OK", b"User-agent: *\nDisallow: /\n", "text/plain")
    else:
        target = conn.origin(conn.host.replace("robots-other.", "robots-target.", 1))
        await conn.send(_redirect(f"{target}/robots.txt"))


async def robots_private(conn: Conn) -> None:
    """robots.txt redirects to the cloud metadata address."""
    await conn.send(_redirect("http://169.254.169.254/robots.txt"))


async def with_secret_link(conn: Conn) -> None:
    await conn.reply("200 OK", html("<a href='/secret'>disallowed</a><a href='/open'>ok</a>"))


async def ordinary(conn: Conn) -> None:
    await conn.reply("200 OK", PAGE)
