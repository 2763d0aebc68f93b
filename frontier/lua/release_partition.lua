-- Give up a partition's ownership lease if (and only if) the caller still holds it.
-- Caller: frontier/partitions.py Partitions.release.
-- KEYS[1] = <prefix>own (Keys.owner); ARGV[1] = "member|token". Reply: 1 if released, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
