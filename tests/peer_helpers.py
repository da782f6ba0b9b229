"""Shared checks of the peer-import tests: a fingerprint of everything the store holds."""

from __future__ import annotations

import psycopg

from htm_analytics import LongTermMemory

STORE_TABLES = ("robots", "nodes", "robot_nodes", "tags", "node_tags", "memory_events",
                "node_embedding_models", "import_records")


def store_fingerprint(conn: psycopg.Connection) -> dict[str, tuple[int, str]]:
    """Rows and an md5 of every row's text, per store table: equal means nothing changed."""
    result = {}
    for table in STORE_TABLES:
        row = conn.execute(
            f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
            f"FROM {table} t").fetchone()
        result[table] = (row[0], row[1])
    return result


def writes_so_far(conn: psycopg.Connection, store: LongTermMemory) -> int:
    """Rows inserted, updated or deleted in the store's tables, from pg_stat_user_tables.

    ``store`` must run on one connection (``pool_size=1``): its counters are flushed first,
    since a backend otherwise reports them up to ten seconds late.
    """
    store.index_statistics()  # flushes the store's backend (pg_stat_force_next_flush)
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute("""SELECT sum(n_tup_ins + n_tup_upd + n_tup_del)::bigint
                          FROM pg_stat_user_tables WHERE relname = ANY(%s)""",
                       (list(STORE_TABLES),)).fetchone()
    return int(row[0] or 0)


def source_fingerprint(conn: psycopg.Connection, tables: list[str]) -> dict[str, str]:
    """md5 of every row of each source table: equal before and after means never written."""
    return {table: conn.execute(
        f"SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
        f" FROM {table} t").fetchone()[0] for table in tables}


def unit_vectors(rng, n: int, dimension: int):
    """``n`` random unit vectors (float32)."""
    import numpy as np

    vectors = rng.standard_normal((n, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
