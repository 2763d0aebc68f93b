"""Opt-in sitemaps for the sandbox web (SandboxConfig.sitemaps): every allow-all host declares
``/sitemap.xml`` in its robots.txt; the sitemap (XML, as most sites serve it) lists the host's
pages and one page nothing links to, ``/orphan.html``, so a crawler reaches that page only
through the sitemap. Off: the web is byte-identical to the one without this option.
"""

from __future__ import annotations

from html import escape

from .layout import Layout
from .pages import small_html
from .robots import RobotsKind

SITEMAP_PATH = "/sitemap.xml"
ORPHAN_PATH = "/orphan.html"
SITEMAP_TYPE = "application/xml"


def has_sitemap(layout: Layout, host: str) -> bool:
    """A host that declares a sitemap: its robots.txt allows everything."""
    return layout.robots.get(host) is RobotsKind.ALLOW_ALL


def sitemap_urls(layout: Layout, origin: str, host: str) -> list[str]:
    """What the host's sitemap lists: its pages (in path order) and its orphan page."""
    return [origin + path for path in sorted(layout.page_of[host])] + [origin + ORPHAN_PATH]


def robots_line(origin: str) -> bytes:
    return f"Sitemap: {origin}{SITEMAP_PATH}\n".encode()


def sitemap_body(urls: list[str]) -> bytes:
    entries = "".join(f"<url><loc>{escape(u)}</loc></url>" for u in urls)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{entries}</urlset>\n").encode()


def orphan_body(host: str) -> bytes:
    return small_html(f"{host}: listed only in the sitemap",
                      "No page links here; a crawler that reads sitemaps finds it.")
