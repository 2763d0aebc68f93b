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

And a message that Celery's task handler cannot read stops nothing either: a JSON body such as
``5`` (not the ``[args, kwargs, embed]`` of a task call) made Celery's strategy raise
``TypeError`` out of the handler, and the worker stopped with "Unrecoverable error" (found by
tests/fuzz/test_fuzz_worker_messages.py). Such a message is now refused the way Celery refuses
an invalid task message: logged with its body, rejected without requeue. So is a JSON body
that Celery would take but never finish: ``[1, 2, 3]`` (arguments that are not a list) failed
in the pool with nothing acked, so the message came back after every visibility timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery.exceptions import InvalidTaskError
from celery.worker.consumer import Consumer
from kombu.exceptions import ContentDisallowed, DecodeError

log = logging.getLogger(__name__)


class RestartSafeConsumer(Consumer):
    """Celery's consumer; neither losing the broker connection nor a message it cannot read
    stops the worker."""

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        connection = self.connection
        if connection is not None:
            # Celery closes it (``connection.close``) after collecting it; shadow the method on
            # this one connection object, which Celery discards right after.
            connection.close = lambda: log.debug("lost broker connection collected, not closed")
        super().on_connection_error_after_connected(exc)

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Callable[[Any], None]:
        """Celery's handler of one received task message, which no longer raises out of the
        consumer for a message it cannot read (a lost connection still does: the consumer
        must reconnect)."""
        handle = super().create_task_handler(*args, **kwargs)
        connection_errors = tuple(self.connection_errors or ())

        def on_task_received(message: Any) -> None:
            try:
                problem = not_a_task_call(message)
                if problem is not None:
                    raise InvalidTaskError(problem)
                handle(message)
            except connection_errors:
                raise
            except Exception as exc:
                if message.acknowledged:  # nothing left to refuse; say why it failed
                    log.error("task message failed after its ack: %r", exc, exc_info=True)
                else:  # Celery's own refusal: the error and the body logged, rejected
                    self.on_invalid_task(message.body, message, exc)

        return on_task_received


def not_a_task_call(message: Any) -> str | None:
    """Why a protocol-2 task message's body is not the ``[args, kwargs, embed]`` of a call
    (a list, a dict, a dict or null), or None. Bodies that do not decode or whose content
    type is refused are left to Celery (``on_decode_error``, ``on_invalid_task``), as are
    protocol-1 messages (no ``task`` header)."""
    headers = message.headers
    if not isinstance(headers, dict) or "task" not in headers:
        return None
    try:
        payload = message.payload  # decoded once: kombu keeps it for Celery's request
    except (DecodeError, ContentDisallowed):  # Celery's own refusals, as before
        return None
    if not isinstance(payload, list | tuple) or len(payload) != 3:
        return "task body is not [args, kwargs, embed]"
    args, kwargs, embed = payload
    if not isinstance(args, list | tuple) or not isinstance(kwargs, dict) \
            or not (embed is None or isinstance(embed, dict)):
        return "task body's args, kwargs or embed has the wrong type"
    return None
