"""Shared checks of the peer-import tests: a fingerprint of everything the store holds."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import psycopg
from hypothesis import strategies as st

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


def ghostkg_logs(path: Path, logs: list[tuple]) -> None:
    """A GhostKG file (its own DDL) holding only ``logs``: (agent_name, content, timestamp)."""
    with sqlite3.connect(path) as conn:
        conn.executescript((Path(__file__).parent / "peer_schemas" / "ghostkg.sql").read_text())
        conn.executemany("INSERT INTO logs (agent_name, action_type, content, timestamp) "
                         "VALUES (?, 'WRITE', ?, ?)", logs)
    conn.close()


# What a writer may put in a GhostKG log (SQLite keeps any type in any column): agents that
# are no names, times that are no times or outside what the store holds.
_AGENTS = st.one_of(st.none(), st.text(max_size=300), st.integers(-2**63, 2**63 - 1),
                    st.floats())
_TIMES = st.one_of(st.none(), st.text(max_size=30),
                   st.datetimes(min_value=dt.datetime(1, 1, 2)).map(
                       lambda when: when.isoformat(sep=" ")),
                   st.datetimes(timezones=st.timezones()).map(dt.datetime.isoformat))
HOSTILE_LOGS = st.lists(st.tuples(_AGENTS, st.text(max_size=50), _TIMES), min_size=1,
                        max_size=8)
