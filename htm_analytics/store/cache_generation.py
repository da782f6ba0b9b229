"""The database's cache generation (migration 006), read with every cached search.

Migration 006 adds ``htm_analytics_cache_generation`` and statement triggers on ``nodes``,
``node_tags`` and ``tags`` that count every write able to change a search result, by any
process or application. A store labels each cached result with that count, read in the
same round trip before the search ran, and serves it again only while the count is the
same: a delete committed anywhere makes the next search miss. Databases without the
addition (an older schema, or one installed without ``htm-analytics init-db``) fall back to
this process's own generation.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

__all__ = ["GENERATION_COLUMN", "GENERATION_TABLE", "SHARED_GENERATION", "has_shared_generation",
           "with_generation_column"]

GENERATION_TABLE = "public.htm_analytics_cache_generation"

_WRITES = f"SELECT coalesce(sum(writes), 0)::bigint FROM {GENERATION_TABLE}"
SHARED_GENERATION = f"SELECT ({_WRITES}) AS g"
"""The number of result-changing writes committed so far, as this statement sees them."""

GENERATION_COLUMN = "htm_analytics_cache_generation"


def with_generation_column(statement: str | sql.Composable) -> sql.Composed:
    """``statement`` (a search) with the generation its snapshot sees as one more column.

    The search stays a subquery with its own ``ORDER BY ... LIMIT`` (so it is planned as
    before and never flattened); the outer query passes its rows through in their order and
    adds the generation, an init plan evaluated once.
    """
    inner = statement if isinstance(statement, sql.Composable) else sql.SQL(statement)
    return sql.SQL("SELECT s.*, ({generation}) AS {column} FROM ({inner}) AS s").format(
        generation=sql.SQL(_WRITES),
        column=sql.Identifier(GENERATION_COLUMN), inner=inner)


def has_shared_generation(conn: psycopg.Connection[Any]) -> bool:
    """Whether the counter exists and this role may read it (``conn`` in autocommit)."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL AND "
                       "has_table_privilege(to_regclass(%s), 'SELECT')",
                       (GENERATION_TABLE, GENERATION_TABLE)).fetchone()
    return bool(row and row[0])
