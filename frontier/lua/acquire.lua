-- Lease up to N due hosts of one partition: pop the best URL of each into a lease.
-- Encoder/decoder: frontier/leases.py AcquireCall, AcquireReply.
-- KEYS[1] = <prefix>r (Keys.ready); the other keys are built here from ARGV[1] = <prefix>
--   (Keys.prefix(p), legend there), all in partition p's slot:
--   <prefix>r         ZSET host -> next allowed time (read, hosts removed when leased)
--   <prefix>pr        ZSET host -> best score, due hosts (mode 'z'/'a')
--   <prefix>q:<host>  the host's queue: LIST (mode 'l') or ZSET url -> score
--   <prefix>qe        HASH url -> entry head (mode 'z'/'a')
--   <prefix>hb        HASH host -> lease id (set)
--   <prefix>L         HASH lease id -> "host\tentry\tscore" (set)
--   <prefix>D         ZSET lease id -> deadline (set)
--   <prefix>s         HASH counters: seq (lease ids), queued, inflight, bfs_asked
--   <prefix>own       STRING owner "member|token" (read when fenced)
-- ARGV: prefix, now, max_n, lease_ttl_s, owner ("member|token" or '' when not fenced), mode
--   mode 'l' (bfs): hosts are taken from the time heap r, the last come due first (warm
--   connections) and one in 32 from the oldest due; URLs FIFO from lists.
--   mode 'z'/'a': due hosts move from r to the due heap pr, scored by their best URL; the best
--   hosts are leased and each gives its best URL (ZSET url -> -priority, head in HASH qe).
--   That is Mercator's split: priority picks among due hosts, never past a host's delay.
-- Reply: {earliest_next_or_-1, lease1, host1, entry1, score1, lease2, ...}, or {-2} when the
-- caller no longer owns the partition (fencing: a paused ex-owner must not hand out leases).
-- Postconditions: each leased host is out of r and pr and marked busy (hb) with the lease id;
-- the lease is in L ("host\tentry\tscore") and D (deadline). A host is never leased twice.
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local max_n = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local mode = ARGV[6]
local ready = KEYS[1]
local pr = prefix .. 'pr'
if ARGV[5] ~= '' and redis.call('GET', prefix .. 'own') ~= ARGV[5] then return {-2} end
local st = prefix .. 's'
local out = {-1}
local leased = 0

local function lease_one(host, entry, score)
  local lease = redis.call('HINCRBY', st, 'seq', 1)
  redis.call('HSET', prefix .. 'hb', host, lease)
  redis.call('HSET', prefix .. 'L', lease, host .. '\t' .. entry .. '\t' .. score)
  redis.call('ZADD', prefix .. 'D', now + ttl, lease)
  out[#out + 1] = lease
  out[#out + 1] = host
  out[#out + 1] = entry
  out[#out + 1] = score
  leased = leased + 1
end

local function lease_fifo(hosts)
  for _, host in ipairs(hosts) do
    redis.call('ZREM', ready, host)
    local entry = redis.call('LPOP', prefix .. 'q:' .. host)
    if entry then lease_one(host, entry, 0) end
  end
end

if max_n > 0 and mode == 'l' then
  -- Warm hosts first: most of the hosts are the ones that came due last, whose previous
  -- fetch ended a delay ago and whose kept-alive connection is still open (servers close
  -- idle ones after seconds; a new one costs a TCP and a TLS handshake on both sides).
  -- The oldest due hosts get one lease in 32, counted over calls (most calls ask for a few
  -- hosts of a partition), so none waits forever (one in 8 cost 15% in pages/s: the
  -- 2026-12-06 evening runs in docs/benchmarks.md).
  local counted = redis.call('HINCRBY', st, 'bfs_asked', max_n)
  local oldest_n = math.floor(counted / 32) - math.floor((counted - max_n) / 32)
  lease_fifo(redis.call('ZREVRANGEBYSCORE', ready, now, '-inf', 'LIMIT', 0, max_n - oldest_n))
  lease_fifo(redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, oldest_n))
elseif max_n > 0 then
  local due = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, 256)
  for _, host in ipairs(due) do
    redis.call('ZREM', ready, host)
    local best = redis.call('ZRANGE', prefix .. 'q:' .. host, 0, 0, 'WITHSCORES')
    if best[2] then redis.call('ZADD', pr, best[2], host) end
  end
  local hosts = redis.call('ZPOPMIN', pr, max_n)
  for h = 1, #hosts, 2 do
    local host = hosts[h]
    local top = redis.call('ZPOPMIN', prefix .. 'q:' .. host)
    if top[1] then
      local head = redis.call('HGET', prefix .. 'qe', top[1]) or '0'
      redis.call('HDEL', prefix .. 'qe', top[1])
      lease_one(host, head .. ' ' .. top[1], top[2])
    end
  end
end
if leased > 0 then
  redis.call('HINCRBY', st, 'queued', -leased)
  redis.call('HINCRBY', st, 'inflight', leased)
end
if mode ~= 'l' and redis.call('ZCARD', pr) > 0 then
  out[1] = now
else
  local first = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
  if first[2] then out[1] = first[2] end
end
return out
