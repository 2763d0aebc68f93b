"""File descriptors for a fetch engine: raise the soft limit to what ``fetch_concurrency`` needs.

Each fetch in flight holds a socket, and the keep-alive pools hold one idle connection for
each of up to ``KEPT_POOLS_PER_SLOT`` x capacity hosts (workers/runtime/context.py). Many systems
start a process with a soft limit of 1,024 descriptors, which a thousand fetches in flight
would exhaust as ``EMFILE`` errors spread over unrelated fetches. The soft limit may be raised
up to the hard one without privileges (as nginx's ``worker_rlimit_nofile`` does); where even
the hard limit is too low, the engine runs with fewer slots and says so once.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)

#: Host connection pools kept per fetch slot (urllib3 ``pool_connections`` = this x capacity).
KEPT_POOLS_PER_SLOT = 4
#: Descriptors for everything else: Redis and broker connections, WARC/JSONL files, DNS.
RESERVED_FDS = 512


def fds_needed(capacity: int) -> int:
    """Descriptors a worker with ``capacity`` fetch slots may hold at once."""
    return capacity * (1 + KEPT_POOLS_PER_SLOT) + RESERVED_FDS


def fit_capacity_to_fd_limit(capacity: int) -> int:
    """Raise the soft descriptor limit towards ``fds_needed(capacity)``; returns the capacity
    the limit allows (``capacity`` itself unless the hard limit is too low)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = fds_needed(capacity)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s",
                        soft, target, exc)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return capacity
    fitted = max(1, (soft - RESERVED_FDS) // (1 + KEPT_POOLS_PER_SLOT))
    log.warning("fetch_concurrency %d needs about %d open files but the limit is %d (hard %s):"
                " running %d fetches at most; raise the hard limit (ulimit -Hn, compose "
                "'ulimits: nofile') or lower fetch_concurrency", capacity, need, soft,
                "unlimited" if hard == resource.RLIM_INFINITY else hard, fitted)
    return fitted
