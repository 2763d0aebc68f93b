-- Lease up to N due hosts of one partition: pop the head URL of each into a lease.
-- KEYS[1] = <prefix>r
-- ARGV: prefix, now, max_n, lease_ttl_s, owner ("member|token" or '' when not fenced)
-- Returns {earliest_next_or_-1, lease1, host1, entry1, lease2, ...}, or {-2} when the caller
-- no longer owns the partition (fencing: a paused ex-owner must not hand out leases).
-- Postconditions: each leased host is out of the ready heap and marked busy (hb) with the
-- lease id; the lease is in L (payload) and D (deadline). A host is never leased twice.
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local max_n = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local ready = KEYS[1]
if ARGV[5] ~= '' and redis.call('GET', prefix .. 'own') ~= ARGV[5] then return {-2} end
local st = prefix .. 's'
local out = {-1}
local leased = 0
if max_n > 0 then
  local hosts = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, max_n)
  for _, host in ipairs(hosts) do
    redis.call('ZREM', ready, host)
    local entry = redis.call('LPOP', prefix .. 'q:' .. host)
    if entry then
      local lease = redis.call('HINCRBY', st, 'seq', 1)
      redis.call('HSET', prefix .. 'hb', host, lease)
      redis.call('HSET', prefix .. 'L', lease, host .. '\t' .. entry)
      redis.call('ZADD', prefix .. 'D', now + ttl, lease)
      out[#out + 1] = lease
      out[#out + 1] = host
      out[#out + 1] = entry
      leased = leased + 1
    end
  end
end
if leased > 0 then
  redis.call('HINCRBY', st, 'queued', -leased)
  redis.call('HINCRBY', st, 'inflight', leased)
end
local first = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
if first[2] then out[1] = first[2] end
return out
