-- Release per-IP tokens: ARGV: ip_prefix, then per token: ip, token, next_allowed.
-- KEYS[1] = <ip prefix>ipn
local prefix = ARGV[1]
local ipn = KEYS[1]
local i = 2
while i <= #ARGV do
  local ip, token, nxt = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  redis.call('ZREM', prefix .. 'ipl:' .. ip, token)
  local cur = tonumber(redis.call('HGET', ipn, ip) or 0)
  if nxt > cur then redis.call('HSET', ipn, ip, nxt) end
  i = i + 3
end
return 1
