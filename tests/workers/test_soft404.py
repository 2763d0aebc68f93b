"""workers.pipeline.soft404: probes through the real Fetcher against a loopback HTTP server."""

from __future__ import annotations

import copy
import os
import random
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from frontier.config import CrawlConfig
from frontier.useragent import user_agent
from tests.loopback import HTTPServerFactory, LoopbackServer, Reply, Request
from workers.dns.resolver import CachingResolver
from workers.fetch import Fetcher
from workers.pipeline.parse import parse_html
from workers.pipeline.soft404 import (
    PROBE_PREFIX,
    Soft404Probe,
    is_soft404,
    page_tokens,
    probe_url,
    run_probe,
    signature_of,
    similarity,
)

THRESHOLD = CrawlConfig.soft404_threshold
VECTORS = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors"))
REALPAGES = sorted((VECTORS / "realpages").glob("*.html"))
SERVED_REAL = ["guardian-1.html", "lwn-1.html", "v8-blog.html"]

CHROME = """<div class="site"><div class="top">Acme Widgets Home Products Support Blog Contact
Sign in Cart</div><div class="side">Popular: widget pro, widget mini, spare parts, manuals,
warranty, shipping information, returns policy, gift cards</div>{body}<div class="bottom">
Copyright Acme Widgets Ltd. All rights reserved. Privacy Terms Cookies Accessibility
</div></div>"""


def template(path: str) -> bytes:
    """A soft-404 page: echoes the path, a random reference and the time."""
    body = (f"<h1>Oops, page not found</h1><p>Sorry, we could not find {path} on this "
            f"server. It may have moved. Reference {secrets.token_hex(4)} at "
            f"{time.time():.0f}.</p>")
    return (f"<html><head><title>Not found - Acme</title></head><body>"
            f"{CHROME.format(body=body)}</body></html>").encode()


def real_page(name: str) -> bytes:
    words = {"widget-pro": "The widget pro has a brushed steel case, two speeds, a five year "
             "warranty and a quiet motor that suits workshops and kitchens alike.",
             "manual": "Unpack the device, fit the battery, hold the switch for three seconds "
             "until the light turns green, then pair it with the remote control unit."}
    return (f"<html><head><title>{name} - Acme</title></head><body>"
            f"{CHROME.format(body='<article><p>' + words[name] + '</p></article>')}"
            f"</body></html>").encode()


HTML = "text/html; charset=utf-8"


def respond(request: Request) -> Reply:
    """Hosts by Host header: proper.test (real 404s), soft.test (200 for every path),
    redirect.test (302 to / for missing paths), plain.test (200 text/plain)."""
    host, path = request.host, request.path
    name = path.strip("/")
    if host == "proper.test":
        if name in ("widget-pro", "manual"):
            return Reply(200, real_page(name), HTML)
        return Reply(404, b"<html><body><h1>404 Not Found</h1></body></html>", HTML)
    if host == "soft.test":
        if name in ("widget-pro", "manual"):
            return Reply(200, real_page(name), HTML)
        if name in SERVED_REAL:
            return Reply(200, (VECTORS / "realpages" / name).read_bytes(), HTML)
        return Reply(200, template(path), HTML)
    if host == "redirect.test":
        if path == "/":
            return Reply(200, real_page("manual"), HTML)
        return Reply(302, b"", HTML, (("Location", "/"),))
    if host == "plain.test":
        return Reply(200, b"nothing here " + path.encode(), "text/plain")
    return Reply(421, b"", HTML)


@pytest.fixture(scope="module")
def server(http_server: HTTPServerFactory) -> LoopbackServer:
    return http_server(respond=respond)


@pytest.fixture(scope="module")
def fetcher() -> Iterator[Fetcher]:
    static = {h: "127.0.0.1" for h in ("proper.test", "soft.test", "redirect.test",
                                       "plain.test")}
    f = Fetcher(CachingResolver(static=static, allow_private=True), user_agent(),
                allow_private=True, connect_timeout_s=2.0, read_timeout_s=5.0,
                total_timeout_s=10.0)
    yield f
    f.close()


