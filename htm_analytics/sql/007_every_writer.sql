-- htm_analytics addition (the HTM tables keep their columns): the additions serve every
-- writer of the database, not only this toolkit.
--
-- 1. Trigger functions run with the rights of their owner (SECURITY DEFINER) and a fixed
--    search_path, so an application writing nodes under another role (the HTM gem) is not
--    refused by the toolkit's tables, and no object of that role's schemas can stand in for
--    the ones named here.
-- 2. Remembers and deletes reach the event log from the database itself: a trigger on
--    robot_nodes logs each new link and each increase of remember_count, and one on nodes logs
--    deletes (and soft deletes, where the schema has deleted_at). The log is then complete
--    whoever writes. A writer that logs remembers itself with better timestamps (bulk loads)
--    sets htm_analytics.events_written = 'on' for its transaction.
-- 3. Roles that may read or write the HTM tables now get the same rights on the additions.
--
-- docs/production.md lists what this installs and the SQL that removes it all.

ALTER FUNCTION public.htm_analytics_store_search_vector()
    SECURITY DEFINER SET search_path = pg_catalog, public;

CREATE OR REPLACE FUNCTION public.htm_analytics_log_remember() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    added integer;
BEGIN
    IF coalesce(current_setting('htm_analytics.events_written', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        -- the first remember at first_remembered_at, any others given at once at the last
        INSERT INTO public.memory_events (occurred_at, kind, robot_id, node_id)
        SELECT CASE WHEN g = 1 THEN coalesce(NEW.first_remembered_at, now())
                    ELSE coalesce(NEW.last_remembered_at, now()) END,
               'remember', NEW.robot_id, NEW.node_id
        FROM generate_series(1, greatest(NEW.remember_count, 1)) AS g;
    ELSE
        added := NEW.remember_count - OLD.remember_count;
        IF added > 0 THEN
            INSERT INTO public.memory_events (occurred_at, kind, robot_id, node_id)
            SELECT coalesce(NEW.last_remembered_at, now()), 'remember', NEW.robot_id,
                   NEW.node_id
            FROM generate_series(1, added);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION public.htm_analytics_log_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF coalesce(current_setting('htm_analytics.events_written', true), '') <> 'on' THEN
        INSERT INTO public.memory_events (kind, node_id) VALUES ('delete', OLD.id);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS htm_analytics_log_remember ON public.robot_nodes;
CREATE TRIGGER htm_analytics_log_remember
    AFTER INSERT OR UPDATE OF remember_count ON public.robot_nodes
    FOR EACH ROW EXECUTE FUNCTION public.htm_analytics_log_remember();

DROP TRIGGER IF EXISTS htm_analytics_log_delete ON public.nodes;
CREATE TRIGGER htm_analytics_log_delete
    AFTER DELETE ON public.nodes
    FOR EACH ROW EXECUTE FUNCTION public.htm_analytics_log_delete();

DO $$
DECLARE
    grantee record;
BEGIN
    -- The current gem soft-deletes: a memory leaving the live set is a delete too.
    IF EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'public.nodes'::regclass AND attname = 'deleted_at'
                 AND NOT attisdropped) THEN
        EXECUTE 'DROP TRIGGER IF EXISTS htm_analytics_log_soft_delete ON public.nodes';
        EXECUTE 'CREATE TRIGGER htm_analytics_log_soft_delete
                     AFTER UPDATE OF deleted_at ON public.nodes FOR EACH ROW
                     WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL)
                     EXECUTE FUNCTION public.htm_analytics_log_delete()';
    END IF;
    -- Whoever may read the memory may read the additions; whoever may write it may log
    -- accesses and record embedding models (the triggers need nothing from them).
    FOR grantee IN
        SELECT r.rolname,
               has_table_privilege(r.oid, 'public.nodes', 'INSERT') AS writes
        FROM pg_roles r
        WHERE NOT r.rolsuper AND r.rolname <> current_user AND r.rolname !~ '^pg_'
          AND has_table_privilege(r.oid, 'public.nodes', 'SELECT')
    LOOP
        EXECUTE format('GRANT SELECT ON public.memory_events, public.node_embedding_models, '
                       'public.node_search_vectors, public.htm_analytics_migrations TO %I',
                       grantee.rolname);
        IF grantee.writes THEN
            EXECUTE format('GRANT INSERT ON public.memory_events, public.node_embedding_models '
                           'TO %I', grantee.rolname);
        END IF;
    END LOOP;
END
$$;
