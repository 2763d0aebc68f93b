"""The crawl-job file (``trawl crawl --config crawl.toml``): seeds and settings in TOML, or the
older flat JSON file, each value with the line it is on so that an error can point at it.

Layout (docs/settings.md, examples/crawl.toml): a setting is written either at the top of the
file or inside the table of its section (``[politeness]``, ``[scope]``, ... as listed in
docs/settings.md); ``seeds`` (a list of URLs) and ``seeds_file`` (one URL a line, relative
to the job file) at the top or in ``[crawl]``. A key that is none of these is an error that
names the nearest known key. tomllib reports no line of a parsed value, so the line is found
in the text (first ``key =`` in the right table).
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frontier.config_checks import ConfigError
from frontier.config_meta import FIRST_SECTION, sections, settings_info

#: Keys of a job file that are not settings: where the crawl starts.
JOB_KEYS = ("seeds", "seeds_file")
E_UNKNOWN_KEY = ("{where}: unknown key {key!r}{context}.{near} Every setting, with its section: "
                 "docs/settings.md (or `trawl config show`).")
_TOML_ERROR_AT = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column \d+\)$")
_TABLE = re.compile(r"^\s*\[\s*(?P<name>[^\[\]]+?)\s*\]\s*(#.*)?$")


@dataclass
class JobFile:
    """A job file's settings (flat, by setting name) and seeds, with the line of each."""

    path: Path
    settings: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    #: The seeds the file names (``seeds`` and ``seeds_file``), None when it names none.
    seeds: list[str] | None = None

    def where(self, key: str) -> str:
        """``crawl.toml:12`` for a key on line 12 (the file alone when the line is unknown)."""
        line = self.lines.get(key, 0)
        return f"{self.path}:{line}" if line else str(self.path)


def read_job_file(path: str | Path) -> JobFile:
    """Parse a job file (``.json``, or text starting with ``{``, as JSON; else TOML) and check
    its keys; the values are checked with the other layers (frontier/config_layers.py)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read --config {path}: {exc}. Give the path of a TOML job "
                          f"file (examples/crawl.toml) or a JSON object of settings.") from None
    suffix = path.suffix.lower()
    as_json = suffix == ".json" or (suffix != ".toml" and text.lstrip().startswith("{"))
    data = _parse(path, text, as_json)
    job = JobFile(path)
    _Flattener(job, _Locator(text, as_json)).take(data)
    return job


def _parse(path: Path, text: str, as_json: bool) -> dict[str, Any]:
    try:
        data = json.loads(text) if as_json else tomllib.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})."
                          f" Fix the syntax there.") from None
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_ERROR_AT.match(str(exc))
        at = f"{path}:{match['line']}" if match else str(path)
        raise ConfigError(f"{at}: not valid TOML: {match['msg'] if match else exc}. Fix the "
                          f"syntax there (examples/crawl.toml is a valid job file).") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a job file is a table of settings (a JSON object), "
                          f"not {type(data).__name__}.")
    return data


class _Flattener:
    """Moves each setting of a parsed file, top level or in its section, to a flat table."""

    def __init__(self, job: JobFile, locator: _Locator) -> None:
        self.job, self.locator = job, locator
        self.info = settings_info()
        self.sections = sections()

    def take(self, data: dict[str, Any]) -> None:
        for key, value in data.items():
            if key in self.info or key in JOB_KEYS:
                self.put(key, value, None)
            elif key in self.sections and isinstance(value, dict):
                for sub, sub_value in value.items():
                    self.take_in_section(key, sub, sub_value)
            else:
                self.unknown(key, None, [*self.info, *self.sections, *JOB_KEYS])

    def take_in_section(self, section: str, key: str, value: Any) -> None:
        if key in self.sections[section] or (key in JOB_KEYS and section == FIRST_SECTION):
            self.put(key, value, section)
        elif key in self.info:
            line = self.locator.line_of(key, section)
            raise ConfigError(
                f"{self.job.path}:{line}: {key} is a setting of [{self.info[key].section}], not "
                f"of [{section}]. Fix: move it to [{self.info[key].section}] (or to the top of "
                f"the file, before any table).")
        else:
            self.unknown(key, section, [*self.sections[section], *self.info])

    def put(self, key: str, value: Any, section: str | None) -> None:
        line = self.locator.line_of(key, section)
        if key in self.job.lines:
            raise ConfigError(f"{self.job.path}: {key} is given twice (lines "
                              f"{self.job.lines[key]} and {line}). Fix: keep one of them.")
        self.job.lines[key] = line
        if key in JOB_KEYS:
            self.add_seeds(key, value)
        else:
            self.job.settings[key] = value

    def add_seeds(self, key: str, value: Any) -> None:
        where = self.job.where(key)
        if key == "seeds_file":
            if not isinstance(value, str):
                raise ConfigError(f"{where}: seeds_file is the path of a file of seed URLs "
                                  f"(a string), not {value!r}.")
            seed_file = self.job.path.parent / value
            try:
                value = seed_file.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{where}: cannot read seeds_file {seed_file}: {exc}. Fix the "
                                  f"path (it is relative to the job file).") from None
        elif not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{where}: seeds is a list of URLs, e.g. seeds = "
                              f"[\"https://example.org/\"], not {value!r}.")
        self.job.seeds = [*(self.job.seeds or []), *value]

    def unknown(self, key: str, section: str | None, candidates: list[str]) -> None:
        line = self.locator.line_of(key, section)
        near = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
        raise ConfigError(E_UNKNOWN_KEY.format(
            where=f"{self.job.path}:{line}" if line else self.job.path, key=key,
            context=f" in [{section}]" if section else "",
            near=f" Did you mean {near[0]!r}?" if near else ""))


class _Locator:
    """The line (1-based; 0: not found) of a key in a TOML or JSON text, in a table or not."""

    def __init__(self, text: str, as_json: bool) -> None:
        self.lines = text.splitlines()
        self.as_json = as_json

    def line_of(self, key: str, table: str | None) -> int:
        return self._json_line(key, table) if self.as_json else self._toml_line(key, table)

    def _toml_line(self, key: str, table: str | None) -> int:
        bare = rf"""["']?{re.escape(key)}["']?\s*="""
        in_table = re.compile(rf"^\s*{bare}")
        dotted = re.compile(rf"""^\s*["']?{re.escape(table or "")}["']?\s*\.\s*{bare}""")
        inline = re.compile(rf"""^\s*["']?{re.escape(table or "")}["']?\s*=""")
        current: str | None = None
        fallback = 0
        for number, text in enumerate(self.lines, 1):
            header = _TABLE.match(text)
            if header and not text.lstrip().startswith("[["):
                current = header["name"].strip("\"'")
                continue
            if current == table and in_table.match(text):
                return number
            if table and current is None and dotted.match(text):
                return number
            if table and current is None and not fallback and inline.match(text):
                fallback = number  # an inline table: its line, if the key is on a later one
        return fallback

    def _json_line(self, key: str, table: str | None) -> int:
        start = 0
        if table:
            start = next((i for i, text in enumerate(self.lines)
                          if re.search(rf'"{re.escape(table)}"\s*:', text)), 0)
        pattern = re.compile(rf'"{re.escape(key)}"\s*:')
        return next((i + 1 for i, text in enumerate(self.lines) if i >= start
                     and pattern.search(text)), 0)
