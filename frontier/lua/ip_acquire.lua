-- Per-IP politeness gate for one IP partition: admit a fetch to each IP if fewer than `limit`
-- requests to it are in flight and its next allowed time has come.
-- Encoder/decoder: frontier/ipgate.py encode_ip_acquire, decode_ip_acquire.
-- KEYS[1] = <ip prefix>ipn (Keys.ip_next: HASH ip -> next allowed time, read). Built here from
--   ARGV[1] = <ip prefix> (Keys.ip_prefix(i), slot {i<n>}): <ip prefix>ipl:<ip> ZSET token ->
--   deadline of the IP's fetches in flight (expired ones dropped, a granted token added).
-- ARGV: ip_prefix, now, limit, token_ttl_s, then per request: ip, token
-- Reply: per request, 0 (granted) or the time to wait in seconds (as a string); a request
--   refused only for the concurrency limit waits 0.05 s.
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local ipn = KEYS[1]
local out = {}
local i = 5
while i <= #ARGV do
  local ip, token = ARGV[i], ARGV[i + 1]
  local busy = prefix .. 'ipl:' .. ip
  redis.call('ZREMRANGEBYSCORE', busy, '-inf', now)
  local nxt = tonumber(redis.call('HGET', ipn, ip) or 0)
  if nxt > now then
    out[#out + 1] = tostring(nxt - now)
  elseif redis.call('ZCARD', busy) >= limit then
    out[#out + 1] = '0.05'
  else
    redis.call('ZADD', busy, now + ttl, token)
    redis.call('PEXPIRE', busy, math.ceil(ttl * 1000))
    out[#out + 1] = 0
  end
  i = i + 2
end
return out
