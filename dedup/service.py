"""DedupService: the per-page call a worker makes after parsing (exact, then MinHash LSH)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import redis
import xxhash

from dedup.clusters import Mirror
from dedup.config import DedupConfig
from dedup.lsh import LSHIndex
from dedup.minhash import MinHasher, OnePermutationHasher, to_base64
from dedup.shingles import shingles_of_hashes, string_token_hashes
from dedup.text import page_token_string
from frontier.slotpipe import SlotPipeline

Kind = Literal["unique", "exact", "near", "skipped"]


@dataclass(frozen=True)
class DedupResult:
    #: unique (now a canonical page), exact (same normalized text), near (estimated Jaccard
    #: >= threshold), skipped (dedup disabled or no text).
    kind: Kind
    canonical_url: str | None = None
    similarity: float | None = None
    #: True when the page's outgoing links should not be admitted (per DedupConfig).
    skip_links: bool = False
    #: Set when the page's host is (so far) a mirror of this other host.
    mirror_of: str | None = None
    mirror_fraction: float | None = None
    signature: np.ndarray | None = field(default=None, repr=False, compare=False)
    fingerprint: str | None = None


#: (128-bit fingerprint of the normalized text, MinHash signature, token count)
Features = tuple[bytes, np.ndarray, int]


def page_features(doc: Any, config: DedupConfig,
                  hasher: MinHasher | OnePermutationHasher) -> Features | None:
    """(128-bit fingerprint of the normalized text, MinHash signature, token count).

    The same values as from the token list ``dedup.text.tokens(doc)`` (fingerprint of
    ``b" ".join(tokens)``, signature of ``shingle_hashes(tokens, w, unique=False)``), computed
    from the joined token string without a bytes object per token.
    """
    joined = page_token_string(doc)
    if not joined:
        return None
    hashes = string_token_hashes(joined)  # one per token (cheaper than joined.count(b" "))
    if len(hashes) < config.min_tokens:
        return None
    fp = xxhash.xxh3_128_digest(joined)
    shingles = shingles_of_hashes(hashes, config.shingle_w, unique=False)
    return fp, hasher.signature(shingles), len(hashes)


class DedupService:
    """``check`` is atomic in Redis: of near-duplicates checked at once, exactly one is unique."""

    def __init__(self, client: redis.Redis, namespace: str,
                 config: DedupConfig | None = None) -> None:
        self.config = cfg = config or DedupConfig()
        self.hasher = OnePermutationHasher(cfg.num_perm, cfg.seed)
        self.index = LSHIndex(client, namespace, cfg.num_perm, cfg.threshold, cfg.bands,
                              cfg.rows, cfg.max_candidates, cfg.max_bucket)
        self.client = client

    def check(self, url: str, host: str, html_tree_or_body: Any,
              record: bool = True) -> DedupResult:
        """Classify a fetched page. ``html_tree_or_body``: the lxml root the worker parsed, or
        the raw body. ``record=False`` only queries (nothing is indexed or counted)."""
        feats = self.features(html_tree_or_body)
        if feats is None:
            return DedupResult("skipped")
        return self.check_many([(url, host, feats)], record)[0]

    def features(self, html_tree_or_body: Any) -> Features | None:
        """The client-side half of a check (no Redis); None when the page is not checked
        (dedup disabled, or too few tokens)."""
        if not self.config.enabled:
            return None
        return page_features(html_tree_or_body, self.config, self.hasher)

    def check_many(self, pages: Sequence[tuple[str, str, Features]],
                   record: bool = True) -> list[DedupResult]:
        """Classify ``(url, host, features)`` of several pages in one round trip, in order:
        the same answers as one ``check`` after another (a worker checks a task's pages at
        once: one round trip instead of one a page, issue 7)."""
        pipe = SlotPipeline(self.client)
        for url, host, (fp, sig, _) in pages:
            self.index.queue_check(pipe, fp, host, url, sig, write=record)
        replies = pipe.execute()
        return [self._result(feats, reply)
                for (_, _, feats), reply in zip(pages, replies, strict=True)]

    def _result(self, feats: Features, reply: list[Any]) -> DedupResult:
        cfg = self.config
        fp, sig, _ = feats
        kind_b, canon_b, matches, mhost_b, mcount, pages = reply
        kind = kind_b.decode() if isinstance(kind_b, bytes) else str(kind_b)
        canon = canon_b.decode() if isinstance(canon_b, bytes) else None
        mirror_of = mhost_b.decode() if isinstance(mhost_b, bytes) else None
        pages = int(pages)
        is_mirror = bool(mirror_of) and int(mcount) >= cfg.mirror_min_pages and (
            int(mcount) >= cfg.mirror_fraction * pages)
        duplicate = kind in ("exact", "near")
        skip = (duplicate and cfg.skip_links_of_duplicates) or (
            is_mirror and cfg.skip_links_of_mirrors)
        return DedupResult(
            kind=kind,  # type: ignore[arg-type]
            canonical_url=canon,
            similarity=(int(matches) / cfg.num_perm) if duplicate else None,
            skip_links=skip,
            mirror_of=mirror_of if is_mirror else None,
            mirror_fraction=(int(mcount) / pages) if is_mirror and pages else None,
            signature=sig, fingerprint=fp.hex(),
        )

    def mirrors(self) -> list[Mirror]:
        """Hosts whose best 'other host' currently passes the mirror rule, most copied first."""
        keys, cfg = self.index.keys, self.config
        pages = {h.decode(): int(n) for h, n in self.client.hgetall(keys.hostpages).items()}
        out = []
        for h, v in self.client.hgetall(keys.mirror).items():
            host = h.decode()
            other, _, count = v.decode().partition("\t")
            c, n = int(count), pages.get(host, 0)
            if c >= cfg.mirror_min_pages and c >= cfg.mirror_fraction * n:
                out.append(Mirror(host, other, c, n))
        return sorted(out, key=lambda m: (-m.fraction, m.host))

    def stats(self) -> dict[str, int]:
        keys = self.index.keys
        return {"pages": int(self.client.get(keys.seq) or 0),
                "canonicals": int(self.client.hlen(keys.sig))}


def signature_field(result: DedupResult) -> str:
    """The ``minhash`` field of a JSONL record: base64 of the packed little-endian uint32s."""
    return to_base64(result.signature) if result.signature is not None else ""


def record_fields(result: DedupResult) -> dict[str, Any]:
    """Every dedup field of a fetched page's JSONL record (None values are dropped there)."""
    return {"dup_kind": result.kind, "dup_of": result.canonical_url,
            "similarity": round(result.similarity, 4) if result.similarity is not None else None,
            "mirror_of": result.mirror_of, "minhash": signature_field(result) or None}
