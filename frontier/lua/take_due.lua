-- Take the scheduler's due hints of its own partitions: those hinted at or before now.
-- KEYS[1] = <namespace>:due (ZSET partition -> time); ARGV: now, partitions...
-- Returns the hinted partitions among them; their hints are removed (a later hint adds them
-- again). Hints of partitions the caller does not own stay for their owner.
local now = tonumber(ARGV[1])
local hinted = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #hinted == 0 then return {} end
local mine = {}
for i = 2, #ARGV do mine[ARGV[i]] = true end
local out = {}
for _, p in ipairs(hinted) do
  if mine[p] then out[#out + 1] = p end
end
if #out > 0 then redis.call('ZREM', KEYS[1], unpack(out)) end
return out
