-- How many times pg_stat_statements evicted its least-used entries since its last reset: an
-- evicted statement's counts are gone, and it counts from zero when it runs again.
SELECT dealloc AS statements_evicted FROM pg_stat_statements_info
