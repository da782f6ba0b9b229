-- htm_analytics addition (does not change the seed tables): what an import from another
-- memory system (GhostKG, Arandu, the Self-Engineering Agent Framework) brought in, one row
-- per source row. The source row is kept whole as JSONB, so columns the HTM tables have no
-- place for (FSRS state, validity intervals, tool outputs...) are not lost, and its key makes
-- a second import of the same source skip what is already here. node_id, robot_id and
-- event_id point at what the row became (NULL when it became none of them) and, like
-- memory_events, carry no foreign keys: the record outlives a deleted node.

CREATE TABLE IF NOT EXISTS public.import_records (
    source_system text NOT NULL,
    source_table text NOT NULL,
    source_key text NOT NULL,
    robot_id bigint,
    node_id bigint,
    event_id bigint,
    record jsonb NOT NULL,
    imported_at timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (source_system, source_table, source_key)
);

CREATE INDEX IF NOT EXISTS idx_import_records_node_id
    ON public.import_records USING btree (node_id);
