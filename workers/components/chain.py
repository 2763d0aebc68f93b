"""The components of one worker process at work: what the pipeline's hooks call
(``workers.pipeline.services.ComponentHooks``).

The default configuration must cost nothing measurable per page (bench/stage_cost.py, see
docs/components.md): with only the built-in extractor the parse's own link list is handed
on, no filter means no call per link, and the page pipeline is a short loop of method calls.
A component that raises is logged and counted (``component_errors``); the page goes on as
if that stage had passed it through, so a buggy plug-in never loses a URL.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any

from frontier.config import CrawlConfig
from workers.components.api import LinkCandidate, PageItem, PageView
from workers.components.builtin import LxmlLinks
from workers.components.loader import Built
from workers.fetch import FetchResult
from workers.pipeline.parse import Link, ParsedPage, soup
from workers.storage.warc_revisit import WarcRevisit

log = logging.getLogger(__name__)

#: counter of component calls that raised (a bug in a component)
ERRORS_COUNTER = "component_errors"
_NOT_NAME = re.compile(r"[^a-z0-9_]+")


def reason_name(reason: str) -> str:
    """A refusal reason as a counter-name suffix: ``filter_`` + lower-case letters, digits
    and ``_`` (anything else becomes ``_``), at most 48 characters."""
    return "filter_" + (_NOT_NAME.sub("_", str(reason).lower()).strip("_")[:48] or "refused")


class Components:
    """The built components with the calls the pipeline makes (thread-safe: no state of its
    own changes after construction, except the reason-name memo, a dict written whole)."""

    def __init__(self, config: CrawlConfig, built: Built) -> None:
        self.built = built
        self.max_links = config.max_links_per_page
        self._filters = built.url_filters
        #: True when a URL filter is configured (links.py asks for each link only then)
        self.filtering = bool(built.url_filters)
        self._extractors = built.extractors
        self._lxml_only = (len(built.extractors) == 1
                           and type(built.extractors[0]) is LxmlLinks)
        #: True when a configured extractor asks for a BeautifulSoup tree
        self.wants_soup = any(e.wants_soup for e in built.extractors)
        self._stages = built.pipelines
        self._reasons: dict[str, str] = {}

    # --- URL filters -----------------------------------------------------------------------
    def refusal(self, url: str, host: str, depth: int, counters: Counter[str]) -> str | None:
        """None if every filter lets the link through, else the first refusal's counter
        suffix (``filter_<reason>``)."""
        link = LinkCandidate(url, host, depth)
        for f in self._filters:
            try:
                why = f.check(link)
            except Exception as exc:  # a filter's bug lets the link through, counted
                counters[ERRORS_COUNTER] += 1
                log.error("URL filter %s failed on %s", type(f).__name__, url, exc_info=exc)
                continue
            if why:
                name = self._reasons.get(why)
                if name is None:
                    name = self._reasons[why] = reason_name(why)
                log.debug("link %s refused by %s: %s", url, type(f).__name__, why)
                return name
        return None

    # --- extractors ------------------------------------------------------------------------
    def page_links(self, url: str, res: FetchResult, parsed: ParsedPage,
                   counters: Counter[str]) -> list[Link]:
        """The links of an HTML page from every extractor, in order, at most
        ``max_links_per_page`` (the rest counted as links_over_page_cap)."""
        if self._lxml_only:
            return parsed.links
        page = PageView(url, res, parsed, soup(parsed) if self.wants_soup else None)
        links: list[Link] = []
        for ex in self._extractors:
            try:
                links.extend(ex.extract(page))
            except Exception as exc:
                counters[ERRORS_COUNTER] += 1
                log.error("extractor %s failed on %s", type(ex).__name__, url, exc_info=exc)
        if len(links) > self.max_links:
            counters["links_over_page_cap"] += len(links) - self.max_links
            del links[self.max_links:]
        return links

    # --- page pipelines --------------------------------------------------------------------
    def finish_page(self, record: dict[str, Any], res: FetchResult, parsed: ParsedPage | None,
                    dup: Any, counters: Counter[str], revisit: WarcRevisit | None = None
                    ) -> dict[str, Any] | None:
        """The page's record through every pipeline stage in order; the record for the JSONL
        file (as the JSONL stage saw it), or None (no JSONL stage, or dropped before it)."""
        item = PageItem(record, res, parsed, dup, revisit=revisit)
        for stage in self._stages:
            try:
                out = stage.process(item)
            except Exception as exc:  # a stage's bug: the item goes on as it came
                counters[ERRORS_COUNTER] += 1
                log.error("pipeline %s failed on %s", type(stage).__name__, record.get("url"),
                          exc_info=exc)
                continue
            if out is None:
                counters["pages_dropped_by_pipeline"] += 1
                return item.jsonl
            item = out
        return item.jsonl

    def close(self) -> None:
        for c in (*self._filters, *self._extractors, *self._stages):
            try:
                c.close()
            except Exception as exc:
                log.error("closing component %s failed", type(c).__name__, exc_info=exc)
