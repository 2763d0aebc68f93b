"""The built-in components, listed by path in the config's defaults so that a config can
reorder or leave them out (docs/components.md).

Their costly work keeps its batched place in the worker: the near-duplicate check's Redis
round trip is made for a whole task's pages (``workers.pipeline.lease.finish_pending``), the
WARC writer and the JSONL writer keep their buffers. What sits here is where each one's
effect lands in the page's record.
"""

from __future__ import annotations

from collections.abc import Iterable

from dedup.service import record_fields
from workers.components.api import (
    ComponentSetup,
    Link,
    LinkExtractor,
    NotConfigured,
    PageItem,
    PagePipeline,
    PageView,
)
from workers.storage.warc import WarcWriter

#: Paths of the built-ins, as the config names them.
LXML_LINKS = "workers.components.builtin.LxmlLinks"
DEDUP = "workers.components.builtin.Dedup"
WARC_STORE = "workers.components.builtin.WarcStore"
JSONL_RECORDS = "workers.components.builtin.JsonlRecords"


class LxmlLinks(LinkExtractor):
    """The links lxml found while parsing the page (``a``, ``area``, frames, the canonical
    link), resolved, capped at ``max_links_per_page``, nofollow marked. Alone in the list it
    costs nothing more than the parse (the worker hands on the parse's own list)."""

    def extract(self, page: PageView) -> Iterable[Link]:
        return page.parsed.links


class Dedup(PagePipeline):
    """Exact and near-duplicate detection (dedup/): the check runs in one round trip per task
    while the pages' links wait for it; here its answer joins the record (``dup_kind``,
    ``dup_of``, ``similarity``, ``mirror_of``, ``minhash``). Left out, no page is checked."""

    @classmethod
    def from_setup(cls, setup: ComponentSetup) -> Dedup:
        if not setup.config.dedup_enabled:
            raise NotConfigured("dedup_enabled is false")
        return cls()

    def process(self, item: PageItem) -> PageItem | None:
        if item.dedup is not None:
            item.record.update((k, v) for k, v in record_fields(item.dedup).items()
                               if v is not None)
        return item


class WarcStore(PagePipeline):
    """Writes the response (and its request) to the worker's WARC file, or a revisit record
    for a revisit that found nothing new; the record gets ``warc``: [file, offset]. Left
    out (or ``store_warc`` off), no WARC is written at all."""

    def __init__(self, writer: WarcWriter) -> None:
        self.writer = writer

    @classmethod
    def from_setup(cls, setup: ComponentSetup) -> WarcStore:
        if setup.warc is None:
            raise NotConfigured("store_warc is false")
        return cls(setup.warc)

    def process(self, item: PageItem) -> PageItem | None:
        writer = self.writer
        mark = item.revisit  # a revisit that found nothing new: a revisit record
        ref = (writer.write_revisit(item.response, mark.profile, mark.refers_to_s) if mark
               else writer.write(item.response))
        if ref:
            item.record["warc"] = list(ref)
        return item


class JsonlRecords(PagePipeline):
    """The record as it is here goes to the worker's JSONL file (``records/``), written with
    the task's other records. Left out, no JSONL is written (failures' records neither)."""

    def process(self, item: PageItem) -> PageItem | None:
        item.jsonl = dict(item.record)
        return item
