"""A Celery app for tests/test_consumer.py: Trawl's worker configuration plus one probe task.

The worker process imports it (``celery -A tests.celery_probe worker``); the broker URL comes
from ``TRAWL_PROBE_REDIS``.
"""

from __future__ import annotations

import os
import time

import redis

from workers.celery_app import app, configure

configure(os.environ["TRAWL_PROBE_REDIS"], "probe")


@app.task(name="probe.work", acks_late=True, ignore_result=True)
def work(token: str, seconds: float) -> None:
    """Sleep, then record ``token`` as done (in the broker's Redis, which may have restarted)."""
    time.sleep(seconds)
    client = redis.Redis.from_url(os.environ["TRAWL_PROBE_REDIS"])
    deadline = time.monotonic() + 20
    while True:  # the broker may still be restarting
        try:
            client.sadd("probe:done", token)
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    client.close()
