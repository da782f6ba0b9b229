"""The schema: migrations shipped in the package's ``sql/`` folder, applied once each."""

from __future__ import annotations

import importlib.resources
import re
from typing import Any

import psycopg

__all__ = ["SCHEMA_VERSION", "apply_migrations", "create_statement_statistics",
           "native_index_dimensions", "set_up_schema"]

_ADVISORY_LOCK_MIGRATIONS = 7_438_001  # arbitrary, constant: serialises concurrent init-db
_MIGRATION_FILE = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


def _migrations() -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` of every migration shipped in the package, in order."""
    found = []
    for entry in importlib.resources.files("htm_analytics").joinpath("sql").iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return sorted(found)


SCHEMA_VERSION = max(version for version, _, _ in _migrations())

_CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS public.htm_analytics_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP
)"""


def apply_migrations(conn: psycopg.Connection[Any]) -> list[int]:
    """Create the extensions and schema, applying each pending migration once.

    Runs in one transaction under an advisory lock, so concurrent callers are safe and a
    failed migration leaves nothing behind. The seed migration is itself idempotent
    (``IF NOT EXISTS`` throughout), so it also adopts a database that already has the HTM
    tables without changing them; on the current gem's tables (no ``in_working_memory``) it
    is recorded without running.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection not in a transaction.

    Returns
    -------
    list of int
        The versions applied now (empty when the schema was current).
    """
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_LOCK_MIGRATIONS,))
        conn.execute(_CREATE_MIGRATIONS_TABLE)
        done = {row[0] for row in conn.execute(
            "SELECT version FROM public.htm_analytics_migrations")}
        # The current gem's nodes has no in_working_memory, which the seed script indexes:
        # there the gem's own tables stand for the seed schema, adopted as they are.
        gem_tables = conn.execute(
            """SELECT to_regclass('public.nodes') IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('public.nodes')
                     AND attname = 'in_working_memory' AND NOT attisdropped)""").fetchone()
        for version, name, script in _migrations():
            if version in done:
                continue
            if not (version == 1 and gem_tables and gem_tables[0]):
                conn.execute(script.encode("utf-8"))  # bytes: a script without parameters
            conn.execute(
                "INSERT INTO public.htm_analytics_migrations (version, name) VALUES (%s, %s)",
                (version, name),
            )
            applied_now.append(version)
    return applied_now


def native_index_dimensions(conn: psycopg.Connection[Any]) -> list[int]:
    """Dimensions with a native HNSW index (``idx_nodes_embedding_<d>``) on ``nodes``."""
    rows = conn.execute("""SELECT indexname FROM pg_indexes
                           WHERE schemaname = 'public' AND tablename = 'nodes'
                             AND indexname ~ '^idx_nodes_embedding_[0-9]+$'""").fetchall()
    return sorted(int(r[0].rsplit("_", 1)[1]) for r in rows)


STATEMENTS_MARK = "created by htm-analytics init-db"


def create_statement_statistics(conn: psycopg.Connection[Any]) -> bool:
    """Create ``pg_stat_statements`` in this database where the server loads its library
    and this user may (a superuser's extension); True when it exists afterwards.

    Only ``init-db`` (``LongTermMemory(init_schema=True)``) and the toolkit's own scratch
    databases call it: reads never create anything.
    """
    with conn.transaction():
        # Under the migrations' lock: two init-db at once would both create it, and the
        # second fail on pg_extension's unique name.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_LOCK_MIGRATIONS,))
        row = conn.execute(
            """SELECT current_setting('shared_preload_libraries')
                          ~ '(^|[ ,])pg_stat_statements([ ,]|$)',
                      EXISTS (SELECT 1 FROM pg_available_extensions
                              WHERE name = 'pg_stat_statements'),
                      EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'),
                      (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)""").fetchone()
        assert row is not None
        loaded, available, exists, superuser = row
        if exists or not (loaded and available and superuser):
            return bool(exists)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        # The mark by which the documented removal (docs/production.md) drops only an
        # extension the toolkit created, never one another tool relies on.
        conn.execute(f"COMMENT ON EXTENSION pg_stat_statements IS '{STATEMENTS_MARK}'")
    return True


def set_up_schema(conn: psycopg.Connection[Any]) -> list[int]:
    """What ``init-db`` does: :func:`apply_migrations`, then
    :func:`create_statement_statistics` (slow statements recorded from now on)."""
    applied = apply_migrations(conn)
    create_statement_statistics(conn)
    return applied
