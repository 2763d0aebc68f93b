"""Cost of near-duplicate detection: CPU per ~20 KB page (normalize, shingle, MinHash, LSH
query/insert in Redis) and Redis memory per indexed page. Not a test; prints the figures.

First, per step, the implementation before the fast path (the reference copy in
tests/dedup/test_dedup_fastpath.py) against the current one, on the real pages and on sandbox pages
as the worker parses them (best of --rounds, CPU time; the results are checked to be equal).

    .venv/bin/python bench/dedup_cost.py [--pages 20000] [--rounds 7] [--steps-only]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import xxhash

from dedup.config import DedupConfig
from dedup.minhash import OnePermutationHasher
from dedup.service import DedupService, page_features
from dedup.shingles import shingles_of_hashes, string_token_hashes
from dedup.text import main_text, parse, token_string, tokens
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxSite
from tests.dedup.test_dedup_fastpath import (
    ref_main_text,
    ref_normalize_text,
    ref_page_features,
    ref_token_hashes,
    ref_tokens,
)
from workers.pipeline.parse import parse_html

REALPAGES = Path(__file__).resolve().parents[2] / "shared" / "vectors" / "realpages"


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def best_ms(fn: Callable[[Any], Any], items: list[Any], rounds: int) -> float:
    """Best-of-``rounds`` CPU milliseconds per item of ``fn`` over ``items``."""
    best = float("inf")
    for _ in range(rounds):
        c0 = time.process_time()
        for x in items:
            fn(x)
        best = min(best, time.process_time() - c0)
    return best / len(items) * 1e3


def step_table(label: str, bodies: list[tuple[str, bytes]], rounds: int) -> None:
    """Old vs new ms/page for each step of page_features, on worker-parsed trees."""
    cfg = DedupConfig()
    hasher = OnePermutationHasher(cfg.num_perm, cfg.seed)
    trees = [parse_html(b, u).tree for u, b in bodies]
    texts = [ref_main_text(t) for t in trees]
    toks = [ref_normalize_text(x) for x in texts]
    joined = [token_string(x) for x in texts]
    hashes = [string_token_hashes(j) for j in joined]
    for t, x, tk, j, h in zip(trees, texts, toks, joined, hashes, strict=True):  # same results
        assert main_text(t) == x and j == b" ".join(tk) and tokens(t) == tk
        assert np.array_equal(h, ref_token_hashes(tk))
        old, new = ref_page_features(t, cfg, hasher), page_features(t, cfg, hasher)
        assert (old is None) == (new is None)
        if old is not None and new is not None:
            assert old[0] == new[0] and old[2] == new[2] and np.array_equal(old[1], new[1])
    w = cfg.shingle_w
    steps: list[tuple[str, Callable[[Any], Any], list[Any], Callable[[Any], Any], list[Any]]] = [
        ("main_text (lxml walk)", ref_main_text, trees, main_text, trees),
        ("normalize (old: list, new: bytes)", ref_normalize_text, texts, token_string, texts),
        ("fingerprint (old: join + xxh3-128)",
         lambda tk: xxhash.xxh3_128_digest(b" ".join(tk)), toks, xxhash.xxh3_128_digest, joined),
        ("token hashes (from list / bytes)", ref_token_hashes, toks, string_token_hashes, joined),
        ("shingles + signature",
         lambda h: hasher.signature(shingles_of_hashes(h, w, unique=False)), hashes,
         lambda h: hasher.signature(shingles_of_hashes(h, w, unique=False)), hashes),
        ("page_features, total", lambda t: ref_page_features(t, cfg, hasher), trees,
         lambda t: page_features(t, cfg, hasher), trees),
        ("tokens(tree) (list API)", ref_tokens, trees, tokens, trees),
        # what the numpy xxh3 saves: the same bytes split and hashed one call per token
        ("  bytes: split+xxhash calls / numpy", lambda j: ref_token_hashes(j.split(b" ")), joined,
         string_token_hashes, joined),
    ]
    size = sum(len(b) for _, b in bodies) / len(bodies) / 1024
    ntok = sum(len(t) for t in toks) / len(toks)
    print(f"\n{label}: {len(bodies)} pages, ~{size:.1f} KB, ~{ntok:.0f} tokens; CPU ms/page,"
          f" best of {rounds}")
    print(f"  {'step':36s} {'old':>8s} {'new':>8s} {'new/old':>8s}")
    for name, old_fn, old_in, new_fn, new_in in steps:
        old_ms = best_ms(old_fn, old_in, rounds)
        new_ms = best_ms(new_fn, new_in, rounds)
        print(f"  {name:36s} {old_ms:8.3f} {new_ms:8.3f} {new_ms / old_ms:8.2f}")


def sandbox_bodies(n: int) -> list[tuple[str, bytes]]:
    """The first ``n`` generated pages of the sandbox web, any size (~33 KB on average)."""
    site = SandboxSite(SandboxConfig(hosts=400, pages_per_host=100), 8000)
    out = []
    for u in site.page_urls()[:n]:
        p = urlsplit(u)
        out.append((u, site.respond(p.hostname or "", p.path).body))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=7, help="repetitions of the old/new steps")
    ap.add_argument("--steps-only", action="store_true",
                    help="only the old/new step table (no Redis)")
    args = ap.parse_args()
    real = [(p.stem, p.read_bytes()) for p in sorted(REALPAGES.glob("*.html"))]
    if real:
        step_table(f"real pages ({REALPAGES})", real, args.rounds)
    step_table("sandbox pages", sandbox_bodies(300), args.rounds)
    if args.steps_only:
        return
    print()
    site = SandboxSite(SandboxConfig(hosts=400, pages_per_host=100), 8000)
    trees = []
    for u in site.page_urls():
        p = urlsplit(u)
        body = site.respond(p.hostname or "", p.path).body
        if 18_000 <= len(body) <= 22_000:
            trees.append((u, p.netloc, parse(body), len(body)))
        if len(trees) >= 200:
            break
    avg = sum(t[3] for t in trees) / len(trees)
    with tempfile.TemporaryDirectory() as d:
        srv = EmbeddedRedis(d).start()
        try:
            client = redis.Redis.from_url(srv.url)
            svc = DedupService(client, "bench")
            n = 2000
            c0, w0 = cpu(), time.perf_counter()
            for i in range(n):
                url, host, root, _ = trees[i % len(trees)]
                page_features(root, svc.config, svc.hasher)
            feat = (cpu() - c0) / n
            c0, w0 = cpu(), time.perf_counter()
            s0 = float(client.info("cpu")["used_cpu_user"]) + float(
                client.info("cpu")["used_cpu_sys"])
            for i in range(n):
                url, host, root, _ = trees[i % len(trees)]
                svc.check(f"{url}?copy={i}", host, root)
            total = (cpu() - c0) / n
            wall = (time.perf_counter() - w0) / n
            s1 = float(client.info("cpu")["used_cpu_user"]) + float(
                client.info("cpu")["used_cpu_sys"])
            print(f"pages ~{avg / 1024:.1f} KB (lxml tree given, as from the worker)")
            print(f"normalize+shingle+MinHash  CPU {feat * 1e3:.3f} ms/page")
            print(f"+ LSH check (client side)  CPU {total * 1e3:.3f} ms/page, wall "
                  f"{wall * 1e3:.3f} ms/page, Redis server CPU {(s1 - s0) / n * 1e3:.3f} ms/page")
            # memory: index distinct pages (random text) and measure used_memory growth
            client.flushall()
            svc = DedupService(client, "mem")
            base_mem = int(client.info("memory")["used_memory"])
            rng = np.random.default_rng(1)
            words = ["".join(chr(97 + (i // 26**k) % 26) for k in range(3)) for i in range(5000)]
            for i in range(args.pages):
                text = " ".join(words[j] for j in rng.integers(0, 5000, 300))
                svc.check(f"http://h{i % 500}.example/p/{i}.html", f"h{i % 500}.example",
                          f"<html><body><p>{text}</p></body></html>".encode())
            used = int(client.info("memory")["used_memory"]) - base_mem
            per = used / args.pages
            print(f"Redis memory: {per:.0f} B per indexed canonical page "
                  f"({args.pages} pages); 100,000 pages ≈ {per * 1e5 / 2**20:.0f} MiB")
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
