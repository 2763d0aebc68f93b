"""Links of a page libxml2 stopped parsing: a flat scan of its tags, with no tree.

Why: libxml2 (lxml) gives up on a document nested deeper than 256 elements ("Excessive depth
in document", 2048 with XML_PARSE_HUGE): everything after that point is missing from the
tree, so its links would be lost without a word (issue 21: a link inside 100,000 nested
``<div>``s, or after them). The standard library's ``html.parser`` reads tags one after
another and keeps no stack of open elements, so depth costs it nothing. It is slower than
lxml (~0.5 s for 1 MB), so it runs only for pages lxml could not read to the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any


class ScannedTag:
    """A start tag as :func:`workers.pipeline.parse._walk` reads an lxml element: ``tag``,
    ``get(attribute)`` and ``text`` (a title's; None for other tags)."""

    __slots__ = ("attrs", "tag", "text")

    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text: str | None = None

    def get(self, name: str) -> str | None:
        return self.attrs.get(name)


class _Scanner(HTMLParser):
    def __init__(self, tags: frozenset[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.wanted = tags
        self.found: list[ScannedTag] = []
        self._title: ScannedTag | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.wanted:
            el = ScannedTag(tag, {k: v for k, v in reversed(attrs)})  # first value wins
            self.found.append(el)
            self._title = el if tag == "title" else None

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.text = (self._title.text or "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._title = None


class ScannedPage:
    """The tags of ``tags`` in ``text``, in document order, behind lxml's ``iter(tags)``."""

    def __init__(self, text: str, tags: tuple[str, ...]) -> None:
        scanner = _Scanner(frozenset(tags))
        scanner.feed(text)
        scanner.close()
        self._found = scanner.found

    def iter(self, tags: Any = None) -> Iterator[ScannedTag]:
        return iter(self._found)
