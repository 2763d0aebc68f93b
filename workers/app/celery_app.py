"""The Celery application: JSON only (never pickle from the broker), late acks, prefetch 1.

Celery carries work, Redis carries state: a task is a small JSON list of leased URLs; a lost or
duplicated task message cannot lose or double a URL, because the lease in Redis decides.
"""

from __future__ import annotations

from celery import Celery

from frontier.keys import task_queue

app = Celery("trawl")


def visibility_timeout_s(lease_ttl_s: float) -> int:
    """How long the broker waits before it gives an unacked task (a dead worker's prefetched
    one) back to its queue. A redelivery is harmless (the lease decides) but should not come
    before the lease itself expires."""
    return int(max(300, lease_ttl_s * 3))


def configure(redis_url: str, namespace: str, lease_ttl_s: float = 300.0,
              events: bool = False, broker_url: str | None = None) -> Celery:
    """``redis_url`` holds the crawl state; ``broker_url`` (default: the same) carries tasks."""
    app.conf.update(
        broker_url=broker_url or redis_url,
        result_backend=None,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],  # refuse pickle and everything else from the broker
        result_accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # One message at a time per slot: a fetch never waits behind another host's task.
        worker_prefetch_multiplier=1,
        worker_send_task_events=events,
        task_send_sent_event=events,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": visibility_timeout_s(lease_ttl_s),
            # A cut link must fail a publish or an ack within seconds, not hang until the
            # link returns (seen in the network-partition drill): the member then stops
            # scheduling and the reaper brings the leases back. Above kombu's 1 s BRPOP.
            "socket_timeout": 10, "socket_connect_timeout": 5, "socket_keepalive": True,
            "health_check_interval": 10,
        },
        task_default_queue=task_queue(namespace),
        # Survives a broker restart (Celery 5.7 could stop the worker then): workers/app/consumer.py
        worker_consumer="workers.app.consumer:RestartSafeConsumer",
        # A task running when the broker connection drops finishes (threads cannot be
        # cancelled anyway); its leases decide whether a redelivery fetches anything.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        trawl_redis_url=redis_url,
        trawl_namespace=namespace,
    )
    return app
