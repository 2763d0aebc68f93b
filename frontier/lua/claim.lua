-- Claim or renew the ownership lease of one partition (fencing token included).
-- Encoder/decoder: frontier/partitions.py encode_claim, decode_claim.
-- KEYS[1] = <prefix>own (Keys.owner: STRING "member|token", with a TTL),
-- KEYS[2] = <prefix>epoch (Keys.epoch: STRING last token handed out); same slot. Built here:
--   <prefix>s HASH (fields released, orphan_seq, seq).
-- ARGV: member, ttl_ms
-- Reply: the fencing token (> 0) if the caller owns the partition now, else 0.
-- A new owner always gets a new, larger token (INCR), so writes of an earlier owner, which
-- carry its old token, are rejected by the owner-only scripts (acquire, reap).
-- Taking over a claim that expired (its owner died, or was cut off) rather than one released
-- (release_partition.lua marks those) records orphan_seq, the last lease id handed out so far:
-- leases up to it that no worker has begun were dispatched by the lost owner, and reap.lua
-- re-queues them at once instead of after lease_ttl_s.
local cur = redis.call('GET', KEYS[1])
local member = ARGV[1]
if cur then
  local sep = string.find(cur, '|', 1, true)
  if string.sub(cur, 1, sep - 1) == member then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(string.sub(cur, sep + 1))
  end
  return 0
end
local st = string.sub(KEYS[1], 1, #KEYS[1] - 3) .. 's'
if redis.call('HDEL', st, 'released') == 0 then
  local seq = redis.call('HGET', st, 'seq')
  if seq then redis.call('HSET', st, 'orphan_seq', seq) end
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], member .. '|' .. token, 'PX', ARGV[2])
return token
