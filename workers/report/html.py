"""``trawl report``: one self-contained HTML file (PNG plots embedded as base64, no external
assets) so it can be mailed, attached to a ticket or opened from a CI artifact."""

from __future__ import annotations

import base64
import html
import io
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

from workers.report.records import CrawlRecords
from workers.report.series import Series, derive

#: The report's sections, in order; each holds one plot.
SECTIONS: tuple[str, ...] = (
    "Pages per second and fetches in flight", "Status codes and outcomes",
    "Top hosts by pages and by errors", "Politeness waits", "Depth distribution",
    "Duplicates and mirrors",
)
SUMMARY_KEYS = ("pages_fetched", "pages_failed", "robots_blocked", "urls_admitted",
                "elapsed_s", "pages_per_s", "redirects", "retries", "workers", "partitions")
TOP = 15


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _barh(ax: Any, counts: Counter, title: str, color: str) -> None:
    items = counts.most_common(TOP)[::-1]
    ax.set_title(title)
    if not items:
        ax.text(0.5, 0.5, "none", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    bars = ax.barh([str(k) for k, _ in items], [v for _, v in items], color=color)
    ax.bar_label(bars, fontsize=8, padding=2)  # a count of 1 beside 400 is otherwise unseen
    ax.margins(x=0.12)
    ax.tick_params(axis="y", labelsize=8)


def _timeline(s: Series) -> Figure:
    fig = Figure(figsize=(10, 3.6))
    ax = fig.subplots()
    ax.plot(s.t, s.pages_per_s, color="tab:blue", label="pages/s")
    ax.set_xlabel("seconds since the first fetch")
    ax.set_ylabel("pages/s", color="tab:blue")
    ax2 = ax.twinx()
    ax2.step(s.t, s.in_flight, where="mid", color="tab:orange", label="fetches in flight")
    ax2.set_ylabel("mean fetches in flight", color="tab:orange")
    return fig


def _pair(a: Counter, ta: str, b: Counter, tb: str, colors: tuple[str, str]) -> Figure:
    fig = Figure(figsize=(10, 3.8))
    ax1, ax2 = fig.subplots(1, 2)
    _barh(ax1, a, ta, colors[0])
    _barh(ax2, b, tb, colors[1])
    fig.tight_layout()
    return fig


def _waits(s: Series) -> Figure:
    fig = Figure(figsize=(10, 3.2))
    ax = fig.subplots()
    if len(s.waits_s):  # the long tail (a host revisited minutes later) would flatten the rest
        cap = float(np.percentile(s.waits_s, 99))
        ax.hist(s.waits_s[s.waits_s <= cap], bins=50, color="tab:green")
    ax.set_xlabel("seconds between consecutive fetch starts on one host (up to the 99th "
                  "percentile)")
    ax.set_ylabel("fetches")
    return fig


def _depths(s: Series) -> Figure:
    fig = Figure(figsize=(10, 3.0))
    ax = fig.subplots()
    keys = sorted(s.depths)
    ax.bar([str(k) for k in keys], [s.depths[k] for k in keys], color="tab:purple")
    ax.set_xlabel("link depth from the seeds")
    ax.set_ylabel("URLs")
    return fig


def _dups(s: Series) -> Figure:
    mirrors = Counter({f"{a} → {b}": n for (a, b), n in s.mirrors.items()})
    return _pair(s.dup_kinds, "pages by duplicate kind", mirrors,
                 "mirror host pairs (pages)", ("tab:gray", "tab:brown"))


def render(crawl: CrawlRecords) -> str:
    """The report's HTML text."""
    s = derive(crawl)
    plots = [
        _timeline(s),
        _pair(s.statuses, "final status (or error) of fetches", s.outcomes,
              "outcome of every URL", ("tab:blue", "tab:cyan")),
        _pair(s.host_pages, f"top {TOP} hosts by pages", s.host_errors,
              f"top {TOP} hosts by errors", ("tab:green", "tab:red")),
        _waits(s), _depths(s), _dups(s),
    ]
    waits = s.waits_s
    notes = [
        "",
        f"{sum(v for k, v in s.statuses.items() if k.startswith('2'))} of "
        f"{sum(s.statuses.values())} fetches answered 2xx; {len(crawl.records)} URLs ended",
        f"{len(s.host_pages)} hosts with pages, {len(s.host_errors)} with errors",
        (f"median wait {float(np.median(waits)):.3f} s, shortest {float(waits.min()):.3f} s"
         if len(waits) else "no host fetched twice"),
        f"deepest URL: depth {max(s.depths) if s.depths else 0}",
        f"{sum(s.mirrors.values())} pages on mirror hosts",
    ]
    body = [f"<h1>Crawl report: {html.escape(str(crawl.out_dir))}</h1>", _summary_table(crawl)]
    for title, fig, note in zip(SECTIONS, plots, notes, strict=True):
        body.append(f"<h2>{html.escape(title)}</h2><p>{html.escape(note)}</p>"
                    f'<img alt="{html.escape(title)}" src="data:image/png;base64,{_png(fig)}">')
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Trawl crawl report</title>"
        "<style>body{font-family:sans-serif;max-width:1000px;margin:1em auto;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;"
        "text-align:left}td.n{text-align:right}img{max-width:100%}</style></head><body>"
        + "\n".join(body) + "</body></html>\n"
    )


def _summary_table(crawl: CrawlRecords) -> str:
    rows = [(k, crawl.summary[k]) for k in SUMMARY_KEYS if k in crawl.summary]
    rows += [("records", len(crawl.records)), ("record files", crawl.files),
             ("unreadable record lines", crawl.bad_lines)]
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td class='n' id='s-{html.escape(k)}'>"
                    f"{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f"<h2>Summary</h2><table>{cells}</table>"


def write_report(crawl: CrawlRecords, dest: Path | None = None) -> Path:
    """Write the report (default OUTPUT_DIR/report.html); its path."""
    dest = dest or crawl.out_dir / "report.html"
    dest.write_text(render(crawl), encoding="utf-8")
    return dest
