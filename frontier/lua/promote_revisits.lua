-- Promote a partition's due revisits into their host queues, within its share of the revisit
-- budget (continuous crawling; frontier/revisits.py PromoteCall, PromoteReply).
-- KEYS[1] = <prefix>r (Keys.ready). Built from ARGV[1] = <prefix>, all in p's slot:
--   <prefix>rv        ZSET "depth url" (the host queue is the URL's: url_host below), or
--                     "host\tdepth url" -> next visit time (due members removed;
--                     frontier/revisits.py schedule_member)
--   <prefix>rvb       HASH the token bucket: tokens, at (the partition's share of the budget,
--                     so the cap holds whichever worker owns the partition)
--   <prefix>q:<host>  the host's queue: a revisit goes to its head (LIST, mode 'l') or gets
--                     the best score (ZSET, mode 'z'/'a'), ahead of new URLs
--   <prefix>qe, pr, hn, hb, r: as admit.lua (the host is woken the same way)
--   <prefix>s         HASH counters: queued, revisits_promoted, revisits_deferred
-- ARGV: prefix, now, mode, rate (tokens a second), burst (most tokens saved), max_n.
-- The URL-seen Bloom filter is not consulted: a revisit is a URL fetched before. The entry
-- is marked a revisit ("depth.0.0.r url", frontier/records.py Entry).
-- Reply: {promoted, woke (earliest next-allowed time of a host put into r, or -1),
--         still due (members due now left for lack of tokens)}.
local prefix, now, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local rate, burst, max_n = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local ready, rv, bucket = KEYS[1], prefix .. 'rv', prefix .. 'rvb'
local hn, hb, pr, st = prefix .. 'hn', prefix .. 'hb', prefix .. 'pr', prefix .. 's'
local state = redis.call('HMGET', bucket, 'tokens', 'at')
local tokens, at = tonumber(state[1]) or burst, tonumber(state[2]) or now
if now > at then tokens = math.min(burst, tokens + (now - at) * rate) end
local n = math.min(math.floor(tokens), max_n)
local due = {}
if n > 0 then due = redis.call('ZRANGEBYSCORE', rv, '-inf', now, 'LIMIT', 0, n) end
local woke = -1
-- admit.lua's wake rule (a script cannot call another's functions): a leased host is left
-- alone, a due host's heap score lowered, else the host put into r at its next time.
local function wake(host, score)
  if redis.call('HEXISTS', hb, host) == 1 then return end
  if mode ~= 'l' and redis.call('ZSCORE', pr, host) then
    redis.call('ZADD', pr, 'LT', score, host)
    return
  end
  local nxt = tonumber(redis.call('HGET', hn, host) or now)
  if nxt < now then nxt = now end
  if redis.call('ZADD', ready, 'NX', nxt, host) == 1 and (woke < 0 or nxt < woke) then
    woke = nxt
  end
end
-- frontier/revisits.py url_host, byte for byte: the netloc after its last '@'.
local function url_host(url)
  local s = string.find(url, '://', 1, true) + 3
  local e = string.find(url, '/', s, true)
  local netloc = e and string.sub(url, s, e - 1) or string.sub(url, s)
  local at = string.find(netloc, '@[^@]*$')
  if at then netloc = string.sub(netloc, at + 1) end
  return netloc
end
for _, member in ipairs(due) do
  local tab = string.find(member, '\t', 1, true)
  local entry = tab and string.sub(member, tab + 1) or member
  local sp = string.find(entry, ' ', 1, true)
  local head, url = string.sub(entry, 1, sp - 1) .. '.0.0.r', string.sub(entry, sp + 1)
  local host = tab and string.sub(member, 1, tab - 1) or url_host(url)
  local q = prefix .. 'q:' .. host
  if mode == 'l' then
    redis.call('LPUSH', q, head .. ' ' .. url)
    wake(host, 0)
  else
    redis.call('ZADD', q, '-inf', url)
    redis.call('HSET', prefix .. 'qe', url, head)
    wake(host, '-inf')
  end
end
if #due > 0 then
  redis.call('ZREM', rv, unpack(due))
  redis.call('HINCRBY', st, 'queued', #due)
  redis.call('HINCRBY', st, 'revisits_promoted', #due)
end
redis.call('HSET', bucket, 'tokens', tostring(tokens - #due), 'at', tostring(math.max(now, at)))
local left = 0
if #due == n then
  left = redis.call('ZCOUNT', rv, '-inf', now)
end
return {#due, tostring(woke), left}
