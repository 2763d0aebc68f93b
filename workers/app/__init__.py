"""The Celery application: its configuration, the consumer, the `trawl.fetch` task and the task
message."""
