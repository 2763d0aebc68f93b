-- Release per-IP tokens and push each IP's next allowed time forward.
-- Encoder: frontier/ipgate.py encode_ip_release.
-- KEYS[1] = <ip prefix>ipn (Keys.ip_next: HASH ip -> next allowed time, raised, never
--   lowered). Built here from ARGV[1] = <ip prefix> (Keys.ip_prefix): <ip prefix>ipl:<ip>
--   ZSET token -> deadline (the token removed).
-- ARGV: ip_prefix, then per token: ip, token, next_allowed. Reply: 1.
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
