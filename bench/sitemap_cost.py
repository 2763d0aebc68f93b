"""What reading a sitemap costs (workers/pipeline/sitemaps.py): a file over the 50,000-URL cap,
plain and gzipped, and a gzip bomb inflating to 120 MB (cut at 50 MB).

    PYTHONPATH=$PWD python -m bench.sitemap_cost
"""

from __future__ import annotations

import gzip
import time
import tracemalloc

from workers.pipeline.sitemaps import SITEMAP_MAX_URLS, parse_sitemap


def main() -> None:
    n = SITEMAP_MAX_URLS + 10
    xml = (b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
           + b"".join(b"<url><loc>https://example.com/p/%d</loc><lastmod>2024-01-01</lastmod>"
                      b"</url>" % i for i in range(n)) + b"</urlset>")
    for label, body, ctype in (("xml", xml, "application/xml"),
                               ("gzipped", gzip.compress(xml), "application/gzip")):
        t = time.perf_counter()
        sm = parse_sitemap(body, ctype)
        print(f"{n:,} URLs, {label} ({len(body) / 1e6:.2f} MB): {time.perf_counter() - t:.2f} s,"
              f" kept {len(sm.locs):,}, dropped {sm.dropped}, cut {sm.cut}")
    bomb = gzip.compress(b"<urlset>" + (b"<x>" + b" " * 1017 + b"</x>") * (120 * 1024), 9)
    tracemalloc.start()
    t = time.perf_counter()
    sm = parse_sitemap(bomb, "application/gzip")
    took = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"gzip bomb ({len(bomb) / 1e3:.0f} KB -> 120 MB): {took:.2f} s, cut {sm.cut}, "
          f"Python heap peak {peak / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
