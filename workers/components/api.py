"""What a component is: the three kinds (URL filter, link extractor, page pipeline), what each
is given and returns, and how one opts out.

A component is a class named in the crawl's config by its path ("package.module.ClassName",
settings ``url_filters``, ``extractors``, ``pipelines``). Each worker process builds one
instance of each, once, with :meth:`Component.from_setup`; raising :class:`NotConfigured`
there disables it (logged, the crawl goes on). Instances are called from several threads of
the worker at once, so what they keep must be safe to share (docs/components.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from workers.pipeline.parse import Link, ParsedPage

if TYPE_CHECKING:
    from dedup.service import DedupResult
    from frontier.config import CrawlConfig
    from workers.fetch import FetchResult
    from workers.storage.warc_revisit import WarcRevisit

__all__ = ["Component", "ComponentSetup", "Link", "LinkCandidate", "LinkExtractor",
           "NotConfigured", "PageItem", "PagePipeline", "PageView", "UrlFilter"]


class NotConfigured(Exception):  # the name operators know from Scrapy
    """Raised by :meth:`Component.from_setup` when the component has nothing to do in this
    crawl (a setting is off, a dependency is missing): it is left out, with this reason."""


@dataclass(frozen=True)
class ComponentSetup:
    """What a component is built from, in each worker process."""

    config: CrawlConfig
    #: This component's entry of ``component_settings`` (empty when it has none).
    settings: Mapping[str, Any]
    #: ``host-pid`` of the worker process: a name for per-process files.
    worker_id: str
    #: The crawl's ``output_dir``.
    output_dir: Path
    #: The worker's WARC writer (None when WARC is off): for the built-in WarcStore.
    warc: Any = None


class Component:
    """Base of the three kinds. Override :meth:`from_setup` to read settings; :meth:`close`
    runs when the worker process ends (flush, commit, close files)."""

    #: the setting listing this kind (for error messages)
    setting: ClassVar[str] = ""

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """Called when the crawl starts with the component's ``component_settings`` entry:
        raise ValueError saying what is wrong, and the crawl does not start."""

    @classmethod
    def from_setup(cls, setup: ComponentSetup) -> Component:
        """The worker's instance; raise :class:`NotConfigured` to opt out."""
        return cls()

    def close(self) -> None:
        """Called once when the worker process shuts down."""


@dataclass(frozen=True, slots=True)
class LinkCandidate:
    """A link the crawl's scope admitted, before the URL-seen test."""

    #: canonical URL
    url: str
    host: str
    #: links away from a seed, this link included
    depth: int


class UrlFilter(Component):
    """Decides per candidate link: None to let it through, or a short reason (letters, digits,
    ``_``) to refuse it; refusals are counted as ``links_filter_<reason>``."""

    setting = "url_filters"

    def check(self, link: LinkCandidate) -> str | None:
        raise NotImplementedError


@dataclass(slots=True)
class PageView:
    """A fetched HTML page as extractors see it."""

    url: str
    response: FetchResult
    #: lxml's parse: ``tree`` (the root), ``base_url``, ``title``, the built-in ``links``
    parsed: ParsedPage
    #: a BeautifulSoup tree, built once per page only when a configured extractor has
    #: ``wants_soup``; None otherwise
    soup: Any = None


class LinkExtractor(Component):
    """Yields a page's links (absolute URLs: resolve against ``page.parsed.base_url``). Set
    ``wants_soup`` to be given a BeautifulSoup tree in ``page.soup``."""

    setting = "extractors"
    wants_soup: ClassVar[bool] = False

    def extract(self, page: PageView) -> Iterable[Link]:
        raise NotImplementedError


@dataclass(slots=True)
class PageItem:
    """One fetched page's record on its way through the pipelines. Every response that ends
    a URL is one (a page, a redirect, a 404, a skipped media type); failures before any
    response are not."""

    #: the JSONL record as built so far (stages may change it for the stages after them)
    record: dict[str, Any]
    response: FetchResult
    #: lxml's parse of an HTML page; None for anything else
    parsed: ParsedPage | None
    #: the near-duplicate check's answer (None: not checked)
    dedup: DedupResult | None
    #: continuous crawling: archive as a revisit record, not a whole response (None: whole)
    revisit: WarcRevisit | None = None
    #: the record as the built-in JSONL stage passed it on (what the JSONL file gets)
    jsonl: dict[str, Any] | None = field(default=None, repr=False)


class PagePipeline(Component):
    """Gets each :class:`PageItem` in the configured order; returns it (changed or not) for
    the next stage, or None to drop it (the stages after it, the JSONL writer among them,
    do not see it; the page's links are followed all the same)."""

    setting = "pipelines"

    def process(self, item: PageItem) -> PageItem | None:
        raise NotImplementedError
