"""``trawl dedup-report``: clusters and mirrors of a finished crawl, from its JSONL records.

Records with ``dup_of`` give the online service's pairs. ``--all-pairs`` recomputes them
offline from the ``minhash`` fields the lecture's way: for each of the k minima, sort the
(minimum, page) pairs, and count for every pair of pages in a run of equal minima one match;
pairs with matches >= threshold * k are near-duplicates. That is the exact all-pairs sketch
comparison (no LSH), quadratic only within runs: fine for small crawls.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from dedup.clusters import clusters_of, mirror_pairs
from dedup.minhash import from_base64
from frontier.urls import host_of


def read_records(records_dir: Path) -> Iterator[dict[str, Any]]:
    paths = [records_dir] if records_dir.is_file() else sorted(records_dir.glob("*.jsonl"))
    for path in paths:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)


def all_pairs(signatures: dict[str, np.ndarray], threshold: float = 0.9) -> dict[
        tuple[str, str], float]:
    """Pairs of URLs whose signatures agree in at least ``threshold`` of the minima."""
    urls = sorted(signatures)
    if not urls:
        return {}
    sigs = np.stack([signatures[u] for u in urls])
    k = sigs.shape[1]
    matches: Counter[tuple[int, int]] = Counter()
    for col in range(k):
        order = np.argsort(sigs[:, col], kind="stable")
        values = sigs[order, col]
        bounds = np.flatnonzero(np.diff(values)) + 1
        for run in np.split(order, bounds):
            if len(run) > 1:
                for a, b in combinations(sorted(run.tolist()), 2):
                    matches[(a, b)] += 1
    need = threshold * k - 1e-9
    return {(urls[a], urls[b]): m / k for (a, b), m in matches.items() if m >= need}


def build_report(records: list[dict[str, Any]], use_all_pairs: bool = False,
                 threshold: float = 0.9, top: int = 10) -> dict[str, Any]:
    fetched = [r for r in records if r.get("outcome") == "fetched"]
    pages = Counter(host_of(r["url"]) for r in fetched)
    online = [(r["url"], r["dup_of"]) for r in fetched if r.get("dup_of")]
    kinds = Counter(r.get("dup_kind", "none") for r in fetched)
    clusters = clusters_of(online)
    report: dict[str, Any] = {
        "pages": len(fetched),
        "kinds": dict(kinds),
        "duplicate_pairs": len(online),
        "clusters": len(clusters),
        "pages_in_clusters": sum(map(len, clusters)),
        "largest_clusters": clusters[:top],
        "mirrors": [{"host": m.host, "of_host": m.of_host, "duplicates": m.duplicates,
                     "pages": m.pages, "fraction": round(m.fraction, 4)}
                    for m in mirror_pairs(pages, online)],
    }
    if use_all_pairs:
        sigs = {r["url"]: from_base64(r["minhash"]) for r in fetched if r.get("minhash")}
        offline = all_pairs(sigs, threshold)
        off_clusters = clusters_of(offline)
        members_online = {u for c in clusters for u in c}
        members_offline = {u for c in off_clusters for u in c}
        report["all_pairs"] = {
            "signatures": len(sigs),
            "near_pairs": len(offline),
            "clusters": len(off_clusters),
            "pages_in_clusters": len(members_offline),
            "only_online": sorted(members_online - members_offline)[:top],
            "only_offline": sorted(members_offline - members_online)[:top],
            "agreement": (len(members_online & members_offline)
                          / max(1, len(members_online | members_offline))),
        }
    return report


def report_command(records_dir: Path, json_out: Path | None, all_pairs: bool,
                   out: TextIO = sys.stdout) -> int:
    """Print the report; write it as JSON to ``json_out``. Returns the exit status."""
    if not records_dir.exists():
        print(f"dedup-report: {records_dir} does not exist", file=out)
        return 2
    rep = build_report(list(read_records(records_dir)), use_all_pairs=all_pairs)
    print(f"pages fetched        {rep['pages']}", file=out)
    print(f"dedup kinds          {rep['kinds']}", file=out)
    print(f"duplicate pairs      {rep['duplicate_pairs']}", file=out)
    print(f"clusters             {rep['clusters']} ({rep['pages_in_clusters']} pages)",
          file=out)
    for c in rep["largest_clusters"][:5]:
        print(f"  {len(c):5d}  {c[0]}  ...", file=out)
    print(f"mirror hosts         {len(rep['mirrors'])}", file=out)
    for m in rep["mirrors"]:
        print(f"  {m['host']} mirrors {m['of_host']}: {m['duplicates']}/{m['pages']}"
              f" = {m['fraction']:.0%}", file=out)
    if all_pairs:
        ap = rep["all_pairs"]
        print(f"all-pairs (offline)  {ap['near_pairs']} pairs, {ap['clusters']} clusters, "
              f"agreement with online {ap['agreement']:.1%}", file=out)
    if json_out is not None:
        json_out.write_text(json.dumps(rep, indent=2) + "\n", encoding="utf-8")
    return 0
