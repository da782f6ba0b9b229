-- The memory tables as a snapshot keeps them (DuckDB). Embeddings at their own dimension,
-- stored uncompressed: DuckDB's float compression saves 4% of a million MiniLM vectors' file
-- and costs an eighth of the export's time for the nodes.
CREATE TABLE robots (id BIGINT, name VARCHAR, created_at TIMESTAMPTZ, last_active TIMESTAMPTZ,
                     metadata VARCHAR);
CREATE TABLE nodes (id BIGINT, content VARCHAR, content_hash VARCHAR, access_count INTEGER,
                    created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ, last_accessed TIMESTAMPTZ,
                    token_count INTEGER, in_working_memory BOOLEAN, embedding_dimension INTEGER,
                    embedding FLOAT[] USING COMPRESSION uncompressed,
                    metadata VARCHAR);
CREATE TABLE robot_nodes (id BIGINT, robot_id BIGINT, node_id BIGINT,
                          first_remembered_at TIMESTAMPTZ, last_remembered_at TIMESTAMPTZ,
                          remember_count INTEGER, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ);
CREATE TABLE tags (id BIGINT, name VARCHAR, created_at TIMESTAMPTZ);
CREATE TABLE node_tags (id BIGINT, node_id BIGINT, tag_id BIGINT, created_at TIMESTAMPTZ);
CREATE TABLE memory_events (id BIGINT, occurred_at TIMESTAMPTZ, kind VARCHAR, robot_id BIGINT,
                            node_id BIGINT);
CREATE TABLE snapshot_info (exported_at TIMESTAMPTZ, source VARCHAR, schema_version INTEGER,
                            postgresql VARCHAR, pgvector VARCHAR);
