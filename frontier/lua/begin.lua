-- A worker starts a leased fetch: check the lease is still current and give it a fresh
-- deadline that covers one fetch. KEYS[1] = <prefix>r. ARGV: prefix, now, budget_s, then lease
-- ids and hosts in pairs. Returns, per lease, 1 (go ahead) or 0 (stale: do not fetch).
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
local out = {}
local i = 4
while i <= #ARGV do
  local lease, host = ARGV[i], ARGV[i + 1]
  if redis.call('HGET', prefix .. 'hb', host) == lease and redis.call('ZSCORE', prefix .. 'D', lease) then
    redis.call('ZADD', prefix .. 'D', now + budget, lease)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
  i = i + 2
end
return out
