-- Return expired leases of one partition to the head of their host queues.
-- KEYS[1] = <prefix>r
-- ARGV: prefix, now, max_n, owner ("member|token" or '' when not fenced)
-- Returns the number of leases re-queued, or -2 when the caller no longer owns the partition. No URL is lost: a lease's entry goes back before the
-- lease is deleted, in one atomic script.
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local max_n = tonumber(ARGV[3])
local ready = KEYS[1]
if ARGV[4] ~= '' and redis.call('GET', prefix .. 'own') ~= ARGV[4] then return -2 end
local st = prefix .. 's'
local expired = redis.call('ZRANGEBYSCORE', prefix .. 'D', '-inf', now, 'LIMIT', 0, max_n)
for _, lease in ipairs(expired) do
  local payload = redis.call('HGET', prefix .. 'L', lease)
  redis.call('ZREM', prefix .. 'D', lease)
  redis.call('HDEL', prefix .. 'L', lease)
  if payload then
    local tab = string.find(payload, '\t', 1, true)
    local host = string.sub(payload, 1, tab - 1)
    local entry = string.sub(payload, tab + 1)
    if redis.call('HGET', prefix .. 'hb', host) == lease then redis.call('HDEL', prefix .. 'hb', host) end
    redis.call('LPUSH', prefix .. 'q:' .. host, entry)
    local nxt = tonumber(redis.call('HGET', prefix .. 'hn', host) or now)
    if nxt < now then nxt = now end
    redis.call('ZADD', ready, nxt, host)
    redis.call('HINCRBY', st, 'queued', 1)
    redis.call('HINCRBY', st, 'inflight', -1)
    redis.call('HINCRBY', st, 'requeued', 1)
  end
end
return #expired