def origin(server: LoopbackServer, host: str) -> str:
    return f"http://{host}:{server.server_address[1]}"


def page_sig(fetcher: Fetcher, url: str) -> bytes | None:
    res = fetcher.fetch(url, ip="127.0.0.1")
    assert res.status == 200, (url, res.status, res.error)
    page = parse_html(res.body, url, res.content_type)
    return signature_of(page.tree, url)


# --- pure parts -----------------------------------------------------------------------------

def test_probe_url_is_random_and_fixed_shape() -> None:
    a = probe_url("https://example.com", random.Random(1))
    assert a == probe_url("https://example.com/", random.Random(1))
    assert a.startswith("https://example.com" + PROBE_PREFIX) and a.endswith(".html")
    hexpart = a.rsplit("-", 1)[1][:-5]
    assert len(hexpart) == 16 and int(hexpart, 16) >= 0
    assert probe_url("http://e.com:8080") != probe_url("http://e.com:8080")


def test_json_round_trip_and_size() -> None:
    sig = signature_of(template("/x"), "http://soft.test/x")
    assert sig is not None and len(sig) == 4 * 64
    soft = Soft404Probe("soft.test:8080", 200, sig)
    text = soft.to_json()
    assert Soft404Probe.from_json(text) == soft and len(text) < 450
    proper = Soft404Probe("proper.test", 404)
    assert Soft404Probe.from_json(proper.to_json()) == proper
    assert len(proper.to_json()) < 60 and not proper.soft404_host and soft.soft404_host
    failed = Soft404Probe("down.test", None)
    assert Soft404Probe.from_json(failed.to_json()) == failed
    assert Soft404Probe.from_json('{"v": 99, "host": "a", "status": 200}') is None


def test_echoed_path_digits_and_ids_do_not_matter() -> None:
    probe_path = "/trawl-probe-0123456789abcdef.html"
    probe = Soft404Probe("soft.test", 200, signature_of(template(probe_path),
                                                        "http://soft.test" + probe_path))
    for path in ("/some/missing-page-42", "/2024/05/old-post/", "/a/b/c.php?id=7"):
        sig = signature_of(template(path.split("?")[0]), "http://soft.test" + path)
        assert is_soft404(probe, sig), path
    assert b"missing" not in page_tokens(template("/some/missing-page"),
                                         "http://soft.test/some/missing-page")


def test_no_signature_never_matches() -> None:
    probe = Soft404Probe("soft.test", 200, signature_of(template("/x"), "http://soft.test/x"))
    assert not is_soft404(probe, None)
    assert not is_soft404(Soft404Probe("proper.test", 404), probe.signature)
    assert signature_of(b"<html><body><script>x()</script></body></html>") is None


# --- through the fetcher, on loopback ---------------------------------------------------------

def test_host_with_real_404(server: LoopbackServer, fetcher: Fetcher) -> None:
    probe = run_probe(fetcher, origin(server, "proper.test"), "127.0.0.1")
    assert probe.status == 404 and probe.signature is None and not probe.soft404_host
    assert probe.host == f"proper.test:{server.server_address[1]}"
    sig = page_sig(fetcher, origin(server, "proper.test") + "/widget-pro")
    assert not is_soft404(probe, sig)
    hosts_paths = server.requests
    assert any(h == "proper.test" and p.startswith(PROBE_PREFIX) for h, p in hosts_paths)


def test_soft404_host(server: LoopbackServer, fetcher: Fetcher) -> None:
    base = origin(server, "soft.test")
    probe = run_probe(fetcher, base, "127.0.0.1", rng=random.Random(7))
    assert probe.status == 200 and probe.soft404_host
    probe = Soft404Probe.from_json(probe.to_json())  # as the pipeline reads it from Redis
    assert probe is not None
    # (b) made-up paths get the template: soft 404s
    for path in ("/no/such/page", "/old-category/article-123.html", "/x?y=1"):
        sig = page_sig(fetcher, base + path)
        assert is_soft404(probe, sig), (path, similarity(probe, sig))
    # (c) real paths get distinct pages in the same chrome: not soft 404s
    for path in ("/widget-pro", "/manual"):
        sig = page_sig(fetcher, base + path)
        assert not is_soft404(probe, sig), (path, similarity(probe, sig))


