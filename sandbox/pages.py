"""Renders a PageSpec to realistic HTML bytes (10–60 KB) and the small fixed bodies."""

from __future__ import annotations

import math
from html import escape
from random import Random

from .graph import Link, PageSpec
from .layout import rng_for
from .text import Vocabulary

_AVG_PARAGRAPH = 700


def _anchor(lk: Link) -> str:
    rel = ' rel="nofollow"' if lk.nofollow else ""
    return f'<a href="{escape(lk.href)}"{rel}>{escape(lk.text)}</a>'


def render_page(spec: PageSpec, vocab: Vocabulary, seed: int, version: int = 0) -> bytes:
    """The page's HTML: head, header and nav, then paragraphs of text with the body links
    spread through them up to the spec's size, then maps, frames, images and the footer.
    ``version`` > 0 (the changing web): other text, the same links."""
    head, top, tail = _head(spec), _top(spec), _tail(spec)
    fixed = sum(map(len, head)) + sum(map(len, top)) + sum(map(len, tail))
    body = [lk for lk in spec.links if lk.section == "body" and lk.tag == "a"]
    text = (rng_for(seed, "text", spec.host, spec.page_id, "v", version) if version
            else rng_for(seed, "text", spec.host, spec.page_id))
    middle = _middle(spec, vocab, text, body, fixed)
    return "".join(head + top + middle + tail).encode()


def _head(spec: PageSpec) -> list[str]:
    head = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f"<title>{escape(spec.title)}</title>\n",
    ]
    if spec.base_href:
        head.append(f'<base href="{escape(spec.base_href)}">\n')
    if spec.meta_robots:
        head.append(f'<meta name="robots" content="{spec.meta_robots}">\n')
    for lk in spec.links:
        if lk.tag == "canonical":
            head.append(f'<link rel="canonical" href="{escape(lk.href)}">\n')
        elif lk.tag == "stylesheet":
            head.append(f'<link rel="stylesheet" href="{escape(lk.href)}">\n')
    head.append('</head>\n<body>\n<a id="top"></a>\n')
    return head


def _top(spec: PageSpec) -> list[str]:
    top = [f"<header>\n<h1>{escape(spec.title)}</h1>\n<nav><ul>\n"]
    top += [f"<li>{_anchor(lk)}</li>\n" for lk in spec.links if lk.section == "nav"]
    top.append("</ul></nav>\n</header>\n<main>\n")
    return top


def _tail(spec: PageSpec) -> list[str]:
    areas = [lk for lk in spec.links if lk.tag == "area"]
    tail = []
    if areas:
        tail.append('<img src="/img/pic-0.png" usemap="#m" alt="map">\n<map name="m">\n')
        for i, lk in enumerate(areas):
            rel = ' rel="nofollow"' if lk.nofollow else ""
            tail.append(f'<area shape="rect" coords="0,0,{10 * (i + 1)},10"'
                        f' href="{escape(lk.href)}"{rel} alt="{escape(lk.text)}">\n')
        tail.append("</map>\n")
    tail += [f'<iframe src="{escape(lk.href)}" title="{escape(lk.text)}"></iframe>\n'
             for lk in spec.links if lk.tag == "iframe"]
    tail += [f'<img src="{escape(lk.href)}" alt="{escape(lk.text)}">\n'
             for lk in spec.links if lk.tag == "img"]
    tail.append("</main>\n<footer>\n<p>")
    tail += [_anchor(lk) + " " for lk in spec.links if lk.section == "footer"]
    tail.append(f"</p>\n<p>&copy; {escape(spec.host)}</p>\n</footer>\n</body>\n</html>\n")
    return tail


def _middle(spec: PageSpec, vocab: Vocabulary, rng: Random, body: list[Link],
            size: int) -> list[str]:
    """Sections of paragraphs until the page reaches ``spec.size_target`` (``size``: the
    bytes of the rest), every body link placed at a random word; at least 20 paragraphs."""
    middle: list[str] = []
    pending = list(reversed(body))
    n_par = 0
    while size < spec.size_target or pending:
        if n_par % 4 == 0:
            sec = n_par // 4 + 1
            chunk = f'<h2 id="sec{sec}">{escape(vocab.phrase(rng, 3).title())}</h2>\n'
            middle.append(chunk)
            size += len(chunk)
        left_pars = max(1, (spec.size_target - size) // _AVG_PARAGRAPH)
        take = min(len(pending), math.ceil(len(pending) / left_pars))
        words = vocab.passage(rng, rng.randint(300, 1100)).split(" ")
        for _ in range(take):
            lk = pending.pop()
            words.insert(rng.randrange(len(words) + 1), _anchor(lk))
        chunk = "<p>" + " ".join(words) + "</p>\n"
        middle.append(chunk)
        size += len(chunk)
        n_par += 1
        if size >= spec.size_target and n_par >= 20:
            break
    while n_par < 20:  # sections sec1..sec5 always exist, for fragment links
        if n_par % 4 == 0:
            middle.append(f'<h2 id="sec{n_par // 4 + 1}">{escape(vocab.phrase(rng, 2))}</h2>\n')
        middle.append(f"<p>{vocab.phrase(rng, 8)}</p>\n")
        n_par += 1
    return middle


def small_html(title: str, text: str, links: tuple[str, ...] = ()) -> bytes:
    items = "".join(f'<li><a href="{escape(h)}">{escape(h)}</a></li>' for h in links)
    return (f"<!DOCTYPE html>\n<html><head><title>{escape(title)}</title></head>"
            f"<body><h1>{escape(title)}</h1><p>{escape(text)}</p><ul>{items}</ul></body></html>\n"
            ).encode()
