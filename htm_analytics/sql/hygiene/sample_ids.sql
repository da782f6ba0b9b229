-- A seeded sample of the memories in scope, chosen in the database: the %(size)s memories
-- whose ids hash lowest with %(seed)s (hashint8extended, the hash of hash partitioning,
-- stable across servers and releases). The same seed gives the same memories on every run
-- and for every check, and a memory stays sampled while the memory grows unless a new one
-- hashes lower. Reading the ids takes an index-only scan of the primary key and a top-N sort:
-- nothing but the sample leaves the server. With %(dimension)s, only memories holding a vector
-- of that dimension (the reachability check samples each index's own).
SELECT n.id
FROM nodes n
WHERE {scope}
  AND (%(dimension)s::int IS NULL OR n.embedding_dimension = %(dimension)s::int)
ORDER BY hashint8extended(n.id, %(seed)s::bigint), n.id
LIMIT %(size)s::bigint
