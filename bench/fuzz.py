"""The bounded fuzz run of issue 21: 100,000+ generated inputs over the five targets, from one
fixed seed, against the same properties as the hypothesis tests (tests/fuzz/properties.py).

Targets (share of ``--inputs``): URL canonicalization (``url``, and ``resolve``: the link
resolution memo against ``join_url``), robots.txt parsing (``robots``), HTML link extraction
(``html``: random bytes, pages of hostile pieces, and the real pages of
``$TRAWL_VECTORS/realpages`` mutated: byte flips, splices, truncations, tags nested up to
20,000 deep, hostile links), the WARC writer read back by warcio (``warc``: 1-5 random fetches
per input) and the task message decoder (``order``: one order, ``batch``: a task argument,
``body``: a task body as raw bytes through kombu's JSON decoder).

Input ``i`` of target ``t`` is generated from ``random.Random(f"{seed}:{t}:{i}")`` alone, so
``--replay t:i`` re-runs exactly one input. A *crash* is any exception other than the
documented rejections (InvalidURL, BadMessage, kombu's DecodeError); a *property failure* is a
broken property (PropertyFailed). Both are listed in the JSON written to
``bench/results/fuzz-<UTC date-time>.json``. Not run in CI (minutes, not seconds). Run::

    .venv/bin/python bench/fuzz.py --seed 1 --inputs 100000
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz import inputs as gen  # noqa: E402
from tests.fuzz import properties as prop  # noqa: E402

#: Target -> share of the inputs. Cheap targets get more inputs, so each target runs about
#: a minute or less on one core.
SHARES = {"url": 0.30, "resolve": 0.06, "robots": 0.10, "html": 0.16, "warc": 0.08,
          "order": 0.14, "batch": 0.08, "body": 0.08}
_TMP = Path(tempfile.mkdtemp(prefix="trawl-fuzz-"))


def _warc(rng: random.Random) -> str:
    fetches = [gen.random_fetch(rng) for _ in range(rng.randrange(1, 6))]
    with tempfile.TemporaryDirectory(dir=_TMP) as tmp:
        return prop.check_warc(fetches, Path(tmp), rng.choice((1, 5000, 10**9)))


def _body(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.3:
        raw = rng.randbytes(rng.randrange(200))
    elif r < 0.8:
        raw = json.dumps([[[gen.random_order(rng) for _ in range(rng.randrange(4))]], {}, {}],
                         allow_nan=True).encode()
        if rng.random() < 0.3:
            raw = gen.mutate(rng, raw, (), links=False, rounds=1)
    else:
        raw = json.dumps(gen.random_json(rng)).encode()
    return prop.check_body(raw)


#: Target -> one input: generate it from the rng, run its checker, return the outcome label.
TARGETS: dict[str, Callable[[random.Random], str]] = {
    "url": lambda rng: prop.check_canonicalize(gen.random_url(rng), gen.random_base(rng)),
    "resolve": lambda rng: prop.check_resolve(
        [(gen.random_url(rng), gen.random_base(rng) or "http://example.com/d/p.html")
         for _ in range(rng.randrange(1, 8))]),
    "robots": lambda rng: prop.check_robots(gen.random_robots(rng), gen.random_paths(rng),
                                            [rng.randrange(60) for _ in range(3)]),
    "html": lambda rng: prop.check_parse(
        gen.random_html(rng), gen.random_base(rng) or "http://example.com/dir/page.html",
        rng.choice(gen.CONTENT_TYPES), rng.choice((0, 1, 7, 5000))),
    "warc": _warc,
    "order": lambda rng: prop.check_order(gen.random_order(rng)),
    "batch": lambda rng: prop.check_batch(
        [gen.random_order(rng) for _ in range(rng.randrange(5))] if rng.random() < 0.8
        else gen.random_json(rng)),
    "body": _body,
}
DOCUMENTED = "InvalidURL, BadMessage and kombu DecodeError are caught inside the checkers"


def rng_for(seed: int, target: str, i: int) -> random.Random:
    return random.Random(f"{seed}:{target}:{i}")


def run_one(seed: int, target: str, i: int) -> tuple[str, dict[str, Any] | None]:
    """Outcome label, or ("crash"/"property", details) for input ``i`` of ``target``."""
    try:
        return TARGETS[target](rng_for(seed, target, i)), None
    except prop.PropertyFailed as exc:
        kind = "property"
        err: BaseException = exc
    except Exception as exc:  # a crash of the code under test: record it, go on
        kind = "crash"
        err = exc
    return kind, {"target": target, "index": i, "kind": kind, "type": type(err).__name__,
                  "message": str(err)[:500],
                  "trace": traceback.format_exception(err)[-3:],
                  "replay": f"bench/fuzz.py --seed {seed} --replay {target}:{i}"}


def counts(total: int, targets: list[str]) -> dict[str, int]:
    share = sum(SHARES[t] for t in targets)
    out = {t: int(total * SHARES[t] / share) for t in targets}
    out[targets[0]] += total - sum(out.values())  # rounding: the total is exact
    return out


def fuzz(seed: int, total: int, targets: list[str]) -> dict[str, Any]:
    plan = counts(total, targets)
    report: dict[str, Any] = {}
    failures: list[dict[str, Any]] = []
    for target, n in plan.items():
        outcomes: Counter[str] = Counter()
        slowest = (0.0, -1)
        t0 = time.perf_counter()
        for i in range(n):
            s = time.perf_counter()
            label, failure = run_one(seed, target, i)
            took = time.perf_counter() - s
            slowest = max(slowest, (took, i))
            outcomes[label] += 1
            if failure is not None and len(failures) < 200:
                failures.append(failure)
        elapsed = time.perf_counter() - t0
        report[target] = {
            "inputs": n, "crashes": outcomes["crash"], "property_failures": outcomes["property"],
            "outcomes": dict(outcomes.most_common()), "elapsed_s": round(elapsed, 2),
            "mean_ms": round(1000 * elapsed / max(1, n), 3),
            "slowest_ms": round(1000 * slowest[0], 1), "slowest_index": slowest[1],
        }
        row = report[target]
        print(f"{target:8} {n:7d} inputs  {row['crashes']:3d} crashes  "
              f"{row['property_failures']:3d} property failures  {elapsed:7.1f} s  "
              f"(mean {row['mean_ms']:.2f} ms, slowest {row['slowest_ms']:.0f} ms)", flush=True)
    return {"targets": report, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--inputs", type=int, default=100_000, help="total over the targets")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated subset")
    ap.add_argument("--replay", metavar="TARGET:INDEX", help="run one input, raise its error")
    ap.add_argument("--out", type=Path, help="JSON report (default bench/results/fuzz-*.json)")
    args = ap.parse_args(argv)
    if args.replay:
        target, _, index = args.replay.partition(":")
        print(TARGETS[target](rng_for(args.seed, target, int(index))))
        return 0
    targets = [t for t in args.targets.split(",") if t]
    if unknown := set(targets) - set(TARGETS):
        ap.error(f"unknown targets {sorted(unknown)}; known: {', '.join(TARGETS)}")
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    result = fuzz(args.seed, args.inputs, targets)
    elapsed = time.perf_counter() - t0
    rows = result["targets"].values()
    summary = {
        "command": "bench/fuzz.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "started": started.isoformat(timespec="seconds"), "seed": args.seed,
        "inputs": sum(r["inputs"] for r in rows), "crashes": sum(r["crashes"] for r in rows),
        "property_failures": sum(r["property_failures"] for r in rows),
        "elapsed_s": round(elapsed, 1),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "real_pages": len(gen.real_pages()), "real_robots": len(gen.real_robots()),
        "documented_rejections": DOCUMENTED,
        "python": platform.python_version(),
        "versions": {p: version(p) for p in ("lxml", "ada-url", "warcio", "kombu")},
        **result,
    }
    print(f"total    {summary['inputs']:7d} inputs  {summary['crashes']:3d} crashes  "
          f"{summary['property_failures']:3d} property failures  {elapsed:7.1f} s  "
          f"(max RSS {summary['max_rss_mb']} MB)")
    out = args.out or ROOT / "bench" / "results" / f"fuzz-{started:%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {out}")
    return 1 if summary["crashes"] or summary["property_failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
