-- IRLbot-style budgets of registered domains in one domain slot: how many more URLs each
-- domain may admit. A domain's budget grows with the distinct other domains linking to it
-- (a HyperLogLog per domain), so a spam or trap domain that nobody links to stays small.
-- Encoder/decoder: frontier/budgets.py BudgetCall, decode_budget.
-- KEYS[1] = <dprefix>dc (Keys.domain_spent: HASH domain -> URLs admitted, read here; counted
--   by Frontier.queue_domain_spent). Built here from ARGV[1] = <dprefix> (Keys.domain_prefix):
--   <dprefix>in:<domain> HyperLogLog of the other registered domains linking to the domain.
-- ARGV: dprefix, base, per_linker, cap, then per domain: domain, n, linking domains (n)...
--   base = 0: no linker budget (only cap); cap = 0: no cap.
-- Reply: per domain the URLs it may still admit (>= 0).
local prefix = ARGV[1]
local base = tonumber(ARGV[2])
local per = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local out = {}
local i = 5
while i <= #ARGV do
  local domain, n = ARGV[i], tonumber(ARGV[i + 1])
  local hll = prefix .. 'in:' .. domain
  if n > 0 then redis.call('PFADD', hll, unpack(ARGV, i + 2, i + 1 + n)) end
  local budget = -1
  if base > 0 then budget = base + per * redis.call('PFCOUNT', hll) end
  if cap > 0 and (budget < 0 or cap < budget) then budget = cap end
  local used = tonumber(redis.call('HGET', KEYS[1], domain) or 0)
  local left = budget - used
  if left < 0 then left = 0 end
  out[#out + 1] = left
  i = i + 2 + n
end
return out
