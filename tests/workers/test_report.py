"""`trawl report` and `trawl export` on the output of one small real crawl (sandbox web, real
Redis, real Celery workers): the HTML has every section and a decodable PNG per plot, its
numbers are the summary's, the exports hold every record."""

from __future__ import annotations

import base64
import contextlib
import csv
import importlib.util
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig
from tests.webs import SandboxWebs
from workers.cli.main import main
from workers.report.export import COLUMNS
from workers.report.html import SECTIONS
from workers.report.records import load_records
from workers.report.series import derive

DELAY_S = 0.1
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*argv: str) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(list(argv))
    return code, buf.getvalue()


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory, redis_server: EmbeddedRedis,
            module_webs: SandboxWebs) -> tuple[Path, str]:
    """One crawl of 12 small hosts: its output directory and what `trawl crawl` printed."""
    out = tmp_path_factory.mktemp("report") / "out"
    cfg = SandboxConfig(seed=3, hosts=12, pages_per_host=10, ips=4, crawl_delay_s=0.2,
                        robots_slow_s=0.3, slow_page_s=0.3, hang_s=2.0)
    with module_webs.running(cfg) as web:
        code, printed = run(
            "crawl", *web.seeds, "--redis", redis_server.url, "--workers", "2",
            "--concurrency", "4", "--allow", web.config.domain, "--output", str(out),
            "--no-progress", "--namespace", "report", "--delay", str(DELAY_S),
            "--set", "allow_private_ips=true",
            "--set", f"static_hosts={json.dumps(web.resolver_map)}",
            "--set", "connect_timeout_s=1.0", "--set", "read_timeout_s=1.5",
            "--set", "total_timeout_s=2.0", "--set", "retry_backoff_s=0.2",
        )
    assert code == 0
    return out, printed


def n_records(out: Path) -> int:
    return sum(1 for f in (out / "records").glob("*.jsonl")
               for line in f.read_text().splitlines() if line.strip())


def test_crawl_prints_the_report_path_under_its_summary(crawled) -> None:
    out, printed = crawled
    paths = re.findall(r"^report: (\S+)$", printed, re.M)
    assert paths == [str(out / "report.html")]
    assert Path(paths[0]).is_file()


def test_report_has_every_section_and_a_png_per_plot(crawled, tmp_path: Path) -> None:
    out, _ = crawled
    dest = tmp_path / "r.html"
    code, printed = run("report", str(out), "--out", str(dest))
    assert code == 0 and printed.strip() == f"report: {dest}"
    text = dest.read_text()
    for title in SECTIONS:
        assert f"<h2>{title}</h2>" in text
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) == len(SECTIONS)
    for data in images:
        assert base64.b64decode(data, validate=True).startswith(PNG_MAGIC)
    assert not re.search(r'(src|href)="(?!data:)', text)  # self-contained


def test_report_numbers_are_the_summary(crawled) -> None:
    out, _ = crawled
    summary = json.loads((out / "summary.json").read_text())
    text = (out / "report.html").read_text()
    cells = dict(re.findall(r"id='s-([a-z_ ]+)'>([^<]*)<", text))
    for key in ("pages_fetched", "pages_failed", "robots_blocked", "urls_admitted"):
        assert cells[key] == str(summary[key])
    assert cells["records"] == str(n_records(out))
    assert summary["pages_fetched"] > 50


def test_derived_series_agree_with_the_records(crawled) -> None:
    """Time in flight integrates to the fetches' total duration; every host waited."""
    out, _ = crawled
    crawl = load_records(out)
    s = derive(crawl)
    width = float(s.t[1] - s.t[0])
    sent = [r for r in crawl.records if r["outcome"] in ("fetched", "truncated", "failed")]
    total = sum(float(r.get("elapsed_s") or 0.0) for r in sent)
    # rel 1e-5: each start and end is an epoch second near 1.7e9 (float64 keeps ~2e-7 s of
    # it), and the bins' integral sums their differences: CI once missed 1e-6 by 2e-6 s
    assert float(s.in_flight.sum()) * width == pytest.approx(total, rel=1e-5)
    assert sum(s.statuses.values()) == len(sent)
    assert s.waits_s.min() >= DELAY_S * 0.9  # politeness as the records show it


def test_export_csv_and_jsonl_hold_every_record(crawled, tmp_path: Path) -> None:
    out, _ = crawled
    n = n_records(out)
    code, _ = run("export", str(out), "--format", "csv", "--out", str(tmp_path / "p.csv"))
    assert code == 0
    with (tmp_path / "p.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == COLUMNS
    assert len(rows) == n
    assert all(r["url"] and r["outcome"] for r in rows)
    code, _ = run("export", str(out), "--format", "jsonl", "--out", str(tmp_path / "p.jsonl"))
    lines = (tmp_path / "p.jsonl").read_text().splitlines()
    assert code == 0 and len(lines) == n
    assert {json.loads(line)["url"] for line in lines} == {r["url"] for r in rows}


def test_export_parquet_or_a_clear_error(crawled, tmp_path: Path, capsys) -> None:
    out, _ = crawled
    dest = tmp_path / "p.parquet"
    code = main(["export", str(out), "--format", "parquet", "--out", str(dest)])
    if importlib.util.find_spec("pyarrow") is None:
        assert code == 2 and "pyarrow" in capsys.readouterr().err and not dest.exists()
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(dest)
        assert code == 0 and table.num_rows == n_records(out)
        assert tuple(table.column_names) == COLUMNS


def test_torn_line_is_skipped_and_counted(crawled, tmp_path: Path) -> None:
    out, _ = crawled
    copy = tmp_path / "copy"
    shutil.copytree(out / "records", copy / "records")
    first = sorted((copy / "records").glob("*.jsonl"))[0]
    with first.open("a") as fh:
        fh.write('{"url": "http://cut.example/", "outc')
    code, printed = run("export", str(copy), "--format", "csv")
    assert code == 0 and "1 unreadable lines skipped" in printed
    assert f"exported {n_records(out)} records" in printed


def test_not_an_output_dir_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "no records/*.jsonl" in capsys.readouterr().err


def test_crawl_that_fetched_nothing_still_gets_a_report(crawled, tmp_path: Path) -> None:
    """Only its robots-blocked URLs: no fetch, no wait, no duplicate; every plot still drawn."""
    out, _ = crawled
    blocked = [line for f in (out / "records").glob("*.jsonl")
               for line in f.read_text().splitlines() if '"robots_blocked"' in line]
    assert blocked
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "w.jsonl").write_text("\n".join(blocked) + "\n")
    code, printed = run("report", str(tmp_path))
    text = (tmp_path / "report.html").read_text()
    assert code == 0 and "report:" in printed
    assert text.count('src="data:image/png;base64,') == len(SECTIONS)
    assert "no host fetched twice" in text
