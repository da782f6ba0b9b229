-- htm_analytics addition (the HTM tables keep their columns): the event log records the three
-- ways a memory leaves and comes back, whoever writes them (the current gem's forget, restore
-- and purge_deleted, or this toolkit's).
--
-- - forget (soft: deleted_at set) stays a 'delete' event (migration 007's trigger);
-- - restore (deleted_at cleared) is a 'restore' event (a new trigger, where the schema
--   soft-deletes);
-- - a permanent delete of a memory already soft-deleted (purge) is a 'purge' event, not a
--   second 'delete': the memory left once. A permanent delete of a live memory stays 'delete'.
--
-- SECURITY DEFINER with a fixed search_path, as every trigger function of the toolkit
-- (migration 007): a writer needs no right on memory_events. docs/production.md lists what this
-- installs and the SQL that removes it.

ALTER TABLE public.memory_events DROP CONSTRAINT IF EXISTS memory_events_kind_check;
ALTER TABLE public.memory_events ADD CONSTRAINT memory_events_kind_check
    CHECK (kind IN ('remember', 'retrieve', 'recall', 'evict', 'delete', 'restore', 'purge'));

CREATE OR REPLACE FUNCTION public.htm_analytics_log_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF coalesce(current_setting('htm_analytics.events_written', true), '') <> 'on' THEN
        -- to_jsonb: the seed-era nodes has no deleted_at, and the function serves both eras
        INSERT INTO public.memory_events (kind, node_id)
        VALUES (CASE WHEN TG_OP = 'DELETE' AND to_jsonb(OLD) ->> 'deleted_at' IS NOT NULL
                     THEN 'purge' ELSE 'delete' END, OLD.id);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION public.htm_analytics_log_restore() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF coalesce(current_setting('htm_analytics.events_written', true), '') <> 'on' THEN
        INSERT INTO public.memory_events (kind, node_id) VALUES ('restore', NEW.id);
    END IF;
    RETURN NULL;
END
$$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'public.nodes'::regclass AND attname = 'deleted_at'
                 AND NOT attisdropped) THEN
        EXECUTE 'DROP TRIGGER IF EXISTS htm_analytics_log_restore ON public.nodes';
        EXECUTE 'CREATE TRIGGER htm_analytics_log_restore
                     AFTER UPDATE OF deleted_at ON public.nodes FOR EACH ROW
                     WHEN (OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL)
                     EXECUTE FUNCTION public.htm_analytics_log_restore()';
    END IF;
END
$$;
