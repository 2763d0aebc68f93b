-- Admit a batch of links into one partition: URL-seen test-and-set on the partition's scalable
-- blocked Bloom filter (see frontier/bloom.py), then enqueue the new ones.
-- KEYS[1] = <prefix>r (routes the call to the partition's slot; all keys share the tag)
-- ARGV: prefix, now, n_layers, then per layer: blocks, k, capacity;
--       then per link: host, entry, block_hash, bit_hash
-- Returns {admitted, rejected, flags}; flags has '1' (new) / '0' (seen) per link.
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local nspec = tonumber(ARGV[3])
local blocks, ks, caps = {}, {}, {}
for l = 0, nspec - 1 do
  blocks[l] = tonumber(ARGV[4 + 3 * l])
  ks[l] = tonumber(ARGV[5 + 3 * l])
  caps[l] = tonumber(ARGV[6 + 3 * l])
end
local ready = KEYS[1]
local hn, hb, st = prefix .. 'hn', prefix .. 'hb', prefix .. 's'
local layer = tonumber(redis.call('HGET', st, 'bloom_layer') or 0)
local fill = tonumber(redis.call('HGET', st, 'bloom_fill') or 0)
local admitted, rejected = 0, 0
local flags = {}
local args = {}

-- Fill args with BITFIELD ops for one layer; returns the number of array slots used.
local function ops(l, op, bh, ih)
  local base = (bh % blocks[l]) * 512
  local start = ih % 512
  local step = (math.floor(ih / 512) % 256) * 2 + 1
  local j = 0
  for i = 0, ks[l] - 1 do
    args[j + 1] = op; args[j + 2] = 'u1'; args[j + 3] = base + (start + i * step) % 512
    if op == 'SET' then args[j + 4] = 1; j = j + 4 else j = j + 3 end
  end
  return j
end

local i = 4 + 3 * nspec
local n = #ARGV
while i <= n do
  local host, entry = ARGV[i], ARGV[i + 1]
  local bh, ih = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  -- Older layers are only read; the newest is test-and-set in the same command.
  local seen = false
  for l = 0, layer - 1 do
    local j = ops(l, 'GET', bh, ih)
    local bits = redis.call('BITFIELD', prefix .. 'b' .. l, unpack(args, 1, j))
    local all = true
    for b = 1, ks[l] do if bits[b] == 0 then all = false; break end end
    if all then seen = true; break end
  end
  if not seen then
    local j = ops(layer, 'SET', bh, ih)
    local old = redis.call('BITFIELD', prefix .. 'b' .. layer, unpack(args, 1, j))
    seen = true
    for b = 1, ks[layer] do if old[b] == 0 then seen = false; break end end
  end
  if seen then
    rejected = rejected + 1
    flags[#flags + 1] = '0'
  else
    admitted = admitted + 1
    flags[#flags + 1] = '1'
    fill = fill + 1
    if fill >= caps[layer] and layer + 1 < nspec then layer = layer + 1; fill = 0 end
    redis.call('RPUSH', prefix .. 'q:' .. host, entry)
    if redis.call('HEXISTS', hb, host) == 0 then
      local nxt = tonumber(redis.call('HGET', hn, host) or now)
      if nxt < now then nxt = now end
      redis.call('ZADD', ready, 'NX', nxt, host)
    end
  end
  i = i + 4
end
if admitted > 0 then
  redis.call('HINCRBY', st, 'admitted', admitted)
  redis.call('HINCRBY', st, 'queued', admitted)
  redis.call('HSET', st, 'bloom_layer', layer, 'bloom_fill', fill)
end
if rejected > 0 then redis.call('HINCRBY', st, 'seen_rejected', rejected) end
return {admitted, rejected, table.concat(flags)}
