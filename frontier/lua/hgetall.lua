-- HGETALL as a script, so that reading all partitions' counters is one batched EVALSHA on a
-- single server (frontier/slotpipe.py; decoder: frontier/partition_counters.py decode_hgetall).
-- KEYS[1] = the hash (Keys.stats). No ARGV. Reply: field, value, ...
return redis.call('HGETALL', KEYS[1])
