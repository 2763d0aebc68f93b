"""The hostile web's cases: one host per way a server, a page or the network can be hostile
(what each does: :mod:`sandbox.hostile_wire` and :mod:`sandbox.hostile_pages`)."""

from __future__ import annotations

from .hostile import Case
from .hostile_pages import (
    BINARY_HTML,
    IDN,
    INVALID_CHARSET,
    LYING_META,
    MIXED_CHARSET,
    ODD_SCHEMES,
    base_elsewhere,
    deep_nesting,
    long_urls,
    million_links,
    ordinary,
    redirect_chain,
    redirect_loop,
    redirect_private,
    robots_binary,
    robots_elsewhere,
    robots_endless,
    robots_huge,
    robots_private,
    with_secret_link,
)
from .hostile_wire import (
    brotli_bomb_page,
    chunked_bad,
    chunked_cut,
    deflate_bomb_page,
    double_gzip_page,
    endless,
    gzip_bomb_page,
    gzip_broken,
    hang,
    huge_header,
    huge_page,
    length_long,
    length_short,
    many_headers,
    no_status_code,
    reset_mid_body,
    slow_body,
    slowloris,
    status_999,
    status_garbage,
)

#: Families, in the order the docs table lists them.
FAMILIES = ("slow", "body", "encoding", "head", "charset", "html", "links", "redirect",
            "robots", "tls", "network", "dns")


#: Every case but those that lead to a private address.
CASES = (
    Case("slowloris", "slow", slowloris, "slowloris: the head at a byte per second"),
    Case("slow-body", "slow", slow_body, "a body at a byte per second"),
    Case("endless", "slow", endless, "a body that never ends (chunked)"),
    Case("huge-page", "body", huge_page, "a 100 MB page"),
    Case("length-short", "body", length_short, "Content-Length lies: longer than sent"),
    Case("length-long", "body", length_long, "Content-Length lies: shorter than sent"),
    Case("chunked-bad", "body", chunked_bad, "broken chunked encoding: bad chunk size"),
    Case("chunked-cut", "body", chunked_cut, "broken chunked encoding: no last chunk"),
    Case("gzip-bomb", "encoding", gzip_bomb_page, "gzip bomb (100 MB in 100 KB)"),
    Case("deflate-bomb", "encoding", deflate_bomb_page, "deflate bomb (100 MB)"),
    Case("gzip-double", "encoding", double_gzip_page, "gzip, gzip bomb (100 MB in a few KB)"),
    Case("brotli-bomb", "encoding", brotli_bomb_page, "brotli bomb (100 MB in 158 bytes)"),
    Case("gzip-broken", "encoding", gzip_broken, "Content-Encoding gzip, body not gzip"),
    Case("huge-header", "head", huge_header, "a 1 MB header"),
    Case("many-headers", "head", many_headers, "10,000 headers"),
    Case("status-garbage", "head", status_garbage, "invalid status line (not HTTP)"),
    Case("status-nocode", "head", no_status_code, "invalid status line (no code)"),
    Case("status-999", "head", status_999, "status 999"),
    Case("charset-invalid", "charset", INVALID_CHARSET, "unknown charset in Content-Type"),
    Case("charset-mixed", "charset", MIXED_CHARSET, "UTF-8 and Latin-1 bytes mixed"),
    Case("meta-lies", "charset", LYING_META, "a lying meta charset (utf-16)"),
    Case("binary-html", "charset", BINARY_HTML, "binary served as text/html"),
    Case("deep-nesting", "html", deep_nesting, "100,000 nested <div>s, a link inside"),
    Case("million-links", "html", million_links, "a page with a million links"),
    Case("base-other", "links", base_elsewhere, "<base> to another host",
         aliases=("base-target",)),
    Case("odd-schemes", "links", ODD_SCHEMES, "javascript:/data:/mailto:/tel: links"),
    Case("long-urls", "links", long_urls, "extremely long URLs and host names"),
    Case("idn", "links", IDN, "IDN homographs"),
    Case("redirect-loop", "redirect", redirect_loop, "a redirect loop"),
    Case("redirect-chain", "redirect", redirect_chain, "a 50-hop redirect chain"),
    Case("robots-huge", "robots", with_secret_link, "a 100 MB robots.txt",
         robots=robots_huge),
    Case("robots-binary", "robots", ordinary, "a binary robots.txt", robots=robots_binary),
    Case("robots-endless", "robots", ordinary, "a robots.txt that never ends",
         robots=robots_endless),
    Case("robots-other", "robots", ordinary, "robots.txt redirects to another host",
         robots=robots_elsewhere, aliases=("robots-target",)),
    Case("tls-ok", "tls", ordinary, "TLS: a good certificate (control)", tls="ok"),
    Case("tls-self-signed", "tls", ordinary, "TLS: self-signed", tls="self_signed"),
    Case("tls-expired", "tls", ordinary, "TLS: expired", tls="expired"),
    Case("tls-wrong-host", "tls", ordinary, "TLS: wrong host name", tls="wrong_host"),
    Case("reset", "network", reset_mid_body, "connection reset mid-body"),
    Case("hang", "network", hang, "accepts and never answers"),
    Case("refused", "network", ordinary, "connection refused (nothing listens)",
         port=1),
    Case("dns-nxdomain", "dns", ordinary, "DNS fails: NXDOMAIN", dns="nxdomain"),
    Case("dns-servfail", "dns", ordinary, "DNS fails: SERVFAIL", dns="servfail"),
    Case("dns-timeout", "dns", ordinary, "DNS times out", dns="hang"),
)
#: The cases that lead to a private address: a crawl that cannot refuse those while it
#: fetches loopback must leave them out.
PRIVATE_CASES = (
        Case("redirect-private", "redirect", redirect_private,
             "a redirect to a private IP (a name for 169.254.169.254)"),
        Case("robots-private", "robots", ordinary,
             "robots.txt redirects to a private IP", robots=robots_private),
        Case("dns-private", "dns", ordinary, "DNS answers a private address (10.0.0.7)",
             dns="10.0.0.7"),
)


def cases(private: bool = True) -> list[Case]:
    """Every case; ``private=False`` without :data:`PRIVATE_CASES`."""
    return [*CASES, *(PRIVATE_CASES if private else ())]
