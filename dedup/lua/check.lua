-- Exact check, then LSH query, then (if ARGV[6] == '1') insert: one atomic step, so two
-- near-duplicates checked at the same moment by different workers cannot both become canonical.
-- KEYS: 1 exact (fp -> id), 2 doc (id -> host \t url), 3 sig (id -> packed uint32 minima),
--       4 seq, 5 hostpages (host -> pages checked), 6 mirror (host -> best other host \t count),
--       7 hostdup (host \t other host -> duplicates), 8 bands (band field -> ids)
-- ARGV: 1 fingerprint, 2 host, 3 url, 4 signature, 5 matches needed, 6 write flag,
--       7 num_perm, 8 max candidates, 9 max bucket ids, 10.. band fields (band number byte +
--       band value), one per band: all bands' buckets are fields of one hash, read with one
--       HMGET and written with one HSET (16 HGETs and 16 HSETs cost ~60 us more a page)
-- Returns {kind, canonical url or false, matches, mirror host or false, mirror count, pages}
-- A page checked again under the URL it was recorded with (a re-fetch after a worker died
-- before completing it, or a recrawl) is not its own duplicate: it is classified against the
-- other documents only, and nothing is written or counted a second time.
local fp, host, url, sig = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local need, write, k = tonumber(ARGV[5]), ARGV[6] == '1', tonumber(ARGV[7])
local max_cand, max_bucket = tonumber(ARGV[8]), tonumber(ARGV[9])
local nbands = #ARGV - 9

local function split(doc)
  local tab = string.find(doc, '\t', 1, true)
  return string.sub(doc, 1, tab - 1), string.sub(doc, tab + 1)
end

-- Whether document id was recorded under this very URL.
local function is_this_url(id)
  local doc = redis.call('HGET', KEYS[2], id)
  return doc and select(2, split(doc)) == url
end

local exact = redis.call('HGET', KEYS[1], fp)
local self_id = false
if exact and is_this_url(exact) then self_id, exact, write = tonumber(exact), false, false end

local pages = tonumber(redis.call('HGET', KEYS[5], host) or '0')
if write then pages = redis.call('HINCRBY', KEYS[5], host, 1) end

local function mirror_state()
  local m = redis.call('HGET', KEYS[6], host)
  if not m then return false, 0 end
  local tab = string.find(m, '\t', 1, true)
  return string.sub(m, 1, tab - 1), tonumber(string.sub(m, tab + 1))
end

-- A duplicate of a page on another host counts toward this host being that host's mirror.
local function note_duplicate(other_host)
  if not write or other_host == host then return end
  local c = redis.call('HINCRBY', KEYS[7], host .. '\t' .. other_host, 1)
  local _, best = mirror_state()
  if c > best then redis.call('HSET', KEYS[6], host, other_host .. '\t' .. c) end
end

local function new_doc()
  local id = redis.call('INCR', KEYS[4])
  redis.call('HSET', KEYS[2], id, host .. '\t' .. url)
  redis.call('HSET', KEYS[1], fp, id)
  return id
end

local function reply(kind, canon, matches)
  local mh, mc = mirror_state()
  return {kind, canon, matches, mh, mc, pages}
end

if exact then
  local chost, curl = split(redis.call('HGET', KEYS[2], exact))
  note_duplicate(chost)
  return reply('exact', curl, k)
end

local fmt = '<' .. string.rep('I4', k)
local mine = false  -- unpacked at the first candidate: most pages have none
local seen, n_cand = {}, 0
local best, best_id = -1, false
-- each band's bucket as read here (false: empty), reused by the insert below
local buckets = redis.call('HMGET', KEYS[8], unpack(ARGV, 10, 9 + nbands))
for i = 1, nbands do
  local bucket = buckets[i]
  if bucket then
    for j = 1, #bucket, 4 do
      local id = struct.unpack('<I4', bucket, j)
      if not seen[id] and id ~= self_id and n_cand < max_cand then
        seen[id] = true
        n_cand = n_cand + 1
        if not mine then mine = {struct.unpack(fmt, sig)} end
        local other = {struct.unpack(fmt, redis.call('HGET', KEYS[3], id))}
        local m = 0
        for p = 1, k do
          if other[p] == mine[p] then m = m + 1 end
        end
        -- an earlier version of this very URL (changed content) is not a duplicate of it
        if m > best and m >= need and is_this_url(id) then m = -1 end
        if m > best then best, best_id = m, id end
      end
    end
  end
end

if best_id and best >= need then
  local chost, curl = split(redis.call('HGET', KEYS[2], best_id))
  if write then
    new_doc()
    note_duplicate(chost)
  end
  return reply('near', curl, best)
end

if write then
  local id = new_doc()
  redis.call('HSET', KEYS[3], id, sig)
  local packed = struct.pack('<I4', id)
  local fields = {}
  for i = 1, nbands do
    local bucket = buckets[i]
    if not bucket then
      fields[#fields + 1] = ARGV[9 + i]
      fields[#fields + 1] = packed
    elseif #bucket < 4 * max_bucket then
      fields[#fields + 1] = ARGV[9 + i]
      fields[#fields + 1] = bucket .. packed
    end
  end
  if #fields > 0 then redis.call('HSET', KEYS[8], unpack(fields)) end
end
return reply('unique', false, math.max(best, 0))
