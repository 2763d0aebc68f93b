-- HGET as a script, so that a pipeline's reads of many partitions' hashes go as one batched
-- EVALSHA on a single server (frontier/slotpipe.py; caller: frontier/partition_counters.py).
-- KEYS[1] = the hash (Keys.stats). ARGV[1] = field. Reply: the value, or 0 for a missing field.
return redis.call('HGET', KEYS[1], ARGV[1]) or 0
