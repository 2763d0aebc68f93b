-- Give up a partition's ownership lease if (and only if) the caller still holds it.
-- KEYS[1] = <prefix>own; ARGV: "member|token". Returns 1 if released.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
