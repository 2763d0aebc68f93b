"""What the pipeline needs from the process that runs it.

The stages of one URL (:mod:`workers.pipeline.lease`) read these and nothing else; a worker
process's :class:`workers.runtime.context.WorkerContext` provides them, and a benchmark or a
test can provide its own. Declared here so that the pipeline does not import the runtime
that drives it."""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from dedup.service import DedupService
from frontier.config import CrawlConfig
from frontier.dropped import DroppedView
from frontier.memo import BoundedMemo
from frontier.scope import Scope
from frontier.urls import ParamStripper
from workers.fetch import Fetcher, FetchResult
from workers.pipeline.caches import HostVerdicts, SeenMemo
from workers.pipeline.parse import Link, ParsedPage
from workers.pipeline.revisit_state import VisitStore
from workers.storage.warc import WarcWriter
from workers.storage.warc_revisit import WarcRevisit


class ComponentHooks(Protocol):
    """The crawl's plug-in components, as the stages call them (workers/components/chain.py
    implements it; declared here so that the pipeline does not import the components)."""

    #: True when a URL filter is configured (asked for each link only then)
    filtering: bool

    def refusal(self, url: str, host: str, depth: int, counters: Counter[str]) -> str | None:
        ...

    def page_links(self, url: str, res: FetchResult, parsed: ParsedPage,
                   counters: Counter[str]) -> list[Link]: ...

    def finish_page(self, record: dict[str, Any], res: FetchResult, parsed: ParsedPage | None,
                    dup: Any, counters: Counter[str], revisit: WarcRevisit | None = None
                    ) -> dict[str, Any] | None: ...


class PipelineServices(Protocol):
    config: CrawlConfig
    fetcher: Fetcher
    #: Each host's robots.txt policy and soft-404 probe.
    hosts: HostVerdicts
    scope: Scope
    #: Domains an operator dropped from the running crawl (frontier/dropped.py).
    dropped: DroppedView
    strip: ParamStripper
    #: Canonical URLs longer than this are invalid links.
    max_url_length: int
    #: Resolved link -> (canonical URL, host, Scope.url_reasons).
    links: BoundedMemo[str, tuple[str, str, tuple[str | None, str | None]]]
    seen: SeenMemo | None
    dedup: DedupService
    warc: WarcWriter | None
    components: ComponentHooks
    #: Per-URL visit histories and states (continuous crawling only, else None).
    visits: VisitStore | None