@pytest.mark.skipif(not REALPAGES, reason="test vectors not present")
def test_realpages_served_by_a_soft404_host(server: LoopbackServer,
                                            fetcher: Fetcher) -> None:
    base = origin(server, "soft.test")
    probe = run_probe(fetcher, base, "127.0.0.1")
    for name in SERVED_REAL:
        sig = page_sig(fetcher, f"{base}/{name}")
        assert not is_soft404(probe, sig), (name, similarity(probe, sig))


def test_redirecting_and_non_html_hosts(server: LoopbackServer, fetcher: Fetcher) -> None:
    probe = run_probe(fetcher, origin(server, "redirect.test"), "127.0.0.1")
    assert probe.status == 302 and probe.signature is None
    probe = run_probe(fetcher, origin(server, "plain.test"), "127.0.0.1")
    assert probe.status == 200 and probe.signature is None


def test_unreachable_host(fetcher: Fetcher) -> None:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    probe = run_probe(fetcher, f"http://proper.test:{port}", "127.0.0.1")
    assert probe.status is None and probe.signature is None


def test_explicit_url(server: LoopbackServer, fetcher: Fetcher) -> None:
    url = origin(server, "soft.test") + "/trawl-probe-checked-by-robots.html"
    probe = run_probe(fetcher, origin(server, "soft.test"), "127.0.0.1", url=url)
    assert probe.soft404_host
    assert ("soft.test", "/trawl-probe-checked-by-robots.html") in server.requests


# --- realpages against a template made of their own chrome -------------------------------------

def _strip_content(tree: Any, message_path: str) -> Any:
    """The page's chrome with a "not found" message instead of its content."""
    t = copy.deepcopy(tree)
    for tag in ("article", "main", "p", "h1", "h2", "h3", "ul", "ol", "table", "blockquote",
                "figure", "pre"):
        for el in list(t.iter(tag)):
            if el.getparent() is not None:
                el.getparent().remove(el)
    body = t.find(".//body")
    body = t if body is None else body
    div = etree.SubElement(body, "div")
    etree.SubElement(div, "h1").text = "Page not found"
    etree.SubElement(div, "p").text = (f"Sorry, the page {message_path} could not be found. "
                                       f"Error 404, ref {secrets.token_hex(3)}.")
    title = t.find(".//title")
    if title is not None:
        title.text = "Page not found"
    return t


@pytest.mark.skipif(not REALPAGES, reason="test vectors not present")
def test_realpages_against_their_own_chrome_template() -> None:
    """The hardest case: the template shares each page's whole frame."""
    probe_path = "/trawl-probe-00112233aabbccdd.html"
    worst_real, worst_soft = 0.0, 1.0
    for f in REALPAGES:
        url = f"https://{f.stem}.example/real/{f.stem}.html"
        tree = parse_html(f.read_bytes(), url).tree
        probe = Soft404Probe("h", 200, signature_of(_strip_content(tree, probe_path),
                                                    f"https://{f.stem}.example{probe_path}"))
        real = signature_of(tree, url)
        assert not is_soft404(probe, real), (f.name, similarity(probe, real))
        other = "/section/missing-article-2024"
        soft = signature_of(_strip_content(tree, other), f"https://{f.stem}.example{other}")
        assert is_soft404(probe, soft), (f.name, similarity(probe, soft))
        worst_real = max(worst_real, similarity(probe, real) or 0.0)
        worst_soft = min(worst_soft, similarity(probe, soft) or 0.0)
    assert worst_real < THRESHOLD <= worst_soft


def test_remove_run() -> None:
    from workers.pipeline.soft404 import _remove_run

    def toks(s: str) -> list[bytes]:
        return [x.encode() for x in s.split()]

    assert _remove_run(toks("a b c a b a b"), toks("a b")) == toks("c")
    assert _remove_run(toks("x a c a"), toks("a b")) == toks("x a c a")
    assert _remove_run(toks("a a b"), toks("a b")) == toks("a")
    assert _remove_run(toks("q"), toks("a b")) == toks("q")
