"""DedupConfig: every near-duplicate setting of a crawl (all workers must use the same)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: Bands of the LSH index: a bucket's field starts with its band's number in one byte
#: (dedup/lsh.py band_fields).
MAX_BANDS = 255


@dataclass(frozen=True)
class DedupConfig:
    enabled: bool = True
    #: Words per shingle.
    shingle_w: int = 4
    #: MinHash permutations (signature length, 4 bytes each).
    num_perm: int = 128
    #: Estimated Jaccard at or above which a page is a near-duplicate.
    threshold: float = 0.9
    #: LSH bands x rows (bands * rows <= num_perm); see dedup/lsh.py for the S-curve.
    bands: int = 16
    rows: int = 8
    #: Seed of the MinHash permutations: changing it invalidates an existing index.
    seed: int = 1
    #: Do not admit the outgoing links of exact and near duplicates.
    skip_links_of_duplicates: bool = True
    #: Do not admit the links of pages of a host detected as a mirror of another host.
    skip_links_of_mirrors: bool = True
    #: A host is a mirror of H once at least this many of its pages duplicate H's pages ...
    mirror_min_pages: int = 10
    #: ... and they are at least this fraction of its pages checked so far.
    mirror_fraction: float = 0.8
    #: Pages with fewer normalized tokens are not checked (nothing to compare).
    min_tokens: int = 1
    #: Bound on candidates verified per check, and on ids kept per LSH bucket.
    max_candidates: int = 64
    max_bucket: int = 256

    def __post_init__(self) -> None:
        if self.shingle_w < 1 or self.num_perm < 1:
            raise ValueError("shingle_w and num_perm must be >= 1")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold={self.threshold}: must be in (0, 1]")
        if self.bands < 1 or self.rows < 1 or self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands*rows={self.bands * self.rows} must be in 1..num_perm")
        if self.bands > MAX_BANDS:
            raise ValueError(f"bands={self.bands}: at most {MAX_BANDS} (one byte numbers a band)")
        if not 0.0 < self.mirror_fraction <= 1.0:
            raise ValueError(f"mirror_fraction={self.mirror_fraction}: must be in (0, 1]")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
