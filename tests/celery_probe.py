"""A Celery app for tests/workers/test_consumer.py: Trawl's worker configuration plus one probe
task.

The worker process imports it (``celery -A tests.celery_probe worker``); the broker URL comes
from ``TRAWL_PROBE_REDIS``.
"""

from __future__ import annotations

import os
import time

import redis
from redis.backoff import ConstantBackoff
from redis.retry import Retry

from workers.app.celery_app import app, configure

configure(os.environ["TRAWL_PROBE_REDIS"], "probe")


@app.task(name="probe.work", acks_late=True, ignore_result=True)
def work(token: str, seconds: float) -> None:
    """Sleep, then record ``token`` as done (in the broker's Redis, which may have restarted)."""
    time.sleep(seconds)
    # The broker may still be restarting: retry for up to ~20 s.
    client = redis.Redis.from_url(os.environ["TRAWL_PROBE_REDIS"],
                                  retry=Retry(ConstantBackoff(0.2), 100),
                                  retry_on_error=[redis.ConnectionError])
    client.sadd("probe:done", token)
    client.close()
