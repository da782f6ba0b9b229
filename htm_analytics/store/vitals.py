"""The reads behind ``htm-analytics collect``: one sample of the memory's vital signs.

Only reads: sizes, the cumulative statistics counters with what tells a reset from growth
(the server's start and the database's ``stats_reset``), the search depth new sessions get,
and the top statements where ``pg_stat_statements`` is loaded and created here.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._sql import read_sql
from ..validation import validate_positive_int
from ._base import StoreBase

__all__ = ["VitalsMixin"]


class VitalsMixin(StoreBase):
    """Server facts, relation counters and top statements for one history sample."""

    def server_vitals(self) -> dict[str, Any]:
        """When, where and since when: ``collected_at``, ``database``, ``server_version``,
        ``server_started_at`` (``pg_postmaster_start_time()``), ``stats_reset`` (None when
        never reset), ``ef_search`` (the setting new sessions get), ``statements_available``
        (pg_stat_statements loaded and created in this database) and ``statements_evicted``
        (how many times it evicted entries since its last reset; None before its version
        1.9, PostgreSQL 14)."""
        vitals = dict(self._fetch(read_sql("history", "server.sql"))[0])
        counted = vitals.pop("evictions_counted")
        vitals["statements_evicted"] = self._fetch(read_sql(
            "history", "statements_evicted.sql"))[0]["statements_evicted"] if counted else None
        return vitals

    def relation_vitals(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Sizes and cumulative counters of every table and index of the memory's schema
        (``pg_stat_user_tables``, ``pg_stat_user_indexes``), this process's pending counters
        flushed first; each row carries its relation's oid, which tells a table dropped and
        made again from one that grew."""
        if self._server_version_num >= 150000:
            self._fetch("SELECT pg_stat_force_next_flush()")
        tables = self.fetch_frame(read_sql("history", "tables.sql"))
        indexes = self.fetch_frame(read_sql("history", "indexes.sql"))
        return tables, indexes

    def top_statements(self, limit: int = 20) -> pd.DataFrame:
        """The ``limit`` statements of this database with the most execution time, from
        ``pg_stat_statements`` (cumulative): ``queryid``, ``query``, ``calls``, ``total_ms``,
        ``mean_ms``, ``rows``, and ``stats_since`` (when the entry started counting; NULL
        before pg_stat_statements 1.11). Call it only where ``statements_available``."""
        limit = validate_positive_int(limit, field="limit")
        return self.fetch_frame(read_sql("history", "statements.sql"), {"limit": limit})
