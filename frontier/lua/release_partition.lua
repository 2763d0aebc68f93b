-- Give up a partition's ownership lease if (and only if) the caller still holds it.
-- Caller: frontier/partitions.py Partitions.release.
-- KEYS[1] = <prefix>own (Keys.owner); ARGV[1] = "member|token". Reply: 1 if released, else 0.
-- Marks the release in <prefix>s (field released, built here) so that the next claim knows
-- the owner left cleanly: its dispatched leases are on their way to workers, not lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', string.sub(KEYS[1], 1, #KEYS[1] - 3) .. 's', 'released', 1)
  return 1
end
return 0
