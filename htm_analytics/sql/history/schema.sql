-- The history of a memory's vital signs, schema version 5 (docs/history.md): DuckDB, PostgreSQL,
-- and the tables of a Parquet folder. A new version only adds (each statement is idempotent, so a
-- history of an older version is brought up to date by running them all), and a reader refuses
-- a history of a newer version than its own.
CREATE TABLE IF NOT EXISTS history_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
    sample_id BIGINT PRIMARY KEY, collected_at TIMESTAMPTZ NOT NULL, database TEXT,
    server_version TEXT, server_started_at TIMESTAMPTZ, stats_reset TIMESTAMPTZ, xact_commit BIGINT,
    ef_search INTEGER, statements_available BOOLEAN, recall DOUBLE PRECISION, recall_low DOUBLE PRECISION,
    recall_high DOUBLE PRECISION, recall_queries BIGINT, recall_k INTEGER, recall_seed BIGINT,
    toolkit_version TEXT);
CREATE TABLE IF NOT EXISTS sample_tables (
    sample_id BIGINT NOT NULL, relid BIGINT, table_name TEXT NOT NULL, row_count BIGINT,
    table_bytes BIGINT, index_bytes BIGINT, seq_scan BIGINT, seq_tup_read BIGINT,
    idx_scan BIGINT, idx_tup_fetch BIGINT, n_tup_ins BIGINT, n_tup_upd BIGINT,
    n_tup_hot_upd BIGINT, n_tup_del BIGINT, n_live_tup BIGINT, n_dead_tup BIGINT);
CREATE TABLE IF NOT EXISTS sample_indexes (
    sample_id BIGINT NOT NULL, indexrelid BIGINT, table_name TEXT NOT NULL,
    index_name TEXT NOT NULL, method TEXT, is_unique BOOLEAN, index_bytes BIGINT, idx_scan BIGINT,
    idx_tup_read BIGINT, idx_tup_fetch BIGINT);
CREATE TABLE IF NOT EXISTS sample_robots (
    sample_id BIGINT NOT NULL, robot TEXT NOT NULL, memories BIGINT);
CREATE TABLE IF NOT EXISTS sample_statements (
    sample_id BIGINT NOT NULL, queryid TEXT NOT NULL, query TEXT, calls BIGINT,
    total_ms DOUBLE PRECISION, mean_ms DOUBLE PRECISION, rows BIGINT);
-- Version 2: recall on a sample of the query vectors the memory's own query log holds
-- (migration 011), NULL where the database has no log.
ALTER TABLE samples ADD COLUMN IF NOT EXISTS logged_queries BIGINT;
ALTER TABLE samples ADD COLUMN IF NOT EXISTS logged_recall DOUBLE PRECISION;
ALTER TABLE samples ADD COLUMN IF NOT EXISTS logged_recall_low DOUBLE PRECISION;
ALTER TABLE samples ADD COLUMN IF NOT EXISTS logged_recall_high DOUBLE PRECISION;
ALTER TABLE samples ADD COLUMN IF NOT EXISTS logged_recall_queries BIGINT;
-- Version 3: the HNSW index the sampled recall searched (idx_nodes_embedding_<d> where the
-- measured dimension has a native index, else idx_nodes_embedding), NULL where no recall was
-- measured.
ALTER TABLE samples ADD COLUMN IF NOT EXISTS recall_index TEXT;
-- Version 4: when pg_stat_statements started counting each statement (its stats_since, from
-- PostgreSQL 17), NULL where the server does not say.
ALTER TABLE sample_statements ADD COLUMN IF NOT EXISTS stats_since TIMESTAMPTZ;
-- Version 5: how many times pg_stat_statements had evicted its least-used entries, full at
-- pg_stat_statements.max (pg_stat_statements_info.dealloc, PostgreSQL 14 and later, since its
-- last reset), NULL where the server does not say.
ALTER TABLE samples ADD COLUMN IF NOT EXISTS statements_evicted BIGINT;
