"""``trawl config show``: the effective crawl settings, each with where its value came from
(default, derived, job file and line, environment variable, flag); ``trawl config doc``: the
settings reference (docs/settings.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

#: Column at which ``show`` writes each setting's origin comment.
ORIGIN_COLUMN = 44


def add_config_parser(sub: Any) -> None:
    p = sub.add_parser("config", help="the effective crawl settings and where each came from "
                       "(show), or the reference of every setting (doc)")
    actions = p.add_subparsers(dest="config_command", required=True)
    show = actions.add_parser("show", help="every setting's effective value and its source: "
                              "default, FILE:LINE, env TRAWL_*, flag")
    show.add_argument("--config", metavar="FILE", help="crawl-job file (TOML, or JSON)")
    show.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                      help="a setting as on `trawl crawl` (repeatable)")
    show.add_argument("--json", action="store_true", help="print JSON for scripts")
    actions.add_parser("doc", help="print docs/settings.md, the reference of every setting")


def cmd_config(args: argparse.Namespace) -> int:
    if args.config_command == "doc":
        from frontier.settings_doc import settings_markdown

        sys.stdout.write(settings_markdown())
        return 0
    from workers.cli.options import job_seeds, load_from_args

    effective = load_from_args(args)
    seeds = job_seeds(effective, []) if effective.seeds is not None else None
    if args.json:
        json.dump(show_json(effective, seeds), sys.stdout, indent=2, sort_keys=False)
        print()
    else:
        print_show(effective, seeds, sys.stdout)
    return 0


def show_json(effective: Any, seeds: list[str] | None) -> dict[str, Any]:
    """{"seeds": ..., "settings": {name: {"value", "source", "section"}}}."""
    from dataclasses import asdict

    from frontier.config_meta import settings_info

    values = asdict(effective.config)
    return {
        "seeds": {"value": seeds, "source": effective.seeds_origin} if seeds is not None else None,
        "settings": {name: {"value": values[name], "source": effective.origins[name],
                            "section": info.section}
                     for name, info in settings_info().items()},
    }


def print_show(effective: Any, seeds: list[str] | None, out: TextIO) -> None:
    """The effective settings as a TOML job file, each line's comment saying where its value
    came from (the output is itself a valid job file)."""
    from dataclasses import asdict

    from frontier.config_meta import sections

    values = asdict(effective.config)
    out.write("# Effective crawl settings; after each, where its value came from (precedence:\n"
              "# flag > env TRAWL_* > job file > default). This is itself a valid job file.\n")
    if seeds is not None:
        out.write(_line("seeds", seeds, effective.seeds_origin))
    for section, names in sections().items():
        out.write(f"\n[{section}]\n")
        for name in names:
            out.write(_line(name, values[name], effective.origins[name]))


def _line(name: str, value: Any, origin: str) -> str:
    """``name = value  # origin``; a value TOML cannot write (None) as a comment, in JSON."""
    from frontier.config_meta import toml_value

    try:
        text = f"{name} = {toml_value(value)}"
    except TypeError:
        text = f"# {name} = {json.dumps(value)} (no TOML form)"
    return f"{text:<{ORIGIN_COLUMN}}  # {origin}\n"
