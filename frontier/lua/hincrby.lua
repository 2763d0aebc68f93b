-- Several HINCRBYs of one hash as one script call. KEYS[1] = hash; ARGV: field, amount, ...
-- Returns 1.
for i = 1, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
