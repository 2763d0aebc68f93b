"""The sandbox web's labelled duplicates through DedupService at threshold 0.9, the mirror
hosts, the offline report, and a race: near-duplicates submitted at once by many processes."""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import random
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from dedup.config import DedupConfig
from dedup.report import report_command
from dedup.service import DedupService, record_fields
from sandbox import SandboxConfig, SandboxSite

CONFIG = SandboxConfig(seed=5, hosts=200, pages_per_host=20, duplicates=True)


@pytest.fixture(scope="module")
def site() -> SandboxSite:
    return SandboxSite(CONFIG, 8080)


def body(site: SandboxSite, url: str) -> bytes:
    p = urlsplit(url)
    reply = site.respond(p.hostname or "", p.path)
    assert reply.status == 200, url
    return reply.body


def host(url: str) -> str:
    return urlsplit(url).netloc


def test_labelled_pairs_flagged_at_threshold_0_9(site: SandboxSite,
                                                  redis_client: redis.Redis) -> None:
    svc = DedupService(redis_client, "labels", DedupConfig(threshold=0.9))
    pairs = [p for p in site.duplicate_pairs() if p.label != "mirror"]
    for base in sorted({p.url_a for p in pairs}):
        assert svc.check(base, host(base), body(site, base)).kind == "unique"
    curve: dict[float, list[bool]] = defaultdict(list)
    exact_missed, flagged = [], {}
    for p in pairs:
        res = svc.check(p.url_b, host(p.url_b), body(site, p.url_b), record=False)
        hit = res.kind in ("exact", "near") and res.canonical_url == p.url_a
        flagged[p] = hit
        curve[round(p.jaccard, 2)].append(hit)
        if p.jaccard == 1.0 and res.kind != "exact":
            exact_missed.append(p)
    hi = [flagged[p] for p in pairs if p.jaccard >= 0.95]
    lo = [flagged[p] for p in pairs if p.jaccard <= 0.8]
    print(f"\nJ>=0.95: {sum(hi)}/{len(hi)} flagged; J<=0.8: {sum(lo)}/{len(lo)} flagged")
    for j in sorted(curve):
        print(f"  J={j:.2f}  {sum(curve[j]):3d}/{len(curve[j])}")
    assert not exact_missed
    assert len(hi) >= 300 and sum(hi) >= 0.98 * len(hi)
    assert len(lo) >= 150 and sum(lo) <= 0.01 * len(lo)


def test_every_mirror_host_found_online_and_in_the_report(site: SandboxSite, tmp_path: Path,
                                                          redis_client: redis.Redis) -> None:
    mirrors = site.mirror_hosts()
    assert len(mirrors) == 2
    svc = DedupService(redis_client, "mirrors")
    urls = [site.url(h, p) for h in sorted({*mirrors, *mirrors.values()}, key=lambda h:
                                             h in mirrors) for p in site.layout.paths[h]]
    records = []
    for u in urls:
        res = svc.check(u, host(u), body(site, u))
        rec = {"url": u, "outcome": "fetched", **record_fields(res)}
        records.append({k: v for k, v in rec.items() if v is not None})
        if host(u) in {f"{m}:8080" for m in mirrors}:
            assert res.kind == "exact"
    found = {m.host: (m.of_host, m.fraction) for m in svc.mirrors()}
    assert found == {f"{m}:8080": (f"{s}:8080", 1.0) for m, s in mirrors.items()}

    rec_dir = tmp_path / "records"
    rec_dir.mkdir()
    (rec_dir / "w.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = io.StringIO()
    assert report_command(rec_dir, tmp_path / "rep.json", True, out) == 0
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert {m["host"] for m in rep["mirrors"]} == {f"{m}:8080" for m in mirrors}
    assert rep["clusters"] == CONFIG.pages_per_host * len(mirrors)  # one per mirrored path
    assert rep["all_pairs"]["agreement"] == 1.0
    assert "mirrors" in out.getvalue()


def _worker(url: str, jobs: list[tuple[str, bytes]], start: mp.Event,  # type: ignore[valid-type]
            out: mp.Queue) -> None:  # type: ignore[valid-type]
    svc = DedupService(redis.Redis.from_url(url), "race")
    start.wait()
    out.put([(u, svc.check(u, host(u), b).kind, svc.check(u, host(u), b, record=False)
              .canonical_url) for u, b in jobs])


def test_near_duplicates_submitted_at_once_yield_one_canonical_per_cluster(
        site: SandboxSite, redis_server) -> None:  # type: ignore[no-untyped-def]
    # Members pairwise >= ~0.96 (near-duplicates of near-duplicates drift apart otherwise).
    tight = {"exact", "date", "frame", "j0.99", "j0.97"}
    pairs = [p for p in site.duplicate_pairs() if p.label in tight]
    clusters: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        clusters[p.url_a] |= {p.url_a, p.url_b}
    jobs = [(u, body(site, u)) for c in clusters.values() for u in sorted(c)]
    random.Random(1).shuffle(jobs)
    n = 8
    ctx = mp.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(redis_server.url, jobs[i::n], start, out))
             for i in range(n)]
    for p in procs:
        p.start()
    start.set()
    results = [r for _ in procs for r in out.get(timeout=60)]
    for p in procs:
        p.join(10)
    kind = {u: k for u, k, _ in results}
    for members in clusters.values():
        uniques = [u for u in members if kind[u] == "unique"]
        assert len(uniques) == 1, uniques
    assert sum(k == "unique" for k in kind.values()) == len(clusters)


def test_a_tiny_web_gets_its_families_or_a_clear_error() -> None:
    """The smallest webs: families on the few free hosts (no mirrors), or a ValueError that
    says why, not an IndexError from an empty host list."""
    site = SandboxSite(SandboxConfig(seed=1, hosts=13, pages_per_host=10, ips=4,
                                     duplicates=True), 8080)
    assert site.dups is not None and site.dups.pairs and not site.dups.mirrors
    with pytest.raises(ValueError, match="needs an allow-all host"):
        SandboxSite(SandboxConfig(seed=1, hosts=12, pages_per_host=10, ips=4, duplicates=True),
                    8080)
