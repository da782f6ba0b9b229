"""The database's cache generation (migration 006), read before every cached search.

Migration 006 adds ``htm_analytics_cache_generation`` and statement triggers on ``nodes``,
``node_tags`` and ``tags`` that count every write able to change a search result, by any
process or application. A store keys its cached results by that count, so a delete committed
anywhere makes the next search miss. Databases without the addition (an older schema, or one
installed without ``htm-analytics init-db``) fall back to this process's own generation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import DatabaseError

__all__ = ["GENERATION_TABLE", "has_shared_generation", "read_shared_generation"]

GENERATION_TABLE = "public.htm_analytics_cache_generation"

Fetch = Callable[..., list[dict[str, Any]]]


def has_shared_generation(fetch: Fetch) -> bool:
    """Whether the counter exists and this role may read it."""
    try:
        rows = fetch("SELECT to_regclass(%s) IS NOT NULL AND "
                     "has_table_privilege(to_regclass(%s), 'SELECT') AS readable",
                     (GENERATION_TABLE, GENERATION_TABLE))
    except DatabaseError:
        return False
    return bool(rows and rows[0]["readable"])


def read_shared_generation(fetch: Fetch) -> int:
    """The number of result-changing writes committed so far, as this statement sees them."""
    rows = fetch(f"SELECT coalesce(sum(writes), 0)::bigint AS g FROM {GENERATION_TABLE}")
    return int(rows[0]["g"])
