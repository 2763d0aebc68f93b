-- Admit a batch of links into one partition: URL-seen test-and-set on the partition's scalable
-- Bloom filter (see frontier/bloom.py), then enqueue the new ones.
-- Encoder/decoder: frontier/admission.py AdmitCall (with LinkArgs per link), AdmitReply.
-- KEYS[1] = <prefix>r (Keys.ready; routes the call to the partition's slot). The other keys
--   are built here from ARGV[1] = <prefix> (Keys.prefix(p), legend there), all in p's slot:
--   <prefix>r         ZSET host -> next allowed time (hosts woken by a new URL are added)
--   <prefix>pr        ZSET host -> best score, due hosts (mode 'z'/'a': lowered, never added)
--   <prefix>q:<host>  the host's queue: LIST of entries (mode 'l') or ZSET url -> -priority
--   <prefix>qe        HASH url -> entry head "depth[.attempts.hops]" (mode 'z'/'a')
--   <prefix>hn        HASH host -> next allowed time (read)
--   <prefix>hb        HASH host -> lease id (read: a leased host is not woken)
--   <prefix>hc        HASH host -> URLs admitted (host_cap > 0)
--   <prefix>qv        HASH host+path -> distinct queries admitted (query_cap > 0)
--   <prefix>b<l>      STRING bitmap of the Lua filter's layer l (filter 'lua')
--   <prefix>bf        RedisBloom scalable filter (filter 'bf')
--   <prefix>s         HASH counters: admitted, queued, seen_rejected, over_host_cap,
--                     trap_query_variants, over_domain_budget, reprioritized; and the Lua
--                     filter's bloom_layer, bloom_fill
-- ARGV: prefix, now, mode, host_cap, query_cap, stride, n_budgets, budgets..., the filter,
--       then per link: host, entry, hashes[, prio, budget] ('' = none, else a 1-based index
--       into budgets; both only when stride is 5: priority orderings or budgets).
--       hashes: the URL's two 52-bit hashes h1, h2 (frontier/bloom.py url_hash), 7 bytes
--       big-endian each: decoding bytes costs a fraction of tonumber's strtod on 16 decimal
--       digits (callgrind, issue 7).
--   the filter: 'lua', n_layers, then per layer: bits, k, capacity (our bitmaps, keys b<l>);
--         or 'bf', rate, capacity, expansion: RedisBloom's scalable filter in key bf, fed the
--         14 hash bytes as the item (frontier/redisbloom.py: why rate is twice the crawl's).
--   mode: 'l' host queues are FIFO lists (bfs); 'z' host queues are ZSETs url -> -priority
--         with the entry's head in HASH qe (random: prio is the score of a new URL); 'a' as
--         'z', and a link to a URL still queued adds prio to it (indegree, opic).
--   host_cap: admit at most this many URLs per host (0 = no cap; count in HASH hc).
--   query_cap: admit at most this many distinct queries per host path (0 = no cap; HASH qv).
--   budgets: URLs each registered domain may still admit (IRLbot budget, computed by the
--         caller); a new URL over its budget is not marked seen, so it may come back later.
-- Reply: {admitted, rejected, flags, over_host_cap, over_query_cap, over_budget,
--         reprioritized, woke, per-budget admitted counts...}; flags: per link '1' new, '0'
--         not admitted; woke: earliest next-allowed time of a host put into r, or '-1'.
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local mode = ARGV[3]
local host_cap = tonumber(ARGV[4])
local query_cap = tonumber(ARGV[5])
local STRIDE = tonumber(ARGV[6])  -- ARGV entries per link: 3 or 5
local nbud = tonumber(ARGV[7])
local budget, spent = {}, {}
for b = 1, nbud do budget[b] = tonumber(ARGV[7 + b]); spent[b] = 0 end
local base = 9 + nbud
local use_bf = ARGV[base - 1] == 'bf'
local nspec = 0
local bits, ks, caps = {}, {}, {}
local bf = prefix .. 'bf'
if use_bf then
  -- Reserved with the crawl's rate and capacity before its first item, or BF.MADD would
  -- create it with RedisBloom's defaults (100 items at 1%).
  if redis.call('EXISTS', bf) == 0 then
    redis.call('BF.RESERVE', bf, ARGV[base], ARGV[base + 1], 'EXPANSION', ARGV[base + 2])
  end
  base = base + 2
else
  nspec = tonumber(ARGV[base])
  for l = 0, nspec - 1 do
    bits[l] = tonumber(ARGV[base + 1 + 3 * l])
    ks[l] = tonumber(ARGV[base + 2 + 3 * l])
    caps[l] = tonumber(ARGV[base + 3 + 3 * l])
  end
end
local ready = KEYS[1]
local pr = prefix .. 'pr'
local hn, hb, st = prefix .. 'hn', prefix .. 'hb', prefix .. 's'
local layer, fill = 0, 0
if not use_bf then
  layer = tonumber(redis.call('HGET', st, 'bloom_layer') or 0)
  fill = tonumber(redis.call('HGET', st, 'bloom_fill') or 0)
end
local admitted, rejected, over_host, over_query, over_budget, reprio = 0, 0, 0, 0, 0, 0

-- Create layer l's bitmap at its full size before its first bit is set: grown bit by bit,
-- Redis would over-allocate it by up to 2x (greedy sds growth); SETBIT on a missing key
-- allocates exactly the bytes up to that bit.
local function alloc(l)
  local key = prefix .. 'b' .. l
  if redis.call('EXISTS', key) == 0 then redis.call('SETBIT', key, bits[l] - 1, 0) end
end
if fill == 0 and not use_bf then alloc(layer) end
local flags = {}
local args = {}
-- Numbers go to redis.call as strings made here: Redis would format each one with
-- snprintf("%.17g"), several times the cost of an integer format (callgrind, issue 7).
local fmt = string.format
local byte = string.byte

-- The two hashes of the link whose hashes are at ARGV[a].
local function hashes(a)
  local s = ARGV[a]
  local a1, a2, a3, a4, a5, a6, a7, b1, b2, b3, b4, b5, b6, b7 = byte(s, 1, 14)
  return (((((a1 * 256 + a2) * 256 + a3) * 256 + a4) * 256 + a5) * 256 + a6) * 256 + a7,
         (((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6) * 256 + b7
end

-- Fill args with BITFIELD ops for one layer; returns the number of array slots used.
-- Offsets: enhanced double hashing over the layer's m bits (frontier/bloom.py layer_offsets);
-- h1, h2 < 2^52, so every step is exact in doubles.
local function ops(l, op, h1, h2)
  local m = bits[l]
  local x, y = h1 % m, h2 % m
  local j = 0
  for i = 0, ks[l] - 1 do
    args[j + 1] = op; args[j + 2] = 'u1'; args[j + 3] = fmt('%d', x)
    if op == 'SET' then args[j + 4] = '1'; j = j + 4 else j = j + 3 end
    x = (x + y) % m
    y = (y + i) % m
  end
  return j
end

local function all_set(bits, k)
  for b = 1, k do if bits[b] == 0 then return false end end
  return true
end

-- Is the URL whose hashes are at ARGV[a] in the Bloom filter? With set=true the newest
-- layer is test-and-set.
local function seen_test(a, set)
  if use_bf then
    if set then return redis.call('BF.ADD', bf, ARGV[a]) == 0 end
    return redis.call('BF.EXISTS', bf, ARGV[a]) == 1
  end
  local bh, ih = hashes(a)
  for l = 0, layer - 1 do
    local j = ops(l, 'GET', bh, ih)
    if all_set(redis.call('BITFIELD', prefix .. 'b' .. l, unpack(args, 1, j)), ks[l]) then
      return true
    end
  end
  local j = ops(layer, set and 'SET' or 'GET', bh, ih)
  return all_set(redis.call('BITFIELD', prefix .. 'b' .. layer, unpack(args, 1, j)), ks[layer])
end

-- The host may be fetched: make sure it waits in the time heap r or, for priority queues,
-- sits in the due heap pr with its best URL's score. `woke` = the earliest time of a host
-- this call put into r (the scheduler's due hint, see Frontier.queue_due_hints).
local woke = -1
local function wake(host, q, score)
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

local first = base + 1 + 3 * nspec
local n = #ARGV

-- Without budgets, the whole call's URL-seen test is done up front, a few BITFIELD calls of
-- up to MAXB links each per layer instead of one call per link and layer: a call from Lua
-- costs several microseconds whatever it carries, the ops in it well under one each (issue
-- 7). One BITFIELD runs its ops in order, so a URL twice in a batch is new the first time
-- and seen the second, as with one call per link. Budgets make a link's test depend on what
-- was admitted before it in the batch, so with budgets the test stays per link (seen_test).
local MAXB = 200  -- links per BITFIELD: 4k arguments each; Lua's unpack stops near 8000
local batched = nbud == 0
local seen_before = {}  -- link number -> true: all its bits were set before its test
local function test_bits(l, op, list, upto)
  local key, k, m = prefix .. 'b' .. l, ks[l], bits[l]
  local s = 1
  while s <= upto do
    local e = math.min(upto, s + MAXB - 1)
    local j = 0
    for t = s, e do
      local h1, h2 = hashes(first + STRIDE * (list[t] - 1) + 2)
      local x, y = h1 % m, h2 % m
      for r = 0, k - 1 do
        args[j + 1] = op; args[j + 2] = 'u1'; args[j + 3] = fmt('%d', x)
        if op == 'SET' then args[j + 4] = '1'; j = j + 4 else j = j + 3 end
        x = (x + y) % m
        y = (y + r) % m
      end
    end
    local got = redis.call('BITFIELD', key, unpack(args, 1, j))
    local g = 0
    for t = s, e do
      local all = true
      for b = g + 1, g + k do if got[b] == 0 then all = false; break end end
      g = g + k
      if all then seen_before[list[t]] = true end
    end
    s = e + 1
  end
end
local function unseen(list, from)
  local out = {}
  for t = from, #list do
    if not seen_before[list[t]] then out[#out + 1] = list[t] end
  end
  return out
end
if batched and use_bf then
  -- RedisBloom tests-and-sets in order: a URL twice in a batch is new, then seen.
  local MAXI = 4000  -- items per BF.MADD (Lua's unpack stops near 8000)
  local nlinks = (n - first + 1) / STRIDE
  local items = {}
  local s = 1
  while s <= nlinks do
    local e = math.min(nlinks, s + MAXI - 1)
    for t = s, e do items[t - s + 1] = ARGV[first + STRIDE * (t - 1) + 2] end
    local got = redis.call('BF.MADD', bf, unpack(items, 1, e - s + 1))
    for t = s, e do if got[t - s + 1] == 0 then seen_before[t] = true end end
    s = e + 1
  end
elseif batched then
  local pending = {}
  for j = 1, (n - first + 1) / STRIDE do pending[j] = j end
  for l = 0, layer - 1 do
    test_bits(l, 'GET', pending, #pending)
    pending = unseen(pending, 1)
  end
  while #pending > 0 do
    -- At most the layer's room in one go, so a full layer is closed where it filled up.
    local upto = #pending
    if layer + 1 < nspec then upto = math.min(upto, math.max(1, caps[layer] - fill)) end
    test_bits(layer, 'SET', pending, upto)
    for t = 1, upto do if not seen_before[pending[t]] then fill = fill + 1 end end
    local rest = {}
    for t = upto + 1, #pending do rest[#rest + 1] = pending[t] end
    if fill >= caps[layer] and layer + 1 < nspec then
      layer = layer + 1; fill = 0; alloc(layer)
      test_bits(layer - 1, 'GET', rest, #rest)
      rest = unseen(rest, 1)
    end
    pending = rest
  end
end

local i = first
local link = 0
while i <= n do
  link = link + 1
  if seen_before[link] and mode ~= 'a' then
    -- Seen, nothing to re-prioritize: the common case, kept short.
    rejected = rejected + 1
    flags[link] = '0'
  else
    local host, entry = ARGV[i], ARGV[i + 1]
    local prio, bi = 0, nil
    if STRIDE > 3 then prio = tonumber(ARGV[i + 3]); bi = tonumber(ARGV[i + 4]) end
    local url
    if mode ~= 'l' or query_cap > 0 then
      url = string.sub(entry, string.find(entry, ' ', 1, true) + 1)
    end
    -- A URL over its domain's budget is tested without setting its bits.
    local capped = bi and budget[bi] - spent[bi] <= 0
    local seen
    if batched then
      seen = seen_before[link] or false
    else
      seen = seen_test(i + 2, not capped)
    end
    local why, qkey = nil, nil
    if seen then
      why = 'seen'
      if mode == 'a' and prio ~= 0 then
        local q = prefix .. 'q:' .. host
        local score = redis.call('ZADD', q, 'XX', 'INCR', -prio, url)
        if score then
          reprio = reprio + 1
          if redis.call('ZSCORE', pr, host) then redis.call('ZADD', pr, 'LT', score, host) end
        end
      end
    elseif capped then
      why = 'budget'
      over_budget = over_budget + 1
    else
      if query_cap > 0 then
        local qm = string.find(url, '?', 1, true)
        qkey = qm and host .. string.sub(url, 1, qm - 1)
      end
      if host_cap > 0 and tonumber(redis.call('HGET', prefix .. 'hc', host) or 0) >= host_cap then
        why = 'host'
        over_host = over_host + 1
      elseif qkey and tonumber(redis.call('HGET', prefix .. 'qv', qkey) or 0) >= query_cap then
        why = 'query'
        over_query = over_query + 1
      end
    end
    if not seen and not batched and not use_bf then
      -- Counted even when a cap refuses the URL: its bits are set, it is not coming back.
      if not capped then
        fill = fill + 1
        if fill >= caps[layer] and layer + 1 < nspec then layer = layer + 1; fill = 0; alloc(layer) end
      end
    end
    if why then
      rejected = rejected + 1
      flags[link] = '0'
    else
      admitted = admitted + 1
      flags[link] = '1'
      if bi then spent[bi] = spent[bi] + 1 end
      if host_cap > 0 then redis.call('HINCRBY', prefix .. 'hc', host, 1) end
      if qkey then redis.call('HINCRBY', prefix .. 'qv', qkey, 1) end
      local q = prefix .. 'q:' .. host
      if mode == 'l' then
        -- A queue that was not empty means the host is already in r or leased: no wake.
        if redis.call('RPUSH', q, entry) == 1 then wake(host, q, 0) end
      else
        local head = string.sub(entry, 1, string.find(entry, ' ', 1, true) - 1)
        redis.call('ZADD', q, -prio, url)
        redis.call('HSET', prefix .. 'qe', url, head)
        wake(host, q, -prio)
      end
    end
  end
  i = i + STRIDE
end
if admitted > 0 then
  redis.call('HINCRBY', st, 'admitted', admitted)
  redis.call('HINCRBY', st, 'queued', admitted)
end
if admitted + over_host + over_query > 0 and not use_bf then
  redis.call('HSET', st, 'bloom_layer', layer, 'bloom_fill', fill)
end
local seen_n = rejected - over_host - over_query - over_budget
if seen_n > 0 then redis.call('HINCRBY', st, 'seen_rejected', seen_n) end
if over_host > 0 then redis.call('HINCRBY', st, 'over_host_cap', over_host) end
if over_query > 0 then redis.call('HINCRBY', st, 'trap_query_variants', over_query) end
if over_budget > 0 then redis.call('HINCRBY', st, 'over_domain_budget', over_budget) end
if reprio > 0 then redis.call('HINCRBY', st, 'reprioritized', reprio) end
local out = {admitted, rejected, table.concat(flags), over_host, over_query, over_budget, reprio,
             tostring(woke)}
for b = 1, nbud do out[#out + 1] = spent[b] end
return out
