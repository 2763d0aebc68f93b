"""Crawl settings from the command line of ``trawl crawl`` and ``trawl demo``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from frontier.config import ConfigError


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The crawl settings a command line gives: --config FILE.json, then each --set
    NAME=VALUE (JSON, else a string), then the dedicated flags, later ones winning."""
    data: dict[str, Any] = {}
    if getattr(args, "config", None):
        try:
            data.update(json.loads(Path(args.config).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"Cannot read --config {args.config}: {exc}") from exc
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE")
        try:
            data[name] = json.loads(value)
        except json.JSONDecodeError:
            data[name] = value
    if getattr(args, "continuous", False):
        data["continuous"] = True
    for name, attr in (("partitions", "partitions"), ("max_pages", "max_pages"),
                       ("max_depth", "max_depth"), ("host_delay_s", "delay"),
                       ("ip_concurrency", "ip_concurrency"), ("output_dir", "output"),
                       ("namespace", "namespace"), ("ordering", "ordering"),
                       ("fetch_concurrency", "concurrency")):
        value = getattr(args, attr, None)
        if value is not None:
            data[name] = value
    return data
