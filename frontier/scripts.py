"""What every part of the frontier shares: its Lua scripts and its view of one crawl's Redis.

Each script in frontier/lua/ has one encoder (Python values -> KEYS, ARGV) and one decoder
(reply -> a typed value) beside the part that calls it; nothing else builds a script's ARGV or
reads its reply by position.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import redis

from frontier.config import CrawlConfig
from frontier.keys import Keys
from frontier.slotpipe import LuaScript, SlotPipeline

#: Host-queue mode of each ordering: FIFO lists, priority ZSETs, or ZSETs whose queued URLs
#: gain priority from every further link to them.
QUEUE_MODE = {"bfs": "l", "random": "z", "indegree": "a", "opic": "a"}


@functools.cache
def load_script(name: str) -> LuaScript:
    """The script ``name`` (frontier/lua/NAME.lua), sent by :class:`SlotPipeline` as EVALSHA
    (it loads the script on each server on first use, so no client is needed here)."""
    return LuaScript(name, resources.files("frontier").joinpath("lua", f"{name}.lua").read_text())


@dataclass(frozen=True, slots=True)
class Store:
    """One crawl's frontier in one Redis (or cluster): client, settings and key names."""

    r: redis.Redis
    config: CrawlConfig
    keys: Keys

    @property
    def partitions(self) -> int:
        return self.config.partitions

    @property
    def mode(self) -> str:
        """The host-queue mode of the crawl's ordering (:data:`QUEUE_MODE`)."""
        return QUEUE_MODE[self.config.ordering]

    def pipeline(self) -> SlotPipeline:
        """A pipeline for the frontier's scripts (one round trip per Redis node)."""
        return SlotPipeline(self.r)


def text(value: Any) -> str:
    """A reply value as text (Redis replies bytes unless the client decodes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def owners_of(partitions: Iterable[int] | Mapping[int, str]) -> dict[int, str]:
    """Partition -> owner value ("member|token") for fenced calls, or "" (unfenced) for a
    plain list of partitions."""
    if isinstance(partitions, Mapping):
        return dict(partitions)
    return dict.fromkeys(partitions, "")
