"""Name resolution for the scheduler and the fetcher: a TTL cache with address checks
(:mod:`workers.dns.resolver`) and a pool of resolver threads (:mod:`workers.dns.pool`)."""
