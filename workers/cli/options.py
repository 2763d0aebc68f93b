"""Crawl settings from the command line of ``trawl crawl``, ``demo``, ``inspect`` and ``config
show``: the flags layer over the TRAWL_* environment, the job file and the defaults
(frontier/config_layers.py)."""

from __future__ import annotations

import argparse
import difflib
import json
from typing import TYPE_CHECKING, Any

from frontier.config import ConfigError

if TYPE_CHECKING:
    from frontier.config_layers import Effective, Layer

#: Settings with a flag of their own: setting -> the argparse attribute (``--max-pages``).
#: A dedicated flag wins over ``--set`` of the same setting.
DEDICATED_FLAGS = {
    "partitions": "partitions", "max_pages": "max_pages", "max_depth": "max_depth",
    "host_delay_s": "delay", "ip_concurrency": "ip_concurrency", "output_dir": "output",
    "namespace": "namespace", "ordering": "ordering", "fetch_concurrency": "concurrency",
    "allowed_domains": "allow",
}


def flag_layer(args: argparse.Namespace) -> Layer:
    """The settings a command line gives: each --set NAME=VALUE (JSON, else the text as it
    is), then the dedicated flags; each named with its flag for errors and ``config show``."""
    from frontier.config_layers import Kind, Layer
    from frontier.config_meta import settings_info

    info = settings_info()
    layer = Layer(Kind.FLAG)
    for item in getattr(args, "set", None) or []:
        name, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE, e.g. --set host_delay_s=1.5")
        if name not in info:
            near = difflib.get_close_matches(name, list(info), n=1, cutoff=0.6)
            hint = f"Did you mean {near[0]!r}? " if near else ""
            raise ConfigError(f"Unknown setting {name!r} (flag --set {name}). {hint}Every "
                              f"setting: docs/settings.md or `trawl config show`.")
        layer.values[name] = parse_flag_value(text, info[name].type)
        layer.wheres[name] = f"flag --set {name}"
    for name, attr in DEDICATED_FLAGS.items():
        value = getattr(args, attr, None)
        if value not in (None, []):
            layer.values[name] = value
            layer.wheres[name] = f"flag --{attr.replace('_', '-')}"
    if getattr(args, "continuous", False):  # a switch: only its presence is a setting
        layer.values["continuous"] = True
        layer.wheres["continuous"] = "flag --continuous"
    return layer


def parse_flag_value(text: str, type_name: str) -> Any:
    """A --set value: JSON (``3``, ``true``, ``["a.org"]``), else the text itself; a string
    setting keeps its text unless it is a quoted JSON string (``warc_version=1.0``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return text if type_name == "str" and not isinstance(value, str) else value


def load_from_args(args: argparse.Namespace, preset: dict[str, Any] | None = None) -> Effective:
    """The command's effective settings: flags > TRAWL_* env > --config FILE > preset >
    defaults, type-checked and validated (ConfigError names the setting and its source)."""
    from frontier.config_layers import load_settings

    return load_settings(flag_layer(args), getattr(args, "config", None), preset)


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given on the command line and in --config, as one table (no environment,
    no checks): kept for callers that build their CrawlConfig themselves."""
    from frontier.jobfile import read_job_file

    data: dict[str, Any] = {}
    if getattr(args, "config", None):
        data.update(read_job_file(args.config).settings)
    data.update(flag_layer(args).values)
    return data


def job_seeds(effective: Effective, cli_seeds: list[str], resume: bool = False) -> list[str]:
    """The crawl's seeds, canonical: those of the command line (arguments, --seeds FILE), else
    the job file's; with no allowed_domains set anywhere, the seeds' hosts become it."""
    from workers.cli.crawl import canonical_seeds, default_domains

    raw, where = cli_seeds, ""
    if not raw and effective.seeds is not None:
        raw, where = effective.seeds, effective.seeds_origin
    try:
        seeds = canonical_seeds(raw) if (raw or not resume) else []
    except ConfigError as exc:
        raise ConfigError(f"{exc} (seeds from {where})" if where else str(exc)) from None
    if effective.origins.get("allowed_domains") == "default":
        effective.config.allowed_domains = default_domains(seeds)
        effective.origins["allowed_domains"] = "derived (the seeds' hosts)"
    return seeds
