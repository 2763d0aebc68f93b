"""A deterministic, seeded web of many hosts on loopback (DESIGN.md, "The sandbox web")."""

from .change_model import ChangeModel, HostValidators, WrongLastModified
from .config import SandboxConfig
from .graph import Link, PageSpec
from .handle import SandboxWeb
from .layout import Special, SpecialKind
from .replies import Reply
from .requestlog import LogEntry, read_log
from .robots import ROBOTS_PARSE_LIMIT, RobotsKind
from .site import SandboxSite, canonical_url
from .traps import FARM_LISTED, TRAP_KINDS

__all__ = [
    "FARM_LISTED",
    "ROBOTS_PARSE_LIMIT",
    "TRAP_KINDS",
    "ChangeModel",
    "HostValidators",
    "Link",
    "LogEntry",
    "PageSpec",
    "Reply",
    "RobotsKind",
    "SandboxConfig",
    "SandboxSite",
    "SandboxWeb",
    "Special",
    "SpecialKind",
    "WrongLastModified",
    "canonical_url",
    "read_log",
]
