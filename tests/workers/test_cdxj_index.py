"""The CDXJ index of one WarcWriter, without a crawl: the ``.cdxj.open`` file consistent while
a file is written, a dead worker's index finished, odd URLs kept to one well-formed line (and
what pywb's indexer writes for them), the ``warc_version`` setting checked."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from frontier.config import ConfigError, CrawlConfig
from tests.pywb_env import pywb_tool
from tests.warc_index import check_line
from workers.fetch import FetchResult
from workers.storage.cdxj import OPEN_SUFFIX, finish_index
from workers.storage.warc import WarcWriter

HOST = "site.test"


def test_open_index_is_consistent_while_writing(tmp_path: Path) -> None:
    """Lines reach the ``.cdxj.open`` file only after their records reach the WARC file, so
    a reader (or a crash) never finds a line naming a record not yet written."""
    w = WarcWriter(tmp_path, "live")
    results = [FetchResult(url=f"http://{HOST}/p{i}", status=200, reason="OK",
                           headers=[("Content-Type", "text/html")],
                           body=b"<html>page %d</html>" % i * 300, content_type="text/html",
                           request_headers=[("Host", HOST)], started_at=time.time())
               for i in range(100)]
    for r in results[:70]:
        w.write(r)
    open_path = next(tmp_path.glob(f"*{OPEN_SUFFIX}"))
    on_disk = open_path.read_text().splitlines()
    assert len(on_disk) == 64  # flushed with the WARC every 64 lines; 6 still in memory
    for line in on_disk:
        check_line(tmp_path, line)
    for r in results[70:]:
        w.write(r)
    w.flush()
    on_disk = open_path.read_text().splitlines()
    assert len(on_disk) == 100
    for line in on_disk:
        check_line(tmp_path, line)
    w.close()
    assert not open_path.exists()
    assert w.indexes[0].read_text().splitlines() == sorted(on_disk)


#: URLs a redirect or a page can hand the writer that a line must survive (it is split on
#: spaces and newlines; U+0085 is whitespace to a reader's strip).
ODD_URLS = ["http://a.test/x y\nz", "http://[::1/x", "http://\u00e9.test/\u00fc?a=1 2",
            "http://a.test/%0A%20\t", "http://a.test/\x7f\x85"]


def odd_fetch(url: str) -> FetchResult:
    return FetchResult(url=url, status=200, reason="OK", body=url.encode() + b"!",
                       headers=[("Content-Type", "text/html")], content_type="text/html",
                       request_headers=[("Host", "a.test")], started_at=time.time())


def test_odd_urls_keep_the_index_well_formed(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, "odd")
    for url in ODD_URLS:
        w.write(odd_fetch(url))
    w.close()
    lines = w.indexes[0].read_text().split("\n")
    assert lines[-1] == "" and len(lines) == len(ODD_URLS) + 1  # one line per record
    for line in lines[:-1]:
        key, stamp, _text = line.split(" ", 2)
        assert key and stamp.isdigit() and len(stamp) == 14
        check_line(tmp_path, line)
    done = subprocess.run([pywb_tool("cdx-indexer"), "--cdxj", "--sort", "-o", "-",
                           str(w.files[0])], capture_output=True, text=True, check=True)
    assert [ln for ln in done.stdout.splitlines() if ln and not ln.startswith("!")] == \
        lines[:-1]
    # a record without a URL cannot be keyed: archived, counted and logged, not indexed
    w = WarcWriter(tmp_path / "nourl", "nourl")
    assert w.write(odd_fetch("")) is not None
    w.close()
    assert w.index_skipped == 1 and w.indexes[0].read_text() == ""


def test_finish_index_after_a_crash(tmp_path: Path) -> None:
    """A dead worker's ``.cdxj.open`` is sorted into its ``.cdxj``; a cut last line dropped."""
    left = tmp_path / f"dead-00000{OPEN_SUFFIX}"
    left.write_text('b 2 {"x": "1"}\na 1 {"x": "2"}\nc 3 {"x"')
    done = finish_index(left)
    assert done.name == "dead-00000.cdxj" and not left.exists()
    assert done.read_text() == 'a 1 {"x": "2"}\nb 2 {"x": "1"}\n'


def test_warc_version_setting_is_checked() -> None:
    assert CrawlConfig(warc_version="1.0").validate().warc_version == "1.0"
    CrawlConfig(warc_version=1.1).validate()  # ``--set warc_version=1.1`` gives a number
    with pytest.raises(ConfigError, match="warc_version"):
        CrawlConfig(warc_version="2.0").validate()
    with pytest.raises(ValueError, match=r"1\.0, 1\.1"):
        WarcWriter(Path("/nonexistent-not-created"), "x", warc_version="0.9")


# -- replay by pywb --------------------------------------------------------------------------


def test_surt_key_is_surts_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """``surt_key`` (the fast path for plain URLs) gives ``surt.surt``'s key on URLs of every
    kind, and runs surt only once per origin of the plain ones (else it would save nothing)."""
    import surt

    from workers.storage import cdxj

    plain = [f"https://h{i % 4}.sandbox.test:36819/dir-{i}/page-{i}.html" for i in range(40)]
    plain += ["http://h1.sandbox.test/", "http://www.example.com:80/a/", "https://x.test:443/",
              "http://www3.example.org/a/b/", "http://127.0.0.1:8080/a", "http://h/~u/x_y-z",
              "http://0x7f.1/a", "http://a..b.example./p", "http://xn--nxasmq6b.com/e"]
    other = ["http://h/A/B.HTML", "http://h/a?b=2&a=1", "http://h/a#f", "http://u:p@h/a",
             "http://h/./a", "http://h/a/../b", "http://h//a", "http://h/.well-known/x",
             "http://h/a%41", "http://h/(abcdefghijklmnopqrstuvwx)/a.aspx", "http://h",
             "http://H.EXAMPLE/a", "http://h/a;jsessionid=1", "https://h/a b"]
    want = {url: surt.surt(url) for url in plain + other}
    called: list[str] = []
    real = surt.surt
    monkeypatch.setattr(surt, "surt", lambda url: called.append(url) or real(url))
    cdxj._ORIGIN_KEYS.clear()
    for url in plain + other:
        assert cdxj.surt_key(url) == want[url], url
    origins = {url[: url.index("/", 8)] + "/" for url in plain}
    assert sorted(called) == sorted(origins | set(other))
