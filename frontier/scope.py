"""Which URLs a crawl admits: allowed domains and depth (the URL filter before URL-seen)."""

from __future__ import annotations

from collections.abc import Iterable


class Scope:
    def __init__(self, allowed_domains: Iterable[str], max_depth: int) -> None:
        self.domains = tuple(d.lower().strip(".") for d in allowed_domains if d.strip("."))
        self.max_depth = max_depth

    def host_allowed(self, host: str) -> bool:
        """``host`` is a politeness key (``name[:port]``); a domain allows its subdomains."""
        if not self.domains:
            return True
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return any(name == d or name.endswith("." + d) for d in self.domains)

    def depth_allowed(self, depth: int) -> bool:
        return depth <= self.max_depth
