"""Plug-in components (issue 20): URL filters, link extractors and page pipelines named by
class path in the crawl's config, built once per worker process. The API is in ``api.py``;
docs/components.md says how to write one."""

from workers.components.api import (
    Component,
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

__all__ = ["Component", "ComponentSetup", "Link", "LinkCandidate", "LinkExtractor",
           "NotConfigured", "PageItem", "PagePipeline", "PageView", "UrlFilter"]
