"""Duplicate detection: exact fingerprints, shingles, MinHash and a race-free LSH service in
Redis. The public API is in dedup.service (DedupService, DedupResult, signature_field) and
dedup.config (DedupConfig); this package import stays light for the worker's hot path."""
