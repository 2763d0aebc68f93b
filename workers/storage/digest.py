"""The exact content fingerprint of a page (the near-duplicate test is dedup/'s)."""

from __future__ import annotations

import xxhash


def content_digest(body: bytes) -> str:
    """Exact content fingerprint for dedup: xxh3-128, 32 hex digits (not cryptographic)."""
    return xxhash.xxh3_128_hexdigest(body)
