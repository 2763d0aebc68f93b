-- Empty the queues of hosts an operator dropped from the crawl (`trawl drop`), in one
-- partition: every queued URL of such a host ends here, counted, and is returned so the
-- caller writes its JSONL record. Encoder/decoder: frontier/dropped.py DropCall, DropReply.
-- KEYS[1] = <prefix>r (Keys.ready); built here from ARGV[1] = <prefix> (Keys.prefix(p)):
--   <prefix>q:<host> (emptied), <prefix>qe (heads removed, mode 'z'/'a'), <prefix>pr (due
--   heap, mode 'z'/'a'), <prefix>hb (read: a leased host is left alone), <prefix>s
--   (counters: queued, dropped, revisit_dropped).
-- ARGV: prefix, mode ('l' FIFO lists, else priority ZSETs), most URLs to take, then hosts.
-- A host holding a lease is skipped: its lease ends first (the worker drops that URL too and
-- calls again). A host whose queue is emptied leaves the ready and due heaps, which keeps
-- frontier.py's invariant (in r iff its queue is non-empty and it holds no lease); one left
-- with URLs past the cap stays there and comes due again.
-- A revisit entry ("depth.attempts.hops.r url") was accounted at its first visit: it counts
-- as revisit_dropped, not dropped, so accounted still equals admitted.
-- Reply: {host1, entry1, host2, entry2, ...} of the URLs taken, entries as queued.
local prefix, mode = ARGV[1], ARGV[2]
local cap = tonumber(ARGV[3])
local ready = KEYS[1]
local st = prefix .. 's'
local out = {}
local dropped, revisits, taken = 0, 0, 0
for i = 4, #ARGV do
  if taken >= cap then break end
  local host = ARGV[i]
  if not redis.call('HGET', prefix .. 'hb', host) then
    local q = prefix .. 'q:' .. host
    local n = cap - taken
    local entries = {}
    if mode == 'l' then
      entries = redis.call('LRANGE', q, 0, n - 1)
      if #entries > 0 then redis.call('LTRIM', q, #entries, -1) end
    else
      local urls = redis.call('ZRANGE', q, 0, n - 1)
      if #urls > 0 then
        local heads = redis.call('HMGET', prefix .. 'qe', unpack(urls))
        redis.call('HDEL', prefix .. 'qe', unpack(urls))
        redis.call('ZREMRANGEBYRANK', q, 0, #urls - 1)
        for j, url in ipairs(urls) do entries[j] = (heads[j] or '0') .. ' ' .. url end
      end
    end
    for _, entry in ipairs(entries) do
      local head = string.match(entry, '^[^ ]*')
      if string.sub(head, -2) == '.r' then revisits = revisits + 1 else dropped = dropped + 1 end
      out[#out + 1] = host
      out[#out + 1] = entry
    end
    taken = taken + #entries
    local left
    if mode == 'l' then left = redis.call('LLEN', q) else left = redis.call('ZCARD', q) end
    if left == 0 then
      redis.call('ZREM', ready, host)
      if mode ~= 'l' then redis.call('ZREM', prefix .. 'pr', host) end
    end
  end
end
if taken > 0 then redis.call('HINCRBY', st, 'queued', -taken) end
if dropped > 0 then redis.call('HINCRBY', st, 'dropped', dropped) end
if revisits > 0 then redis.call('HINCRBY', st, 'revisit_dropped', revisits) end
return out
