"""robots.txt rules as RFC 9309 reads them: groups, product tokens, path matching.

:class:`~workers.pipeline.robots.RobotsPolicy` used protego for this. An RFC 9309 conformance
check (``tests/workers/test_robots_rfc9309.py``, with Google's reference parser,
github.com/google/robotstxt, as the tie-breaker) found protego deciding otherwise in three ways:

* a line that is not an Allow/Disallow rule (``Foo: bar``, ``Crawl-delay: 5``) between two
  ``User-agent`` lines ends the group, so the agents above it lose the rules below (§2.1:
  only a ``User-agent`` line after rule lines starts a group; unknown lines are ignored);
* ``User-agent: FOO BAR`` names the agent "foo bar", not the product token ``foo`` (§2.2.1),
  and a line's name matches any agent it is a prefix of (``fo`` applies to ``foo``);
* its path comparison decodes every escape but ``%2F`` and ``%25``, so ``/a%3Fb`` (one
  segment) equals ``/a?b`` (a query), and the escapes of octets that are not UTF-8 all turn
  into U+FFFD, so ``Disallow: /%FF`` blocks ``/%FE`` (§2.2.2 decodes only unreserved ones).

Rewriting the text before protego reads it would fix the first point and multi-word names, but
prefix matching and the third point sit in its matcher, which re-quotes whatever it is given. So
the rules are read and matched here; protego stays the sandbox's independent oracle
(``sandbox/robots.py``).

Comparison form (§2.2.2), applied to the rule's path and to the URL's path alike: octets outside
ASCII, and the ASCII that a URI cannot hold raw (controls, space, ``"<>\\^`{|}`` and a ``%``
not starting an escape), are percent-encoded; an escape of an unreserved character
(``A-Za-z0-9-._~``) is decoded; every other escape is kept, with upper-case hex, so ``%2F`` stays
apart from ``/`` and ``%3F`` from ``?``. ``*`` and ``$`` are special in rules only: in the URL
they are written ``%2A`` and ``%24``, which is how a rule names them literally (§2.2.3).
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["RobotsRules", "canonical_path", "parse_rules", "product_token", "request_path"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\v\f"
# Key spellings: RFC 9309 names plus the typos Google's parser accepts.
_USER_AGENT = frozenset({"user-agent", "useragent", "user agent"})
_ALLOW = frozenset({"allow"})
_DISALLOW = frozenset({"disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"})
_CRAWL_DELAY = frozenset({"crawl-delay", "crawl delay"})  # not RFC 9309; kept from protego

_TOKEN = re.compile(r"[A-Za-z_-]*")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# ASCII kept raw in the comparison form: the printable characters a URI may hold, but "%".
_RAW = frozenset(chr(c) for c in range(0x21, 0x7F)) - frozenset('"<>\\^`{|}%')
# Strings made only of these are already in comparison form (the common case, no work).
_PLAIN_URL = re.compile(r"[A-Za-z0-9._~/!&'()+,;=:@?-]*").fullmatch
_PLAIN_RULE = re.compile(r"[A-Za-z0-9._~/!&'()+,;=:@?*-]*\$?").fullmatch
_PATH_START = re.compile(r"[/?;]")
_HEX = frozenset(b"0123456789ABCDEFabcdef")


def product_token(value: str) -> str:
    """The agent a ``User-agent`` value names, lower-cased: ``*`` for the global group, else its
    leading run of ``[A-Za-z_-]`` (§2.2.1; Google: ``FOO BAR`` and ``Foo/1.2`` name ``foo``)."""
    if value[:1] == "*" and (len(value) == 1 or value[1].isspace()):
        return "*"
    token = _TOKEN.match(value)  # always matches, possibly empty
    return token.group().lower() if token else ""


def canonical_path(value: str, literal: str = "") -> str:
    """``value`` in comparison form (see the module docstring); characters of ``literal``
    are encoded too (the URL passes ``*$``, a rule passes ``$`` for a non-final dollar)."""
    data = value.encode("utf-8", "surrogatepass")
    out: list[str] = []
    i, n = 0, len(data)
    while i < n:
        octet = data[i]
        if octet == 0x25 and i + 2 < n and data[i + 1] in _HEX and data[i + 2] in _HEX:
            char = chr(int(data[i + 1:i + 3], 16))
            out.append(char if char in _UNRESERVED else f"%{ord(char):02X}")
            i += 3
            continue
        char = chr(octet)
        out.append(char if char in _RAW and char not in literal else f"%{octet:02X}")
        i += 1
    return "".join(out)


def request_path(url: str) -> str:
    """Path, params and query of ``url`` as written (scheme, authority and fragment dropped),
    starting with ``/``; ``/`` when there is none. Bare paths are accepted too."""
    start = 2 if url.startswith("//") else 0
    scheme_end = url.find("://", start)
    first = _PATH_START.search(url, start)
    if scheme_end != -1 and (first is None or scheme_end < first.start()):
        first = _PATH_START.search(url, scheme_end + 3)
    if first is None:
        return "/"
    begin, end = first.start(), url.find("#", start)
    if end == -1:
        end = len(url)
    elif end < begin:
        return "/"  # the fragment starts before any path
    path = url[begin:end]
    return path if path.startswith("/") else "/" + path


def _url_form(url: str) -> str:
    path = request_path(url)
    return path if _PLAIN_URL(path) else canonical_path(path, "*$")


def _rule_form(value: str) -> str:
    """A rule's path in comparison form; a final ``$`` stays the end anchor (§2.2.3)."""
    if _PLAIN_RULE(value):
        return value
    anchored = value.endswith("$")
    body = canonical_path(value[:-1] if anchored else value, "$")
    return body + "$" if anchored else body


