"""Imports from other memory systems: source rows kept whole, and their events, once each."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ._base import StoreBase
from ._common import lift_statement_timeout

__all__ = ["ImportsMixin"]


class ImportsMixin(StoreBase):
    """``import_records`` and read-only access for the importers of
    :mod:`htm_analytics.peers` (see :class:`~htm_analytics.LongTermMemory`)."""


    def imported_keys(self, source_system: str, source_table: str,
                      keys: Sequence[str]) -> dict[str, int | None]:
        """Which of ``keys`` an earlier import already recorded, with the node each became.

        Returns
        -------
        dict
            ``{source_key: node_id or None}`` for the keys found in ``import_records``.
        """
        rows = self._fetch("""SELECT source_key, node_id FROM import_records
                              WHERE source_system = %s AND source_table = %s
                                AND source_key = ANY(%s::text[])""",
                           (source_system, source_table, list(keys)))
        return {r["source_key"]: (None if r["node_id"] is None else int(r["node_id"]))
                for r in rows}

    def record_imports(self, source_system: str, source_table: str,
                       records: Sequence[Mapping[str, Any]]) -> int:
        """Keep imported source rows whole in ``import_records``; log their events.

        Each record has ``key`` (str), ``record`` (JSON-able mapping) and optionally
        ``robot_id``, ``node_id`` and ``event`` (``(occurred_at, kind)``: a row of
        ``memory_events`` for that robot and node, written in the same transaction). Keys
        already recorded are left alone, so recording twice changes nothing. Returns the
        number of new records.
        """
        if not records:
            return 0
        with self._transaction() as cur:
            lift_statement_timeout(cur)
            cur.execute("""CREATE TEMP TABLE htm_import_staging (
                               source_key text, robot_id bigint, node_id bigint,
                               occurred_at timestamptz, kind text, record jsonb)
                           ON COMMIT DROP""")
            with cur.copy("COPY htm_import_staging FROM STDIN") as copy:
                for item in records:
                    occurred_at, kind = item.get("event") or (None, None)
                    copy.write_row((item["key"], item.get("robot_id"), item.get("node_id"),
                                    occurred_at, kind, Jsonb(dict(item["record"]))))
            cur.execute("""
                WITH fresh AS MATERIALIZED (
                    SELECT DISTINCT ON (s.source_key) s.*,
                           CASE WHEN s.kind IS NOT NULL THEN nextval(pg_get_serial_sequence(
                               'public.memory_events', 'id')) END AS event_id
                    FROM htm_import_staging s
                    WHERE NOT EXISTS (SELECT 1 FROM import_records r
                                      WHERE r.source_system = %(system)s
                                        AND r.source_table = %(table)s
                                        AND r.source_key = s.source_key)
                    ORDER BY s.source_key),
                events AS (
                    INSERT INTO memory_events (id, occurred_at, kind, robot_id, node_id)
                    SELECT event_id, coalesce(occurred_at, CURRENT_TIMESTAMP), kind, robot_id,
                           node_id
                    FROM fresh WHERE kind IS NOT NULL)
                INSERT INTO import_records (source_system, source_table, source_key,
                                            robot_id, node_id, event_id, record)
                SELECT %(system)s, %(table)s, source_key, robot_id, node_id, event_id, record
                FROM fresh
                ON CONFLICT (source_system, source_table, source_key) DO NOTHING""",
                        {"system": source_system, "table": source_table})
            inserted = cur.rowcount
        self._cache.clear()
        return int(inserted)

    def robot_ids(self, names: Sequence[str]) -> dict[str, int]:
        """``{name: id}`` of the robots among ``names`` that exist (the oldest of a name)."""
        rows = self._fetch("""SELECT name, min(id) AS id FROM robots
                              WHERE name = ANY(%s::text[]) GROUP BY name""", (list(names),))
        return {r["name"]: int(r["id"]) for r in rows}

    @contextmanager
    def read_only_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one read-only transaction, for analyses of other
        tables in the store's database (driver errors come out as :class:`HTMError`)."""
        self._check_open()
        with self._translated_errors(), self._pool.connection() as conn:
            conn.execute("SET TRANSACTION READ ONLY")
            yield conn
            conn.rollback()
