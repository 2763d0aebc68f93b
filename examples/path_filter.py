"""Example URL filter: refuse links whose path ends in one of some file extensions or matches
one of some regular expressions (docs/components.md).

Enable it with::

    url_filters = ["examples.path_filter.PathFilter"]
    component_settings = {"examples.path_filter.PathFilter":
                          {"extensions": [".pdf", ".zip"], "patterns": ["^/img/"]}}

Refusals are counted as ``links_filter_extension`` and ``links_filter_path_pattern``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from workers.components import ComponentSetup, LinkCandidate, NotConfigured, UrlFilter


def _strings(settings: Mapping[str, Any], name: str) -> list[str]:
    value = settings.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{name} must be a list of non-empty strings, not {value!r}")
    return value


def _path(url: str) -> str:
    """The path of a canonical absolute URL (no query, no fragment), without parsing it all:
    this runs once per candidate link."""
    start = url.find("/", url.find("://") + 3)
    if start < 0:
        return "/"
    end = len(url)
    for sep in "?#":
        cut = url.find(sep, start)
        if 0 <= cut < end:
            end = cut
    return url[start:end]


class PathFilter(UrlFilter):
    """Settings: ``extensions`` (".pdf", compared case-insensitively with the path's end) and
    ``patterns`` (regular expressions searched in the path). With neither, it opts out."""

    def __init__(self, extensions: list[str], patterns: list[str]) -> None:
        self.extensions = tuple(e.lower() if e.startswith(".") else "." + e.lower()
                                for e in extensions)
        self.patterns = [re.compile(p) for p in patterns]

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        unknown = set(settings) - {"extensions", "patterns"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}; known: extensions, patterns")
        _strings(settings, "extensions")
        for p in _strings(settings, "patterns"):
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"pattern {p!r} is not a regular expression: {exc}") from None

    @classmethod
    def from_setup(cls, setup: ComponentSetup) -> PathFilter:
        cls.check_settings(setup.settings)
        ext, pats = _strings(setup.settings, "extensions"), _strings(setup.settings, "patterns")
        if not ext and not pats:
            raise NotConfigured("no extensions or patterns in its component_settings")
        return cls(ext, pats)

    def check(self, link: LinkCandidate) -> str | None:
        path = _path(link.url)
        if self.extensions and path.lower().endswith(self.extensions):
            return "extension"
        for p in self.patterns:
            if p.search(path):
                return "path_pattern"
        return None
