-- Return expired leases of one partition to their host queues (the head of a FIFO list; a
-- priority queue with the lease's own score).
-- Encoder/decoder: frontier/leases.py ReapCall, ReapReply.
-- KEYS[1] = <prefix>r (Keys.ready: each host goes back in). Built here from ARGV[1] =
--   <prefix> (Keys.prefix(p), legend there), all in p's slot: <prefix>D, <prefix>L,
--   <prefix>hb (the lease, removed), <prefix>q:<host> and <prefix>qe (the entry, back),
--   <prefix>hn (read), <prefix>s (counters: queued, inflight, requeued), <prefix>own (read
--   when fenced).
-- ARGV: prefix, now, max_n, owner ("member|token" or '' when not fenced), mode, begun_s
-- Reply: the number of leases re-queued, or -2 when the caller no longer owns the partition.
-- No URL is lost: a lease's entry goes back before the lease is deleted, in one atomic script.
-- Also re-queued: orphans, the leases of an owner lost without a release (claim.lua records
-- orphan_seq) that no worker has begun. A begun lease's deadline is at most begun_s ahead
-- (begin.lua and the lease keeper give lease_keep_s); one further ahead still has the
-- acquire's lease_ttl_s, so the lost owner's scheduler held it: waiting for DNS or in a task
-- it may never have sent. If the task does reach a worker, begin.lua finds the lease gone and
-- the worker skips it: the URL is fetched once, by its new lease.
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local max_n = tonumber(ARGV[3])
local mode = ARGV[5]
local ready = KEYS[1]
if ARGV[4] ~= '' and redis.call('GET', prefix .. 'own') ~= ARGV[4] then return -2 end
local st = prefix .. 's'
local expired = redis.call('ZRANGEBYSCORE', prefix .. 'D', '-inf', now, 'LIMIT', 0, max_n)
local orphan_seq = tonumber(redis.call('HGET', st, 'orphan_seq') or 0)
if orphan_seq > 0 then
  local left = 0
  local ahead = redis.call('ZRANGEBYSCORE', prefix .. 'D', now + tonumber(ARGV[6]), '+inf')
  for _, lease in ipairs(ahead) do
    if tonumber(lease) <= orphan_seq then
      if #expired < max_n then expired[#expired + 1] = lease else left = left + 1 end
    end
  end
  if left == 0 then redis.call('HDEL', st, 'orphan_seq') end
end
for _, lease in ipairs(expired) do
  local payload = redis.call('HGET', prefix .. 'L', lease)
  redis.call('ZREM', prefix .. 'D', lease)
  redis.call('HDEL', prefix .. 'L', lease)
  if payload then
    -- payload = host \t entry [\t score]; URLs never hold a tab (canonicalization drops them)
    local tab = string.find(payload, '\t', 1, true)
    local host = string.sub(payload, 1, tab - 1)
    local rest = string.sub(payload, tab + 1)
    local tab2 = string.find(rest, '\t', 1, true)
    local entry, score = rest, 0
    if tab2 then entry = string.sub(rest, 1, tab2 - 1); score = tonumber(string.sub(rest, tab2 + 1)) or 0 end
    if redis.call('HGET', prefix .. 'hb', host) == lease then redis.call('HDEL', prefix .. 'hb', host) end
    local q = prefix .. 'q:' .. host
    if mode == 'l' then
      redis.call('LPUSH', q, entry)
    else
      local sp = string.find(entry, ' ', 1, true)
      local url = string.sub(entry, sp + 1)
      redis.call('ZADD', q, score, url)
      redis.call('HSET', prefix .. 'qe', url, string.sub(entry, 1, sp - 1))
    end
    local nxt = tonumber(redis.call('HGET', prefix .. 'hn', host) or now)
    if nxt < now then nxt = now end
    redis.call('ZADD', ready, nxt, host)
    redis.call('HINCRBY', st, 'queued', 1)
    redis.call('HINCRBY', st, 'inflight', -1)
    redis.call('HINCRBY', st, 'requeued', 1)
  end
end
return #expired
