-- The current HTM gem's schema (0.0.32) as its nine Sequel migrations really create it
-- (HTM::Database.setup): the same tables and indexes as gem_0032_schema.sql (from the gem's
-- db/schema.sql), but every timestamp column `timestamp without time zone` (Sequel's
-- DateTime), into which the gem writes the local time of its process. A test fixture: the
-- toolkit never creates this schema itself.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE schema_migrations (version varchar PRIMARY KEY);

CREATE TABLE robots (
    id bigserial PRIMARY KEY,
    name text,
    created_at timestamp DEFAULT CURRENT_TIMESTAMP,
    last_active timestamp DEFAULT CURRENT_TIMESTAMP
);

CREATE TABLE file_sources (
    id bigserial PRIMARY KEY,
    file_path text NOT NULL,
    file_hash varchar(64),
    mtime timestamp,
    file_size integer,
    frontmatter jsonb DEFAULT '{}'::jsonb,
    last_synced_at timestamp,
    created_at timestamp DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamp DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX idx_file_sources_path_unique ON file_sources (file_path);
CREATE INDEX idx_file_sources_hash ON file_sources (file_hash);
CREATE INDEX idx_file_sources_last_synced ON file_sources (last_synced_at);

CREATE TABLE nodes (
    id bigserial PRIMARY KEY,
    content text NOT NULL,
    access_count integer NOT NULL DEFAULT 0,
    created_at timestamp DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamp DEFAULT CURRENT_TIMESTAMP,
    last_accessed timestamp DEFAULT CURRENT_TIMESTAMP,
    token_count integer,
    embedding vector(2000),
    embedding_dimension integer,
    content_hash varchar(64),
    deleted_at timestamp,
    source_id bigint REFERENCES file_sources(id) ON DELETE SET NULL,
    chunk_position integer,
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT check_embedding_dimension CHECK (embedding_dimension IS NULL
        OR (embedding_dimension > 0 AND embedding_dimension <= 2000))
);
CREATE UNIQUE INDEX idx_nodes_content_hash_unique ON nodes (content_hash);
CREATE INDEX idx_nodes_created_at ON nodes (created_at);
CREATE INDEX idx_nodes_updated_at ON nodes (updated_at);
CREATE INDEX idx_nodes_last_accessed ON nodes (last_accessed);
CREATE INDEX idx_nodes_access_count ON nodes (access_count);
CREATE INDEX idx_nodes_deleted_at ON nodes (deleted_at);
CREATE INDEX idx_nodes_source_id ON nodes (source_id);
CREATE INDEX idx_nodes_source_chunk_position ON nodes (source_id, chunk_position);
CREATE INDEX idx_nodes_not_deleted_created_at ON nodes (created_at) WHERE deleted_at IS NULL;
CREATE INDEX idx_nodes_active ON nodes (id) WHERE deleted_at IS NULL;
CREATE INDEX idx_nodes_active_with_embedding ON nodes (id)
    WHERE deleted_at IS NULL AND embedding IS NOT NULL;
CREATE INDEX idx_nodes_metadata ON nodes USING gin (metadata);
CREATE INDEX idx_nodes_embedding ON nodes USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);
CREATE INDEX idx_nodes_content_gin ON nodes USING gin (to_tsvector('english', content));
CREATE INDEX idx_nodes_content_trgm ON nodes USING gin (content gin_trgm_ops);

CREATE TABLE tags (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    created_at timestamp DEFAULT CURRENT_TIMESTAMP,
    deleted_at timestamp
);
CREATE UNIQUE INDEX idx_tags_name_unique ON tags (name);
CREATE INDEX idx_tags_name_pattern ON tags (name text_pattern_ops);
CREATE INDEX idx_tags_name_trgm ON tags USING gin (name gin_trgm_ops);
CREATE INDEX idx_tags_deleted_at ON tags (deleted_at);

CREATE TABLE node_tags (
    id bigserial PRIMARY KEY,
    node_id bigint NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    tag_id bigint NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
    created_at timestamp DEFAULT CURRENT_TIMESTAMP,
    deleted_at timestamp
);
CREATE UNIQUE INDEX idx_node_tags_unique ON node_tags (node_id, tag_id);
CREATE INDEX idx_node_tags_node_id ON node_tags (node_id);
CREATE INDEX idx_node_tags_tag_id ON node_tags (tag_id);
CREATE INDEX idx_node_tags_deleted_at ON node_tags (deleted_at);

CREATE TABLE robot_nodes (
    id bigserial PRIMARY KEY,
    robot_id bigint NOT NULL REFERENCES robots(id) ON DELETE CASCADE,
    node_id bigint NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    first_remembered_at timestamp DEFAULT CURRENT_TIMESTAMP,
    last_remembered_at timestamp DEFAULT CURRENT_TIMESTAMP,
    remember_count integer NOT NULL DEFAULT 1,
    working_memory boolean NOT NULL DEFAULT false,
    created_at timestamp DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamp DEFAULT CURRENT_TIMESTAMP,
    deleted_at timestamp
);
CREATE UNIQUE INDEX idx_robot_nodes_unique ON robot_nodes (robot_id, node_id);
CREATE INDEX idx_robot_nodes_robot_id ON robot_nodes (robot_id);
CREATE INDEX idx_robot_nodes_node_id ON robot_nodes (node_id);
CREATE INDEX idx_robot_nodes_last_remembered_at ON robot_nodes (last_remembered_at);
CREATE INDEX idx_robot_nodes_deleted_at ON robot_nodes (deleted_at);
CREATE INDEX idx_robot_nodes_working_memory ON robot_nodes (robot_id, working_memory)
    WHERE working_memory = true;

CREATE TABLE node_relationships (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    source_id bigint NOT NULL,
    target_id bigint NOT NULL,
    rel_type text NOT NULL DEFAULT 'related_to',
    origin text NOT NULL DEFAULT 'tag_cooccurrence',
    weight double precision NOT NULL DEFAULT 1.0,
    created_at timestamp DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamp DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT fk_node_relationships_source FOREIGN KEY (source_id)
        REFERENCES nodes(id) ON DELETE CASCADE,
    CONSTRAINT fk_node_relationships_target FOREIGN KEY (target_id)
        REFERENCES nodes(id) ON DELETE CASCADE,
    CONSTRAINT chk_node_relationships_no_self_loop CHECK (source_id <> target_id),
    CONSTRAINT chk_node_relationships_weight CHECK (weight BETWEEN 0.0 AND 1.0)
);
CREATE UNIQUE INDEX idx_node_relationships_unique
    ON node_relationships (source_id, target_id, rel_type);
