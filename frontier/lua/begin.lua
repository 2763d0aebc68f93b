-- A worker starts the leased fetches of a task: check each lease is still current and give it
-- a fresh deadline that covers its fetch. A task's fetches run one after another, so the j-th
-- of them (j = 1, 2, ...) gets now + j x budget_s: each may take up to budget_s after the ones
-- before it, and a worker that dies mid-task gives its URLs back that soon.
-- Encoder/decoder: frontier/leases.py encode_begin, decode_begin.
-- KEYS[1] = <prefix>r (Keys.ready; only routes the call to the partition's slot). Keys built
--   here from ARGV[1] = <prefix> (Keys.prefix(p)): <prefix>hb HASH host -> lease id (read),
--   <prefix>D ZSET lease id -> deadline (renewed).
-- ARGV: prefix, now, budget_s, then per lease: lease id, host, j.
-- Reply: per lease, 1 (go ahead) or 0 (stale: do not fetch).
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
local hb, dl = prefix .. 'hb', prefix .. 'D'
local out = {}
local i = 4
while i <= #ARGV do
  local lease, host = ARGV[i], ARGV[i + 1]
  if redis.call('HGET', hb, host) == lease and redis.call('ZSCORE', dl, lease) then
    redis.call('ZADD', dl, now + budget * tonumber(ARGV[i + 2]), lease)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
  i = i + 3
end
return out
