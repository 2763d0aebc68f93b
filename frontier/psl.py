"""Registered domains (eTLD+1) from the Public Suffix List, offline.

Per-domain caps and the IRLbot domain budget need "the domain a registrant controls", not the
host: ``a.b.example.co.uk`` belongs to ``example.co.uk``, which a naive "last two labels" rule
gets wrong. The list comes from the ``publicsuffixlist`` package, which ships a snapshot of
``public_suffix_list.dat`` inside its wheel and never touches the network unless its separate
``publicsuffixlist-download`` script is run (we never run it; the machine crawling has no
outside access for it anyway). Bundled snapshot: package 1.1.2.20261023, list
``VERSION: 2026-10-22_08-36-41_UTC`` (:data:`PSL_VERSION` reads it from the file). To update,
raise the pin of ``publicsuffixlist`` in ``pyproject.toml``: the package is re-released with a
fresh list (its version ends in the list's date); every worker of a crawl should run the same
one, or two workers may key one host's budget under different domains.

Decisions:

* **Private suffixes count as public** (the list's PRIVATE section: ``blogspot.com``,
  ``github.io``, ``s3.amazonaws.com``...). Each ``user.github.io`` is a different owner, so for
  politeness budgets (Heritrix ``queue-assignment`` by domain, IRLbot budgets) it must be its own
  domain, else one popular platform would share a single budget across millions of sites.
* **Unknown TLDs** (``.test``, ``.internal``) follow the list's default rule ``*``: the last
  label is the suffix, so ``a.b.test`` -> ``b.test``.
* A host that *is* a public suffix (``co.uk``, ``github.io``) or a single label
  (``localhost``) is its own registered domain, so the result is never empty.
* IP literals (``10.0.0.1``, ``[::1]``) are returned as they are; ``:port`` is stripped.
* Unicode hosts are mapped to punycode first (UTS #46, as ``canonicalize`` does), so the
  result is always the ASCII form used in canonical URLs.

Cost: ~0.1 µs per call when cached (``lru_cache``, 65,536 hosts), 5-12 µs uncached (100,000
distinct names under ``.co.uk``, 2 shared cores, varying with the machine's load).
"""

from __future__ import annotations

import re
from functools import lru_cache

from ada_url import idna_to_ascii
from publicsuffixlist import PSLFILE, PublicSuffixList

from frontier.keys import host_name

__all__ = ["PSL_VERSION", "ascii_host", "registered_domain"]

#: Includes the PRIVATE section (only_icann=False) and the default ``*`` rule.
_PSL = PublicSuffixList(accept_unknown=True, only_icann=False)
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def _read_version() -> str:
    with open(PSLFILE, encoding="utf-8", errors="replace") as fh:
        for _, line in zip(range(40), fh, strict=False):
            if line.startswith("// VERSION:"):
                return line.split(":", 1)[1].strip()
    return "unknown"


#: The ``// VERSION:`` line of the bundled list, for logs and the crawl summary.
PSL_VERSION = _read_version()


def ascii_host(name: str) -> str:
    """``name`` in punycode (UTS #46, like the URL parser); unchanged if it cannot map."""
    if name.isascii():
        return name
    try:
        return idna_to_ascii(name).decode("ascii") or name
    except (ValueError, UnicodeError):
        return name


@lru_cache(maxsize=1 << 16)
def registered_domain(host: str) -> str:
    """eTLD+1 of ``host`` (a politeness key ``name[:port]``), lowercase ASCII."""
    if host.startswith("["):  # IPv6 literal, maybe with a port
        return host[: host.find("]") + 1] if "]" in host else host
    if host.count(":") > 1:  # bare IPv6
        return host
    name = host_name(host)
    name = name.rstrip(".").lower()
    if not name or _IPV4.match(name):
        return name
    name = ascii_host(name)
    return _PSL.privatesuffix(name) or name
