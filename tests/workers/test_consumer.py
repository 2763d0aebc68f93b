"""A Celery worker survives its Redis broker being killed and restarted while tasks run.

Celery 5.7's consumer stopped the whole worker ("Unrecoverable error") on the second of these
restarts at the latest; workers/app/consumer.py says why and what Trawl's consumer does instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from celery import Celery

from frontier.redisserver import EmbeddedRedis
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
RESTARTS = 3
#: A probe task's run time: it straddles the outage, so its late ack comes after the restart.
TASK_S = 2.5

pytestmark = pytest.mark.e2e


def test_worker_survives_broker_restarts_with_tasks_running(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis", appendonly=True).start()
    port = server.port
    env = {**os.environ, "TRAWL_PROBE_REDIS": server.url,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.celery_probe", "worker", "-P",
             "threads", "-c", "4", "-Q", "probe.fetch", "--loglevel", "INFO"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    sender = Celery("probe-sender", broker=server.url)
    sender.conf.task_serializer = "json"
    client = redis.Redis(port=port)
    sent: set[str] = set()
    try:
        wait_for(lambda: b"ready" in log_path.read_bytes(), 30, f"the worker ready ({log_path})")
        for cycle in range(RESTARTS):
            # Two tasks of four slots: the channel has unacked messages *and* waits on BRPOP
            # when the connection breaks (the case that stopped Celery 5.7's worker).
            for i in range(2):
                token = f"{cycle}-{i}"
                sender.send_task("probe.work", args=(token, TASK_S), queue="probe.fetch")
                sent.add(token)
            wait_for(lambda: client.hlen("unacked") >= 2, 10, "2 unacked tasks")
            time.sleep(0.5)  # the consumer is back on BRPOP for the two free slots
            assert server.proc is not None
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
            time.sleep(1.0)
            server = EmbeddedRedis(tmp_path / "redis", port=port, appendonly=True).start()
            assert worker.poll() is None, log_path.read_text()[-3000:]
        # Every task ran to its end and was acked on the restarted broker; the worker took
        # new work after each restart.
        def done() -> set[str]:
            return {t.decode() for t in client.smembers("probe:done")}

        wait_for(lambda: (sorted(sent - done()), client.hlen("unacked")) == ([], 0), 60,
                 f"every task done and acked, as (missing, unacked) ({log_path})")
        assert worker.poll() is None
        assert b"Unrecoverable error" not in log_path.read_bytes()
    finally:
        client.close()
        sender.close()
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        server.stop()
