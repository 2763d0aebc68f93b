"""Layered crawl settings (frontier/config_layers.py): flags > TRAWL_* env > job file >
defaults for every kind of value, errors that name the setting, its source and the fix, the
TRAWL_* variables that are not settings left alone, and docs/settings.md kept current."""

from __future__ import annotations

import argparse
import logging
import subprocess
import tomllib
from dataclasses import asdict, fields
from io import StringIO
from itertools import pairwise
from pathlib import Path

import pytest

from frontier.config import ConfigError, CrawlConfig
from frontier.config_layers import NOT_SETTINGS, Effective, load_settings, warn_env_typos
from frontier.config_meta import default_of, sections, settings_info
from frontier.settings_doc import REGENERATE, settings_markdown
from workers.cli.config_cmd import print_show
from workers.cli.options import flag_layer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_trawl_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees only the TRAWL_* settings it sets itself."""
    import os

    for var in list(os.environ):
        if var.upper().startswith("TRAWL_") and var.upper() not in NOT_SETTINGS:
            monkeypatch.delenv(var)


def flags(*sets: str, **dedicated: object) -> argparse.Namespace:
    return argparse.Namespace(set=list(sets), **dedicated)


def load(tmp_path: Path, toml: str | None, *sets: str, **dedicated: object) -> Effective:
    job = None
    if toml is not None:
        job = tmp_path / "crawl.toml"
        job.write_text(toml)
    return load_settings(flag_layer(flags(*sets, **dedicated)), job)


def line_of(path: Path, text: str) -> str:
    """``path:N``, N the line of the file that starts with ``text``."""
    lines = path.read_text().splitlines()
    return f"{path}:{[line.strip() for line in lines].index(text) + 1}"


#: (setting, its table and line in the file, TRAWL_ env text, --set text, value of each layer)
PRECEDENCE = [
    ("host_delay_s", "[politeness]\nhost_delay_s = 3.5", "4.25", "5.5", (3.5, 4.25, 5.5)),
    ("max_pages", "[scope]\nmax_pages = 10", "20", "30", (10, 20, 30)),
    ("allowed_domains", '[scope]\nallowed_domains = ["a.org"]', '["b.org"]', '["c.org"]',
     (["a.org"], ["b.org"], ["c.org"])),
    ("static_hosts", '[fetching]\nstatic_hosts = { "h.test" = "10.0.0.1" }',
     '{"h.test": "10.0.0.2"}', '{"h.test": "10.0.0.3"}',
     ({"h.test": "10.0.0.1"}, {"h.test": "10.0.0.2"}, {"h.test": "10.0.0.3"})),
    ("store_warc", "[output]\nstore_warc = false", "true", "false", (False, True, False)),
    ("warc_version", '[output]\nwarc_version = "1.0"', "1.1", "1.0", ("1.0", "1.1", "1.0")),
]


@pytest.mark.parametrize(("name", "toml", "env", "flag", "values"), PRECEDENCE,
                         ids=[p[0] for p in PRECEDENCE])
def test_flag_beats_env_beats_file_beats_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 name: str, toml: str, env: str, flag: str,
                                                 values: tuple[object, object, object]) -> None:
    from_file, from_env, from_flag = values
    chain = [default_of(name), *values]
    assert all(lower != upper for lower, upper in pairwise(chain))  # visible
    assert getattr(load(tmp_path, None).config, name) == default_of(name)
    job = tmp_path / "crawl.toml"
    effective = load(tmp_path, toml)
    assert getattr(effective.config, name) == from_file
    assert effective.origins[name] == line_of(job, toml.splitlines()[-1])
    monkeypatch.setenv(f"TRAWL_{name.upper()}", env)
    effective = load(tmp_path, toml)
    assert getattr(effective.config, name) == from_env
    assert effective.origins[name].startswith(f"env TRAWL_{name.upper()}")  # + file: a table
    effective = load(tmp_path, toml, f"{name}={flag}")
    assert getattr(effective.config, name) == from_flag
    assert effective.origins[name].startswith(f"flag --set {name}")


def test_dedicated_flag_beats_set_and_is_named(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAWL_HOST_DELAY_S", "4")
    effective = load(tmp_path, None, "host_delay_s=3", delay=6.0)
    assert effective.config.host_delay_s == 6.0
    assert effective.origins["host_delay_s"] == "flag --delay"


def test_tables_merge_key_by_key_with_every_source_named(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    toml = '[fetching]\nstatic_hosts = { "a.test" = "10.0.0.1", "b.test" = "10.0.0.1" }\n'
    monkeypatch.setenv("TRAWL_STATIC_HOSTS", '{"b.test": "10.0.0.2", "c.test": "10.0.0.2"}')
    effective = load(tmp_path, toml, 'static_hosts={"c.test": "10.0.0.3"}')
    assert effective.config.static_hosts == {"a.test": "10.0.0.1", "b.test": "10.0.0.2",
                                             "c.test": "10.0.0.3"}
    assert effective.origins["static_hosts"] == (
        f"flag --set static_hosts + env TRAWL_STATIC_HOSTS + {tmp_path / 'crawl.toml'}:2")


def test_flat_sectioned_dotted_and_json_files_locate_each_key(tmp_path: Path) -> None:
    toml = ('partitions = 8\npoliteness.ip_delay_s = 0.5\n\n[scope]\n# a comment\n'
            'max_depth = 3\n\n[output]\nstore_warc = false\n')
    effective = load(tmp_path, toml)
    job = tmp_path / "crawl.toml"
    assert (effective.config.partitions, effective.config.ip_delay_s,
            effective.config.max_depth, effective.config.store_warc) == (8, 0.5, 3, False)
    for name, text in (("partitions", "partitions = 8"), ("max_depth", "max_depth = 3"),
                       ("ip_delay_s", "politeness.ip_delay_s = 0.5"),
                       ("store_warc", "store_warc = false")):
        assert effective.origins[name] == line_of(job, text)
    legacy = tmp_path / "settings.json"
    legacy.write_text('{\n  "max_retries": 5,\n  "allowed_domains": ["a.org"]\n}\n')
    effective = load_settings(None, legacy)
    assert (effective.config.max_retries, effective.origins["allowed_domains"]) == (
        5, f"{legacy}:3")


@pytest.mark.parametrize(("toml", "env", "sets", "words"), [
    ('[politeness]\nhost_delay_s = "fast"\n', {}, [],
     ["host_delay_s", "crawl.toml:2", "a number", "edit it at"]),
    ("[politeness]\nhost_delay_s = -1.0\n", {}, [],
     ["host_delay_s", "crawl.toml:2", "must be >= 0", "edit it at"]),
    (None, {"TRAWL_MAX_PAGES": "lots"}, [],
     ["max_pages", "env TRAWL_MAX_PAGES", "whole number", "unset TRAWL_MAX_PAGES"]),
    (None, {"TRAWL_ALLOWED_DOMAINS": "a.org"}, [],
     ["allowed_domains", "env TRAWL_ALLOWED_DOMAINS", "JSON", "unset TRAWL_ALLOWED_DOMAINS"]),
    (None, {"TRAWL_PARTITIONS": "0"}, [], ["partitions", "env TRAWL_PARTITIONS", "> 0"]),
    (None, {}, ["partitions=0"], ["partitions", "flag --set partitions", "must be > 0"]),
    (None, {}, ["store_warc=maybe"], ["store_warc", "flag --set store_warc", "true or false"]),
    (None, {}, ["partitionz=4"], ["'partitionz'", "flag --set", "Did you mean 'partitions'"]),
    ("[scope]\nmax_pagez = 10\n", {}, [],
     ["crawl.toml:2", "'max_pagez'", "[scope]", "Did you mean 'max_pages'"]),
    ("max_pagez = 10\n", {}, [], ["crawl.toml:1", "Did you mean 'max_pages'"]),
    ("[politness]\nhost_delay_s = 1\n", {}, [], ["'politness'", "Did you mean 'politeness'"]),
    ("[politeness]\nmax_pages = 10\n", {}, [], ["crawl.toml:2", "max_pages", "[scope]"]),
    ("max_pages = 1\n[scope]\nmax_pages = 2\n", {}, [], ["max_pages", "twice", "1 and 3"]),
    ("[scope]\nmax_pages = = 3\n", {}, [], ["crawl.toml:2", "not valid TOML"]),
    ("seeds = \"https://a.org/\"\n", {}, [], ["crawl.toml:1", "seeds", "list of URLs"]),
])
def test_errors_name_the_setting_its_source_and_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str | None,
        env: dict[str, str], sets: list[str], words: list[str]) -> None:
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, toml, *sets)
    missing = [w for w in words if w not in str(caught.value)]
    assert not missing, f"{missing} not in: {caught.value}"


def test_all_type_errors_are_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, '[scope]\nmax_depth = "deep"\nmax_pages = "many"\n')
    assert "max_depth" in str(caught.value) and "max_pages" in str(caught.value)
    assert str(caught.value).count("\n") == 1


def test_env_typo_is_warned_with_the_near_match_and_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TRAWL_HOST_DELAY", "9")
    monkeypatch.setenv("TRAWL_MAX_PAGE", "9")
    monkeypatch.setenv("TRAWL_SOMETHING_UNRELATED", "9")  # control: not like any setting
    with caplog.at_level(logging.WARNING, logger="frontier.config_layers"):
        effective = load(tmp_path, None)
    assert asdict(effective.config) == asdict(CrawlConfig().validate())
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "TRAWL_HOST_DELAY " in warned and "TRAWL_HOST_DELAY_S?" in warned
    assert "TRAWL_MAX_PAGES?" in warned and "UNRELATED" not in warned


def test_trawl_variables_the_code_reads_are_not_settings(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Every TRAWL_* name in the repository (but these tests' typos) that is no setting's
    (TRAWL_REDIS, TRAWL_BROKER, TRAWL_REV, ...) is neither read as a setting nor warned about
    as a misspelt one."""
    env_names = {info.env for info in settings_info().values()}
    assert not env_names & NOT_SETTINGS
    try:
        grep = subprocess.run(["git", "grep", "-ohE", r"\bTRAWL_[A-Z0-9_]*[A-Z0-9]\b", "--",
                               ".", ":!tests/frontier/test_config_layers.py",
                               ":!tests/workers/test_config_cli.py"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    others = set(grep.stdout.split()) - env_names
    assert {"TRAWL_REDIS", "TRAWL_BROKER", "TRAWL_REV"} <= others
    junk = "{not a value of any setting"
    for var in others:
        monkeypatch.setenv(var, junk)
    assert warn_env_typos({var: junk for var in others}) == []
    assert asdict(load(tmp_path, None).config) == asdict(CrawlConfig().validate())
    monkeypatch.setenv("TRAWL_PARTITIONS", junk)  # control: a setting's variable is read
    with pytest.raises(ConfigError, match="TRAWL_PARTITIONS"):
        load(tmp_path, None)


def test_sections_cover_every_setting_and_are_no_setting_names() -> None:
    listed = [name for names in sections().values() for name in names]
    assert sorted(listed) == sorted(f.name for f in fields(CrawlConfig))
    assert not set(sections()) & set(listed)
    assert {"politeness", "fetching", "scope", "output"} <= set(sections())


def test_show_is_a_job_file_that_loads_to_the_same_config(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAWL_DENIED_DOMAINS", '["x.org"]')
    effective = load(tmp_path, '[dedup]\ndedup_settings = { threshold = 0.8 }\n',
                     "ordering=opic")
    out = StringIO()
    print_show(effective, None, out)
    assert "# env TRAWL_DENIED_DOMAINS" in out.getvalue()
    assert "# flag --set ordering" in out.getvalue() and "# default" in out.getvalue()
    shown = tomllib.loads(out.getvalue())
    flat = {k: v for table in shown.values() for k, v in table.items()}
    assert flat == asdict(effective.config)
    monkeypatch.delenv("TRAWL_DENIED_DOMAINS")
    again = tmp_path / "shown.toml"
    again.write_text(out.getvalue())
    assert asdict(load_settings(None, again).config) == asdict(effective.config)


def test_example_job_file_loads_with_its_seeds_and_settings() -> None:
    example = ROOT / "examples" / "crawl.toml"
    effective = load_settings(None, example)
    assert effective.seeds and effective.seeds_origin.startswith(f"{example}:")
    from_file = {n: o for n, o in effective.origins.items() if o.startswith(str(example))}
    assert len(from_file) >= 10
    lines = example.read_text().splitlines()
    for name, where in from_file.items():  # each origin is the line that sets it
        assert lines[int(where.rsplit(":", 1)[1]) - 1].startswith(f"{name} ="), (name, where)


def test_settings_doc_is_current() -> None:
    doc = ROOT / "docs" / "settings.md"
    expected = settings_markdown()
    for name, info in settings_info().items():  # the doc is made from the table itself
        assert f"| `{name}` | `{info.type.replace('|', chr(92) + '|')}` |" in expected
        assert info.doc
    assert doc.read_text() == expected, (
        f"docs/settings.md is stale (a setting was added or its comment changed in "
        f"frontier/config.py): regenerate it with `{REGENERATE}`")


def test_seeds_from_the_file_its_seeds_file_or_the_command_line(tmp_path: Path) -> None:
    from workers.cli.options import job_seeds

    (tmp_path / "seeds.txt").write_text("https://b.org/x\n# a comment\n\nhttps://c.org/\n")
    effective = load(tmp_path, '[crawl]\nseeds = ["https://a.org/"]\nseeds_file = "seeds.txt"\n')
    assert job_seeds(effective, []) == ["https://a.org/", "https://b.org/x", "https://c.org/"]
    assert effective.config.allowed_domains == ["a.org", "b.org", "c.org"]  # the seeds' hosts
    assert effective.seeds_origin == f"{tmp_path / 'crawl.toml'}:2, {tmp_path / 'crawl.toml'}:3"
    effective = load(tmp_path, 'seeds = ["https://a.org/"]\n', allow=["z.org"])
    assert job_seeds(effective, ["https://d.org/"]) == ["https://d.org/"]  # command line wins
    assert effective.config.allowed_domains == ["z.org"]
    effective = load(tmp_path, 'seeds = ["ftp://a.org/"]\n')
    with pytest.raises(ConfigError, match=r"ftp://a.org/.*crawl.toml:1"):
        job_seeds(effective, [])
