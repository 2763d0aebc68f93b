-- Take the scheduler's due hints of its own partitions: those hinted at or before now.
-- Decoder: frontier/partitions.py DueReply.
-- KEYS[1] = <namespace>:due (Keys.due: ZSET partition -> time; added by
--   Frontier.queue_due_hints). ARGV: now, partitions...
-- Reply: {hinted partitions among them, earliest later hint time of one of them or '-1'};
-- the taken hints are removed (a later hint adds them again). Hints of partitions the
-- caller does not own stay for their owner.
local now = tonumber(ARGV[1])
local mine = {}
for i = 2, #ARGV do mine[ARGV[i]] = true end
local out = {}
for _, p in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  if mine[p] then out[#out + 1] = p end
end
if #out > 0 then redis.call('ZREM', KEYS[1], unpack(out)) end
local later = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES')
local nxt = '-1'
for j = 1, #later, 2 do
  if mine[later[j]] then nxt = later[j + 1]; break end
end
return {out, nxt}
