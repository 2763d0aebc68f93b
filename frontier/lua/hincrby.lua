-- Several HINCRBYs of one hash as one script call (encoder: frontier/partition_counters.py
-- encode_hincrby). KEYS[1] = the hash (Keys.stats); ARGV: field, amount, ... Reply: 1.
for i = 1, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
