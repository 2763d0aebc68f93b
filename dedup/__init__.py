"""Duplicate detection: exact fingerprints, shingles, MinHash, a race-free LSH service in Redis."""

from dedup.config import DedupConfig
from dedup.fingerprint import content_fingerprint
from dedup.service import DedupResult, DedupService, Mirror, record_fields, signature_field

__all__ = ["DedupConfig", "DedupResult", "DedupService", "Mirror", "content_fingerprint",
           "record_fields", "signature_field"]
