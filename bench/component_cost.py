"""CPU of the component hooks per page in the default configuration (issue 20), in process:
the page pipeline's loop without the WARC write (Dedup's fields + the JSONL record copy) and
the extractor hook with only the built-in lxml extractor. Run::

    .venv/bin/python bench/component_cost.py

The whole lease path before and after the hooks: bench/stage_cost.py (docs/components.md).
"""

from __future__ import annotations

import sys
import timeit
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dedup.service import DedupResult
from frontier.config import CrawlConfig
from workers.components.api import ComponentSetup
from workers.components.builtin import DEDUP, JSONL_RECORDS
from workers.components.chain import Components
from workers.components.loader import build_components
from workers.fetch import FetchResult
from workers.pipeline.parse import parse_html

N = 200_000


def main() -> None:
    body = b"<html><title>x</title>" + b"".join(
        b'<a href="/p%d">l</a>' % i for i in range(80)) + b"</html>"
    parsed = parse_html(body, "http://a.test/")
    res = FetchResult(url="http://a.test/", status=200, body=body, content_type="text/html")
    rec = {"url": "http://a.test/", "outcome": "fetched", "fetched_at": 1.0, "host": "a.test",
           "ip": None, "depth": 1, "attempts": 1, "status": 200, "bytes": len(body),
           "digest": "ab", "links_found": 80, "links_admitted": 80, "elapsed_s": 0.01,
           "content_type": "text/html"}
    dup = DedupResult("unique")
    cfg = CrawlConfig(pipelines=[DEDUP, JSONL_RECORDS])
    chain = Components(cfg, build_components(cfg, ComponentSetup(cfg, {}, "w", Path("."))))
    counters: Counter[str] = Counter()
    base = timeit.timeit(lambda: dict(rec), number=N)
    t = timeit.timeit(lambda: chain.finish_page(dict(rec), res, parsed, dup, counters), number=N)
    print(f"page pipelines (Dedup fields + JSONL copy, no WARC): {(t - base) / N * 1e6:.2f} "
          "us/page")
    t = timeit.timeit(lambda: chain.page_links("http://a.test/", res, parsed, counters), number=N)
    print(f"extractor hook (lxml only): {t / N * 1e6:.2f} us/page")


if __name__ == "__main__":
    main()
