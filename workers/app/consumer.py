"""The worker's broker consumer: Celery's, made to survive a Redis broker restart.

Celery 5.7 closes the broken broker connection after collecting it, and with kombu's Redis
transport that second close does harm. The collect has already detached the transport and
closed the channel as far as a dead socket allows (its close was cut short while it waited on
BRPOP); the second close gets further: it drops the channel's connection pool, then tries to
restore the unacked messages through the detached transport and raises ``AttributeError``.
Nothing catches it, so the worker stops with "Unrecoverable error"; and if it did not, every
late ack of a task that was running during the outage would raise the same error on the
dropped pool, and stop the worker then. Seen in the Redis restart drill
(tests/test_persistence.py) and reproduced by tests/workers/test_consumer.py; Celery 5.6 did not
close a second time.

So the lost connection is only collected, as before 5.7: the tasks that were running ack on
the channel's surviving pool once Redis is back, and Celery's own recovery (prefetch count,
reconnect) goes on. What stays open is at most that pool's connections, until the old channel
is collected.
"""

from __future__ import annotations

import logging

from celery.worker.consumer import Consumer

log = logging.getLogger(__name__)


class RestartSafeConsumer(Consumer):
    """Celery's consumer; losing the broker connection cannot stop the worker."""

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        connection = self.connection
        if connection is not None:
            # Celery closes it (``connection.close``) after collecting it; shadow the method on
            # this one connection object, which Celery discards right after.
            connection.close = lambda: log.debug("lost broker connection collected, not closed")
        super().on_connection_error_after_connected(exc)
