"""Membership and scheduling: who owns which partitions, and the scheduler that leases due URLs and
sends them to workers as Celery tasks. They stay beside the workers, not in frontier/, because
the scheduler waits on the worker-side DNS pool and builds the task message."""
