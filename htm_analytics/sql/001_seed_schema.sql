-- HTM schema exactly as reference document 000 defines it: robots, nodes, robot_nodes, tags,
-- node_tags, with every column, default, constraint, foreign key and index.
-- Every statement is idempotent: applying this file twice changes nothing.

CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;

-- robots ---------------------------------------------------------------------------------
CREATE SEQUENCE IF NOT EXISTS public.robots_id_seq;
CREATE TABLE IF NOT EXISTS public.robots (
    id bigint NOT NULL DEFAULT nextval('public.robots_id_seq'::regclass),
    name text,
    created_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    last_active timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    metadata jsonb,
    CONSTRAINT robots_pkey PRIMARY KEY (id)
);
ALTER SEQUENCE public.robots_id_seq OWNED BY public.robots.id;

-- nodes ----------------------------------------------------------------------------------
CREATE SEQUENCE IF NOT EXISTS public.nodes_id_seq;
CREATE TABLE IF NOT EXISTS public.nodes (
    id bigint NOT NULL DEFAULT nextval('public.nodes_id_seq'::regclass),
    content text NOT NULL,
    access_count integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    last_accessed timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    token_count integer,
    in_working_memory boolean DEFAULT false,
    embedding public.vector(2000),
    embedding_dimension integer,
    content_hash character varying(64),
    CONSTRAINT nodes_pkey PRIMARY KEY (id),
    CONSTRAINT check_embedding_dimension CHECK (((embedding_dimension IS NULL) OR ((embedding_dimension > 0) AND (embedding_dimension <= 2000))))
);
ALTER SEQUENCE public.nodes_id_seq OWNED BY public.nodes.id;

CREATE UNIQUE INDEX IF NOT EXISTS idx_nodes_content_hash_unique ON public.nodes USING btree (content_hash);
CREATE INDEX IF NOT EXISTS idx_nodes_access_count ON public.nodes USING btree (access_count);
CREATE INDEX IF NOT EXISTS idx_nodes_created_at ON public.nodes USING btree (created_at);
CREATE INDEX IF NOT EXISTS idx_nodes_updated_at ON public.nodes USING btree (updated_at);
CREATE INDEX IF NOT EXISTS idx_nodes_last_accessed ON public.nodes USING btree (last_accessed);
CREATE INDEX IF NOT EXISTS idx_nodes_in_working_memory ON public.nodes USING btree (in_working_memory);
CREATE INDEX IF NOT EXISTS idx_nodes_embedding ON public.nodes USING hnsw (embedding public.vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX IF NOT EXISTS idx_nodes_content_gin ON public.nodes USING gin (to_tsvector('english'::regconfig, content));
CREATE INDEX IF NOT EXISTS idx_nodes_content_trgm ON public.nodes USING gin (content public.gin_trgm_ops);

-- robot_nodes ----------------------------------------------------------------------------
CREATE SEQUENCE IF NOT EXISTS public.robot_nodes_id_seq;
CREATE TABLE IF NOT EXISTS public.robot_nodes (
    id bigint NOT NULL DEFAULT nextval('public.robot_nodes_id_seq'::regclass),
    robot_id bigint NOT NULL,
    node_id bigint NOT NULL,
    first_remembered_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    last_remembered_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    remember_count integer DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT robot_nodes_pkey PRIMARY KEY (id),
    CONSTRAINT fk_rails_9b003078a8 FOREIGN KEY (robot_id) REFERENCES public.robots(id) ON DELETE CASCADE,
    CONSTRAINT fk_rails_f2fc98d49e FOREIGN KEY (node_id) REFERENCES public.nodes(id) ON DELETE CASCADE
);
ALTER SEQUENCE public.robot_nodes_id_seq OWNED BY public.robot_nodes.id;

CREATE UNIQUE INDEX IF NOT EXISTS idx_robot_nodes_unique ON public.robot_nodes USING btree (robot_id, node_id);
CREATE INDEX IF NOT EXISTS idx_robot_nodes_robot_id ON public.robot_nodes USING btree (robot_id);
CREATE INDEX IF NOT EXISTS idx_robot_nodes_node_id ON public.robot_nodes USING btree (node_id);
CREATE INDEX IF NOT EXISTS idx_robot_nodes_last_remembered_at ON public.robot_nodes USING btree (last_remembered_at);

-- tags -----------------------------------------------------------------------------------
CREATE SEQUENCE IF NOT EXISTS public.tags_id_seq;
CREATE TABLE IF NOT EXISTS public.tags (
    id bigint NOT NULL DEFAULT nextval('public.tags_id_seq'::regclass),
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT tags_pkey PRIMARY KEY (id)
);
ALTER SEQUENCE public.tags_id_seq OWNED BY public.tags.id;

CREATE UNIQUE INDEX IF NOT EXISTS idx_tags_name_unique ON public.tags USING btree (name);
CREATE INDEX IF NOT EXISTS idx_tags_name_pattern ON public.tags USING btree (name text_pattern_ops);

-- node_tags ------------------------------------------------------------------------------
CREATE SEQUENCE IF NOT EXISTS public.node_tags_id_seq;
CREATE TABLE IF NOT EXISTS public.node_tags (
    id bigint NOT NULL DEFAULT nextval('public.node_tags_id_seq'::regclass),
    node_id bigint NOT NULL,
    tag_id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT node_tags_pkey PRIMARY KEY (id),
    CONSTRAINT fk_rails_b51cdcc57f FOREIGN KEY (tag_id) REFERENCES public.tags(id) ON DELETE CASCADE,
    CONSTRAINT fk_rails_ebc9aafd9f FOREIGN KEY (node_id) REFERENCES public.nodes(id) ON DELETE CASCADE
);
ALTER SEQUENCE public.node_tags_id_seq OWNED BY public.node_tags.id;

CREATE UNIQUE INDEX IF NOT EXISTS idx_node_tags_unique ON public.node_tags USING btree (node_id, tag_id);
CREATE INDEX IF NOT EXISTS idx_node_tags_node_id ON public.node_tags USING btree (node_id);
CREATE INDEX IF NOT EXISTS idx_node_tags_tag_id ON public.node_tags USING btree (tag_id);
