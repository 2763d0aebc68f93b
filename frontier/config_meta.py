"""What the settings table says about each setting besides its default: its type, its section
and its description, read from the source of frontier/config.py.

The ``#:`` comment lines above a field are its description and the ``# --- title ---`` line
before it is its section, so a field added there is described, sectioned (in job files, in
``trawl config show``, in docs/settings.md) and typed everywhere without a second table to
keep in step.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import re
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Any

import frontier.config
from frontier.config import CrawlConfig

#: The section of the settings above the first ``# --- title ---`` line.
FIRST_SECTION = "crawl"
#: Short names for section titles whose slug would be long; any other title becomes its slug
#: ("worker processes" -> "workers" here, "revisits" -> "revisits" by itself).
SECTION_NAMES = {
    "robots.txt": "robots", "spider-trap defences": "traps", "crawl ordering": "crawl_ordering",
    "URL-seen Bloom filter": "bloom", "worker processes": "workers", "near-duplicates": "dedup",
}
_SECTION_LINE = re.compile(r"^\s*#\s*-{2,}\s*(?P<title>[^-].*?)\s*-{3,}\s*$")


@dataclass(frozen=True)
class SettingInfo:
    """One setting as documented: ``type`` is its annotation as written (``list[str]``)."""

    name: str
    type: str
    default: Any
    section: str
    doc: str

    @property
    def env(self) -> str:
        return f"TRAWL_{self.name.upper()}"


def section_slug(title: str) -> str:
    """A section title as a TOML table name: its words, without the parenthesized part."""
    title = re.sub(r"\(.*?\)", "", title).strip()
    return SECTION_NAMES.get(title) or re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def default_of(name: str) -> Any:
    """A setting's default value (a fresh copy for list and dict defaults)."""
    f = {f.name: f for f in fields(CrawlConfig)}[name]
    return f.default_factory() if f.default_factory is not MISSING else f.default


@cache
def settings_info() -> dict[str, SettingInfo]:
    """Every field of CrawlConfig, in the table's order, with its type, section and comment."""
    try:
        lines = inspect.getsource(frontier.config).splitlines()
    except (OSError, TypeError):  # no source shipped: names and defaults only
        lines = []
    documented = _documented(lines)
    out = {}
    for f in fields(CrawlConfig):
        type_, section, doc = documented.get(f.name, (str(f.type), FIRST_SECTION, ""))
        out[f.name] = SettingInfo(f.name, type_, default_of(f.name), section, doc)
    return out


def _documented(lines: list[str]) -> dict[str, tuple[str, str, str]]:
    """name -> (annotation, section, description) for each field of the CrawlConfig class."""
    if not lines:
        return {}
    tree = ast.parse("\n".join(lines))
    (table,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CrawlConfig"]
    found = {}
    section, seen_line = FIRST_SECTION, 0
    for node in table.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        for text in lines[seen_line:node.lineno - 1]:
            match = _SECTION_LINE.match(text)
            if match:
                section = section_slug(match["title"])
        seen_line = node.end_lineno or node.lineno
        doc: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            doc.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        found[node.target.id] = (ast.unparse(node.annotation), section, " ".join(doc))
    return found


def sections() -> dict[str, list[str]]:
    """Section name -> its settings, in the table's order."""
    out: dict[str, list[str]] = {}
    for info in settings_info().values():
        out.setdefault(info.section, []).append(info.name)
    return out


def toml_value(value: Any) -> str:
    """``value`` written as a TOML value (inline arrays and tables), for ``trawl config show``
    and docs/settings.md. Hand-written because the TOML writers on PyPI (tomli-w) write a
    dict as a ``[table]`` of its own, not inline beside its setting."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):  # a JSON string is a TOML basic string, DEL escaped besides
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{toml_value(str(k))} = {toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {value!r}")


def value_text(value: Any) -> str:
    """``value`` as TOML where it has a TOML form, else as JSON (None is ``null``)."""
    try:
        return toml_value(value)
    except TypeError:
        return json.dumps(value, default=str)
