"""Redis restart with AOF mid-crawl, and a whole-crawl stop followed by `trawl crawl --resume`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from frontier.redisserver import EmbeddedRedis
from tests.drillkit import WEB, Drill, drill_config, judge, refetched
from tests.webs import SandboxWebs
from workers.cli.crawl import WorkerPool, init_crawl

pytestmark = pytest.mark.e2e


def test_redis_killed_and_restarted_with_aof_loses_nothing(tmp_path: Path,
                                                           webs: SandboxWebs) -> None:
    """SIGKILL redis-server mid-crawl, restart it on its AOF: the crawl finishes, nothing lost.

    With appendfsync everysec every write reaches the kernel before Redis replies, so a crash
    of the Redis *process* loses nothing; a crash of the machine can lose the last second
    (admissions, completions) — see README, "What a Redis restart can lose".
    """
    server = EmbeddedRedis(tmp_path / "redis", appendonly=True).start()
    port = server.port
    with webs.running(WEB) as web:
        client = redis.Redis.from_url(server.url)
        config = drill_config(web, "aof", tmp_path / "out")
        frontier = init_crawl(client, config, list(web.seeds))
        pool = WorkerPool(server.url, "aof", 2, 16, tmp_path / "logs").start()
        try:
            d = Drill(web, frontier, pool, tmp_path / "out")
            deadline = time.monotonic() + 60
            while d.fetched() < 1500:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            before = d.fetched()
            assert server.proc is not None
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
            time.sleep(2.0)  # workers see the outage
            server = EmbeddedRedis(tmp_path / "redis", port=port, appendonly=True).start()
            assert d.fetched() >= before - 50  # the AOF kept (nearly) every completion
            d.wait_done(timeout_s=240)
            counts, expected = judge(d)
            dupes = refetched(counts, expected)
            assert len(dupes) <= 0.01 * len(expected), (len(dupes), dupes[:5])
            print(json.dumps({"drill": "aof_restart", "fetched_before_kill": before,
                              "urls": len(expected), "refetched": len(dupes)}))
        finally:
            pool.stop()
            client.close()
            server.stop()


def test_whole_crawl_stop_and_resume(tmp_path: Path, redis_server: EmbeddedRedis,
                                     webs: SandboxWebs) -> None:
    with webs.running(WEB) as web:
        common = [
            "--redis", redis_server.url, "--namespace", "resume1", "--workers", "2",
            "--concurrency", "16", "--output", str(tmp_path / "out"), "--no-progress",
            "--set", "lease_ttl_s=10", "--set", "partition_ttl_s=3",
            "--set", "total_timeout_s=2", "--set", "allow_private_ips=true",
        ]
        first = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", "crawl", *web.seeds, *common,
             "--allow", web.config.domain, "--delay", "0.1", "--ip-concurrency", "0",
             "--set", f"static_hosts={json.dumps(web.resolver_map)}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        client = redis.Redis.from_url(redis_server.url)
        from frontier.config import CrawlConfig
        from frontier.frontier import Frontier

        progress = Frontier(client, CrawlConfig(namespace="resume1"))  # default partitions
        deadline = time.monotonic() + 120
        while progress.stats()["fetched"] < 300:  # well into the crawl, far from its end
            if time.monotonic() > deadline or first.poll() is not None:
                first.kill()
                pytest.fail(first.stderr.read().decode()[-3000:] if first.stderr else "slow")
            time.sleep(0.2)
        os.kill(first.pid, signal.SIGINT)
        assert first.wait(60) == 130
        summary = tmp_path / "resumed.json"
        second = subprocess.run(
            [sys.executable, "-m", "workers.cli", "crawl", "--resume", *common,
             "--summary-json", str(summary)], capture_output=True, timeout=300)
        assert second.returncode == 0, second.stderr.decode()[-2000:]
        stats = json.loads(summary.read_text())
        assert stats["accounted"] == stats["urls_admitted"]
        from workers.runtime.context import load_config

        frontier = Frontier(client, load_config(client, "resume1"))
        counts, expected = judge(Drill(web, frontier, WorkerPool("", "", 0, 0, tmp_path), tmp_path))
        assert len(refetched(counts, expected)) <= 0.01 * len(expected)
        client.close()


def test_existing_crawl_needs_resume_or_fresh(tmp_path: Path,
                                              redis_server: EmbeddedRedis) -> None:
    client = redis.Redis.from_url(redis_server.url)
    from frontier.config import CrawlConfig

    init_crawl(client, CrawlConfig(namespace="exists1").validate(), ["http://a.test/"])
    from workers.cli.main import main

    argv = ["crawl", "http://a.test/", "--redis", redis_server.url, "--namespace", "exists1",
            "--workers", "0", "--no-progress", "--output", str(tmp_path)]
    assert main(argv) == 2  # neither --resume nor --fresh: refused, nothing touched
    assert client.exists("exists1:config")
    client.close()
