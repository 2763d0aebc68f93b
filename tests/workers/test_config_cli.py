"""``trawl crawl --config crawl.toml`` and ``trawl config show``: a job file drives a real
crawl (with env and flags over it), a bad one is refused before anything starts with its
file:line, and ``config show`` tells each setting's source from a separate process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from frontier.config_layers import NOT_SETTINGS
from frontier.keys import Keys
from frontier.redisserver import EmbeddedRedis
from frontier.settings_doc import settings_markdown
from tests.loopback import HTTPServerFactory, LoopbackServer, Reply, Request
from workers.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"/": ["/a", "/b"], "/a": ["/deep"], "/b": [], "/deep": []}


def _respond(req: Request) -> Reply:
    if req.path not in PAGES:
        return Reply(404, b"not here")
    links = "".join(f'<a href="{href}">{href}</a>' for href in PAGES[req.path])
    return Reply(200, f"<html><body><p>page {req.path}</p>{links}</body></html>".encode())


@pytest.fixture(scope="module")
def server(http_server: HTTPServerFactory) -> LoopbackServer:
    return http_server(respond=_respond)


@pytest.fixture(autouse=True)
def _no_trawl_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.upper().startswith("TRAWL_") and var.upper() not in NOT_SETTINGS:
            monkeypatch.delenv(var)


def _trawl(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.upper().startswith("TRAWL_") or k.upper() in NOT_SETTINGS}
    return subprocess.run([sys.executable, "-m", "workers.cli", *argv], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env={**clean, "PYTHONPATH": str(ROOT), **(env or {})})


def test_job_file_drives_a_crawl_under_env_and_flags(
        server: LoopbackServer, redis_server: EmbeddedRedis, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeds, politeness and scope from the file; max_depth from TRAWL_MAX_DEPTH over the
    file's; partitions from a flag over the env: the stored config and the requests show it."""
    job = tmp_path / "crawl.toml"
    job.write_text(f'seeds = ["{server.origin()}/"]\n\n[crawl]\nnamespace = "jobfile"\n'
                   f"partitions = 2\n\n[politeness]\nhost_delay_s = 0.05\n"
                   f"adaptive_delay_factor = 0.0\n\n[fetching]\nallow_private_ips = true\n\n"
                   f"[scope]\nmax_depth = 5\n")
    monkeypatch.setenv("TRAWL_MAX_DEPTH", "1")
    monkeypatch.setenv("TRAWL_PARTITIONS", "3")
    code = main(["crawl", "--config", str(job), "--redis", redis_server.url, "--workers", "1",
                 "--partitions", "4", "--output", str(tmp_path / "out"), "--no-progress",
                 "--fresh"])
    assert code == 0
    stored = json.loads(redis.Redis.from_url(redis_server.url).get(Keys("jobfile").config))
    assert (stored["host_delay_s"], stored["allow_private_ips"], stored["max_depth"],
            stored["partitions"], stored["allowed_domains"]) == (0.05, True, 1, 4, ["127.0.0.1"])
    fetched = {r.path for r in server.requests}
    assert {"/", "/a", "/b"} <= fetched
    assert "/deep" not in fetched  # depth 2: the file's max_depth = 5 would have fetched it


def test_crawl_refuses_a_bad_job_file_with_its_line(tmp_path: Path) -> None:
    job = tmp_path / "bad.toml"
    job.write_text('seeds = ["https://example.org/"]\n\n[politeness]\nhost_dealy_s = 1.0\n')
    out = tmp_path / "out"
    proc = _trawl("crawl", "--config", str(job), "--output", str(out), "--no-progress")
    assert proc.returncode == 2, proc.stderr
    assert f"{job}:4" in proc.stderr and "'host_dealy_s'" in proc.stderr
    assert "Did you mean 'host_delay_s'" in proc.stderr
    assert not out.exists()  # refused before an embedded Redis or a worker started


def test_config_show_names_every_source(tmp_path: Path) -> None:
    job = tmp_path / "crawl.toml"
    job.write_text('seeds = ["https://example.org/"]\n[scope]\nmax_pages = 50\nmax_depth = 9\n'
                   '[output]\nwarc_version = "1.0"\n')
    env = {"TRAWL_MAX_DEPTH": "4", "TRAWL_REDIS": "redis://127.0.0.1:1/0",
           "TRAWL_BROKER": "not a setting", "TRAWL_HOST_DELAY": "3"}
    proc = _trawl("config", "show", "--config", str(job), "--set", "warc_version=1.1",
                  "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    settings = shown["settings"]
    assert settings["max_pages"] == {"value": 50, "source": f"{job}:3", "section": "scope"}
    assert settings["max_depth"]["value"] == 4
    assert settings["max_depth"]["source"] == "env TRAWL_MAX_DEPTH"
    assert settings["warc_version"]["source"] == "flag --set warc_version"
    assert settings["warc_version"]["value"] == "1.1"
    assert settings["partitions"]["source"] == "default"
    assert settings["allowed_domains"]["value"] == ["example.org"]
    assert shown["seeds"] == {"value": ["https://example.org/"], "source": f"{job}:1"}
    assert "TRAWL_HOST_DELAY_S?" in proc.stderr  # the typo warned about, nothing crashed
    assert "TRAWL_REDIS" not in proc.stderr and "TRAWL_BROKER" not in proc.stderr


def test_config_show_text_and_doc(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAWL_IP_DELAY_S", "0.5")
    assert main(["config", "show", "--set", "max_retries=4"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("max_retries = 4 ") and line.endswith("# flag --set max_retries")
               for line in out.splitlines())
    assert any(line.startswith("ip_delay_s = 0.5 ") and line.endswith("# env TRAWL_IP_DELAY_S")
               for line in out.splitlines())
    assert main(["config", "show", "--set", "max_retries=-1"]) == 2
    assert "flag --set max_retries" in capsys.readouterr().err
    assert main(["config", "doc"]) == 0
    assert capsys.readouterr().out == settings_markdown()
