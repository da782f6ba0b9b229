"""A server and a database as they are, before any schema: versions, what is available and
installed, who is connected. What ``status`` shows on an empty database, and what the error
messages of a database without pgvector or without the HTM tables are made of."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from ..errors import SchemaError
from ._errors import translate_database_error
from .connection import mask_url

__all__ = ["server_overview", "read_overview", "read_standby", "server_sessions",
           "missing_schema_error", "PGVECTOR_INSTALL_HINT"]

PGVECTOR_INSTALL_HINT = (
    "install pgvector on that server (https://github.com/pgvector/pgvector#installation; "
    "on Debian or Ubuntu: apt-get install postgresql-<major version>-pgvector), or leave "
    "out --db and HTM_DBURL to use the embedded server, which has it")

_OVERVIEW = """
SELECT current_setting('server_version') AS server_version,
       current_database() AS database,
       current_user AS role,
       (SELECT default_version FROM pg_available_extensions WHERE name = 'vector')
           AS pgvector_available,
       (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS pgvector_version,
       (SELECT default_version FROM pg_available_extensions WHERE name = 'pg_trgm')
           AS pg_trgm_available,
       (SELECT extversion FROM pg_extension WHERE extname = 'pg_trgm') AS pg_trgm_version,
       to_regclass('public.nodes') IS NOT NULL AS has_schema,
       CASE WHEN to_regclass('public.nodes') IS NOT NULL
            THEN has_table_privilege('public.nodes', 'SELECT') END AS can_read_nodes,
       pg_is_in_recovery() AS in_recovery
"""


def server_overview(url: str) -> dict[str, Any]:
    """What the server and the database of ``url`` have, whatever the schema.

    Returns
    -------
    dict
        ``server_version``, ``database``, ``role``, ``pgvector_available`` /
        ``pg_trgm_available`` (the version the server could install, None when it has none),
        ``pgvector_version`` / ``pg_trgm_version`` (installed in this database, or None),
        ``has_schema`` (the HTM ``nodes`` table exists), ``has_memory`` (it has a row; None
        when this role may not read it) and ``standby`` (None on a primary, else
        :func:`read_standby`'s mapping).
    """
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            return read_overview(conn)
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=url) from exc


def read_overview(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """:func:`server_overview` on an open connection."""
    with conn.cursor(row_factory=dict_row) as cursor:
        row = cursor.execute(_OVERVIEW).fetchone()
        assert row is not None
        overview = dict(row)
        readable = overview.pop("can_read_nodes")
        overview["standby"] = read_standby(conn) if overview.pop("in_recovery") else None
        overview["has_memory"] = False if not overview["has_schema"] else None
        if readable:
            found = cursor.execute("SELECT EXISTS (SELECT 1 FROM public.nodes) AS found")
            overview["has_memory"] = bool(found.fetchone()["found"])  # type: ignore[index]
    return overview


_STANDBY = """
SELECT pg_last_xact_replay_timestamp() AS last_replayed_at,
       -- caught up with all it received: no lag, however long ago the primary last wrote
       CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0::float8
            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8
       END AS replay_lag_seconds,
       pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint
           AS replay_lag_bytes,
       (SELECT status FROM pg_stat_wal_receiver) AS wal_receiver
"""


def read_standby(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What a hot standby has replayed, on a connection to one (in recovery).

    Returns
    -------
    dict
        ``last_replayed_at`` (commit time on the primary of the last transaction replayed,
        None before the first), ``replay_lag_seconds`` (0 when everything received is
        replayed, else the age of that last replayed transaction; None without streaming),
        ``replay_lag_bytes`` (WAL received but not yet replayed) and ``wal_receiver`` (the
        WAL receiver's status, ``"streaming"`` for a streaming replica, None without one).
    """
    with conn.cursor(row_factory=dict_row) as cursor:
        row = cursor.execute(_STANDBY).fetchone()
    assert row is not None
    return dict(row)


def missing_schema_error(overview: dict[str, Any], url: str) -> SchemaError | None:
    """The error that says what a database lacks for the store, and the command that fixes
    it; None when it has pgvector and the HTM tables."""
    where = mask_url(url)
    if overview["pgvector_available"] is None:
        return SchemaError(f"pgvector is not installed on the server of {where} (no 'vector' "
                           f"extension is available there); {PGVECTOR_INSTALL_HINT}")
    if not overview["has_schema"]:
        return SchemaError(
            f"the HTM schema is missing in {where} (pgvector "
            f"{overview['pgvector_available']} is available, no memory tables yet): run "
            "`htm-analytics init-db` with the same --db to create it, or open it with "
            "LongTermMemory(url, init_schema=True)")
    if overview["pgvector_version"] is None:
        return SchemaError(f"the HTM tables in {where} have no pgvector extension in that "
                           "database: run `htm-analytics init-db` with the same --db")
    return None


def server_sessions(url: str) -> list[dict[str, Any]]:
    """The client sessions connected to the server of ``url``: ``pid``, ``database``,
    ``user``, ``application``, ``client`` (address, or "local"), ``state``, ``since``."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10,
                             row_factory=dict_row) as conn:
            return conn.execute(
                """SELECT pid, datname AS database, usename AS user,
                          application_name AS application,
                          coalesce(host(client_addr), 'local') AS client, state,
                          backend_start AS since
                   FROM pg_stat_activity
                   WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
                   ORDER BY backend_start""").fetchall()
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=url) from exc
