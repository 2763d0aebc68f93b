"""What the pipeline needs from the process that runs it.

The stages of one URL (:mod:`workers.pipeline.lease`) read these and nothing else; a worker
process's :class:`workers.runtime.context.WorkerContext` provides them, and a benchmark or a
test can provide its own. Declared here so that the pipeline does not import the runtime
that drives it."""

from __future__ import annotations

from typing import Protocol

from dedup.service import DedupService
from frontier.config import CrawlConfig
from frontier.memo import BoundedMemo
from frontier.scope import Scope
from frontier.urls import ParamStripper
from workers.fetch import Fetcher
from workers.pipeline.caches import HostVerdicts, SeenMemo
from workers.pipeline.revisit_state import VisitStore
from workers.storage.warc import WarcWriter


class PipelineServices(Protocol):
    config: CrawlConfig
    fetcher: Fetcher
    #: Each host's robots.txt policy and soft-404 probe.
    hosts: HostVerdicts
    scope: Scope
    strip: ParamStripper
    #: Canonical URLs longer than this are invalid links.
    max_url_length: int
    #: Resolved link -> (canonical URL, host, Scope.url_reasons).
    links: BoundedMemo[str, tuple[str, str, tuple[str | None, str | None]]]
    seen: SeenMemo | None
    dedup: DedupService
    warc: WarcWriter | None
    #: Per-URL visit histories and states (continuous crawling only, else None).
    visits: VisitStore | None
