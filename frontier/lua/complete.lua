-- Finish leases of one partition: release each host with its next allowed time, optionally
-- put an entry back on the host queue (retry: tail; robots fetched first / deferred: head),
-- and count the outcome.
-- Encoder/decoder: frontier/leases.py encode_complete, decode_complete.
-- KEYS[1] = <prefix>r (Keys.ready: the host goes back in if its queue is not empty). Built
--   here from ARGV[1] = <prefix> (Keys.prefix(p), legend there), all in p's slot:
--   <prefix>hb, <prefix>L, <prefix>D (the lease, removed), <prefix>hn (next allowed time,
--   set), <prefix>q:<host> and <prefix>qe (the requeued entry), <prefix>s (counters:
--   inflight, queued, stale, and the outcome's counter).
-- ARGV: prefix, mode ('l' FIFO lists, else priority ZSETs), then per lease: lease, host,
--   next_allowed, outcome, requeue_entry, where, score, revisit_at, member; where = 'h'
--   (head) or 't' (tail), requeue_entry '' = none; score = the entry's priority score (ZSET
--   queues only: a priority queue has no head or tail, the entry goes back with its own
--   score); then revisit_at, member: revisit_at = '' or the URL's next visit time;
--   continuous crawling puts ``member`` ("depth url", or "host\tdepth url" when the host is
--   not the URL's own: frontier/revisits.py schedule_member) in the revisit schedule
--   <prefix>rv, in the same step that ends its lease.
-- A lease that is no longer current (it expired and was re-queued by reap) is stale: nothing
-- is changed except the 'stale' counter, so an old owner can never release a host twice.
-- Reply: the number of stale leases.
local prefix = ARGV[1]
local mode = ARGV[2]
local ready = KEYS[1]
local st = prefix .. 's'
local hb = prefix .. 'hb'
local stale = 0
local i = 3
while i <= #ARGV do
  local lease, host = ARGV[i], ARGV[i + 1]
  local nxt = tonumber(ARGV[i + 2])
  local outcome, requeue, where = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  if redis.call('HGET', hb, host) == lease and redis.call('ZSCORE', prefix .. 'D', lease) then
    redis.call('ZREM', prefix .. 'D', lease)
    redis.call('HDEL', prefix .. 'L', lease)
    redis.call('HDEL', hb, host)
    redis.call('HSET', prefix .. 'hn', host, nxt)
    redis.call('HINCRBY', st, 'inflight', -1)
    local q = prefix .. 'q:' .. host
    local left
    if requeue ~= '' then
      if mode == 'l' then
        if where == 'h' then redis.call('LPUSH', q, requeue) else redis.call('RPUSH', q, requeue) end
      else
        local sp = string.find(requeue, ' ', 1, true)
        local url = string.sub(requeue, sp + 1)
        redis.call('ZADD', q, tonumber(ARGV[i + 6]) or 0, url)
        redis.call('HSET', prefix .. 'qe', url, string.sub(requeue, 1, sp - 1))
      end
      redis.call('HINCRBY', st, 'queued', 1)
    end
    if outcome ~= '' then redis.call('HINCRBY', st, outcome, 1) end
    if ARGV[i + 7] ~= '' then
      redis.call('ZADD', prefix .. 'rv', ARGV[i + 7], ARGV[i + 8])
    end
    if mode == 'l' then left = redis.call('LLEN', q) else left = redis.call('ZCARD', q) end
    if left > 0 then redis.call('ZADD', ready, nxt, host) end
  else
    stale = stale + 1
  end
  i = i + 9
end
if stale > 0 then redis.call('HINCRBY', st, 'stale', stale) end
return stale
