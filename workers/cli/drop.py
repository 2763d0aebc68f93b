"""``trawl drop``: take domains out of a running crawl (frontier/dropped.py), or put them back.

What an operator does when a site asks to be left alone, or a trap gets past the scope: every
worker stops fetching the domain within a few seconds, its queued URLs end as ``dropped`` (each
with a JSONL record) and new links to it are refused (``links_dropped_domain``).
"""

from __future__ import annotations

import argparse
from typing import Any

from frontier.dropped import REFRESH_S
from frontier.redisclient import redacted
from workers.cli.crawl import url_arguments


def add_drop_parser(sub: Any) -> None:
    p = sub.add_parser("drop", help="stop crawling domains (and their subdomains) in a "
                       "running crawl; their queued URLs end as dropped")
    url_arguments(p, broker=False)
    p.add_argument("--namespace", default="trawl")
    p.add_argument("domains", nargs="*", help="domains to drop, e.g. example.com")
    p.add_argument("--undo", action="store_true",
                   help="put the domains back: links to them are admitted again")
    p.add_argument("--list", action="store_true", help="print the dropped domains")


def cmd_drop(args: argparse.Namespace) -> int:
    from frontier.config import ConfigError
    from frontier.frontier import Frontier
    from workers.cli.crawl import connect
    from workers.runtime.context import load_config

    if not args.domains and not args.list:
        raise ConfigError("give the domains to drop (or --list)")
    client = connect(args.redis)
    frontier = Frontier(client, load_config(client, args.namespace, redacted(args.redis)))
    if args.domains and args.undo:
        n = frontier.dropped.remove(args.domains)
        print(f"{n} of {len(args.domains)} domains put back (the others were not dropped)")
    elif args.domains:
        n = frontier.dropped.add(args.domains)
        print(f"{n} domains dropped ({len(args.domains) - n} were already); workers stop "
              f"fetching them within {REFRESH_S:.0f} s")
    if args.list:
        for name in sorted(frontier.dropped.members()):
            print(name)
    return 0
