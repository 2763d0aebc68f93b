"""Components for the tests of workers/components (importable by class path, as a crawl's
config names them). They record what they were given in class-level lists, read by tests
that run the pipeline in their own process."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, ClassVar

from workers.components import (
    ComponentSetup,
    Link,
    LinkCandidate,
    LinkExtractor,
    NotConfigured,
    PageItem,
    PagePipeline,
    PageView,
    UrlFilter,
)

_lock = threading.Lock()
PREFIX = "tests.componentkit."


class Marker(PagePipeline):
    """Appends its ``name`` setting to the record's ``marks`` (the order stages ran in)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    def from_setup(cls, setup: ComponentSetup) -> Marker:
        return cls(str(setup.settings.get("name", cls.__name__)))

    def process(self, item: PageItem) -> PageItem | None:
        item.record["marks"] = [*item.record.get("marks", []), self.name]
        return item


class SecondMarker(Marker):
    """Marker under another path, to list two in one config."""


class Dropper(PagePipeline):
    """Drops every page whose URL contains its ``contains`` setting."""

    def __init__(self, contains: str) -> None:
        self.contains = contains

    @classmethod
    def from_setup(cls, setup: ComponentSetup) -> Dropper:
        return cls(str(setup.settings.get("contains", "")))

    def process(self, item: PageItem) -> PageItem | None:
        return None if self.contains in item.record["url"] else item


class Seen(PagePipeline):
    """Records the record each page reached it with."""

    records: ClassVar[list[dict[str, Any]]] = []

    def process(self, item: PageItem) -> PageItem | None:
        with _lock:
            Seen.records.append(dict(item.record))
        return item


class Boom(PagePipeline):
    """A buggy stage: raises on every page."""

    def process(self, item: PageItem) -> PageItem | None:
        raise RuntimeError("boom")


class OptOut(PagePipeline):
    """Opts out at start."""

    @classmethod
    def from_setup(cls, setup: ComponentSetup) -> OptOut:
        raise NotConfigured("nothing to do in this crawl")


class PlainLinks(LinkExtractor):
    """Finds no links; records, per page, the soup it was given (None unless one asked)."""

    soups: ClassVar[list[tuple[str, Any]]] = []

    def extract(self, page: PageView) -> Iterable[Link]:
        with _lock:
            PlainLinks.soups.append((page.url, page.soup))
        return ()


class SoupLinks(LinkExtractor):
    """Asks for a soup: the ``a href`` links it finds there (resolved against the base)."""

    wants_soup = True
    soups: ClassVar[list[tuple[str, Any]]] = []

    def extract(self, page: PageView) -> Iterable[Link]:
        from ada_url import join_url

        with _lock:
            SoupLinks.soups.append((page.url, page.soup))
        for a in page.soup.find_all("a", href=True):
            yield Link(join_url(page.parsed.base_url, a["href"]), False, "a")


class RefuseAll(UrlFilter):
    """Refuses every link with the reason ``Not Wanted!`` (made a counter name)."""

    def check(self, link: LinkCandidate) -> str | None:
        return "Not Wanted!"


class NotAComponent:
    """A class that is none of the three kinds."""