class _Rule:
    """One Allow/Disallow line: ``*`` matches any run of octets, a final ``$`` the end."""

    __slots__ = ("allow", "anchored", "parts", "priority")

    def __init__(self, pattern: str, allow: bool) -> None:
        self.allow = allow
        self.priority = len(pattern)  # §2.2.2: the match with the most octets wins
        self.anchored = pattern.endswith("$")
        body = pattern[:-1] if self.anchored else pattern
        self.parts = re.sub(r"\*+", "*", body).split("*")

    def matches(self, path: str) -> bool:
        """Leftmost placement of each literal part; linear, so hostile patterns stay cheap."""
        parts = self.parts
        if not path.startswith(parts[0]):
            return False
        if len(parts) == 1:
            return not self.anchored or len(path) == len(parts[0])
        pos = len(parts[0])
        for part in parts[1:-1]:
            pos = path.find(part, pos)
            if pos < 0:
                return False
            pos += len(part)
        last = parts[-1]
        if self.anchored:
            return len(path) - len(last) >= pos and path.endswith(last)
        return path.find(last, pos) >= 0


@dataclass
class _Group:
    rules: list[_Rule] = field(default_factory=list)
    delay: float | None = None
    closed: bool = False  # an Allow/Disallow line was seen: the next User-agent starts a group


def _key_value(line: str) -> tuple[str, str] | None:
    """``key: value`` of a line (comment dropped, key lower-cased), or None. Like Google's
    parser, a line without a colon is read as ``key value`` if it is exactly two words."""
    line = line.split("#", 1)[0].strip(_WHITESPACE)
    key, colon, value = line.partition(":")
    if not colon:
        words = line.split()
        if len(words) != 2:
            return None
        key, value = words
    key = " ".join(key.lower().split())
    return (key, value.strip(_WHITESPACE)) if key else None


def _delay(value: str) -> float | None:
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


def _add_rule(group: _Group, value: str, allow: bool) -> None:
    group.closed = True  # even an empty value ends the run of User-agent lines (Google)
    pattern = _rule_form(value)
    if not pattern:
        return
    group.rules.append(_Rule(pattern, allow))
    slash = pattern.rfind("/")
    if allow and slash >= 0 and pattern.startswith("/index.htm", slash):
        # Google: allowing /dir/index.htm(l) allows /dir/ itself
        group.rules.append(_Rule(pattern[:slash + 1] + "$", True))


def parse_rules(text: str) -> RobotsRules:
    """Read a robots.txt body (already decoded); never fails on odd input."""
    groups: dict[str, list[_Group]] = {}
    group: _Group | None = None
    for line in _LINE_BREAK.split(text):
        pair = _key_value(line)
        if pair is None:
            continue
        key, value = pair
        if key in _USER_AGENT:
            if group is None or group.closed:
                group = _Group()
            token = product_token(value)
            if token:
                listed = groups.setdefault(token, [])
                if not listed or listed[-1] is not group:
                    listed.append(group)
        elif group is None:
            continue  # rules before any User-agent line apply to nobody
        elif key in _ALLOW or key in _DISALLOW:
            _add_rule(group, value, key in _ALLOW)
        elif key in _CRAWL_DELAY:
            delay = _delay(value)
            group.delay = group.delay if delay is None else delay
        # Sitemap and unknown keys: ignored, and they do not end the group (§2.1)
    return RobotsRules(groups)


class _Merged(NamedTuple):
    rules: list[_Rule]  # longest first, Allow first on a tie
    heads: tuple[str, ...]  # the distinct parts before the first "*"
    delay: float | None


class RobotsRules:
    """The groups of one robots.txt by product token; answers for one agent at a time."""

    def __init__(self, groups: dict[str, list[_Group]]) -> None:
        self._groups = groups
        self._merged: dict[str, _Merged] = {}

    def _for(self, agent: str) -> _Merged:
        """The rules of every group naming ``agent`` (case-insensitive, whole token), merged;
        the ``*`` groups only when none does (§2.2.1)."""
        token = agent.strip().lower()
        merged = self._merged.get(token)
        if merged is None:
            groups = self._groups.get(token) or self._groups.get("*") or []
            rules = [rule for group in groups for rule in group.rules]
            # longest first; on a tie Allow first (§2.2.2: the least restrictive rule)
            rules.sort(key=lambda r: (r.priority, r.allow), reverse=True)
            delays = [g.delay for g in groups if g.delay is not None]
            # every rule needs the path to start with its part before any "*": one startswith
            # over all of them rules most paths out at once (protego's trick)
            heads = tuple({rule.parts[0] for rule in rules})
            merged = self._merged[token] = _Merged(rules, heads, delays[-1] if delays else None)
        return merged

    def allowed(self, url: str, agent: str) -> bool:
        """May ``agent`` (a product token) fetch ``url`` (absolute, or a bare path)?"""
        path = _url_form(url)
        if path.partition("?")[0] == "/robots.txt":
            return True  # §2.2.2: /robots.txt is implicitly allowed
        merged = self._for(agent)
        if not path.startswith(merged.heads):
            return True
        for rule in merged.rules:
            if rule.matches(path):
                return rule.allow
        return True

    def crawl_delay(self, agent: str) -> float | None:
        """The last valid Crawl-delay of the groups that apply to ``agent`` (not RFC 9309)."""
        return self._for(agent).delay
