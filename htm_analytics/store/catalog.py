"""What the memory holds and how the server treats it: statistics, counts, index and table
activity, and streaming a table out for snapshots."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from psycopg import sql

from ..errors import ValidationError
from ..frames import load_analytics_query, node_id_pages
from ..validation import validate_list, validate_positive_int
from ._base import StoreBase
from .display import MemoryStats
from .packed_rows import packed_pages
from .schema_info import TOOLKIT_ADDITIONS
from .vector_stream import decode_vectors, fetch_bigint_columns, one_snapshot, raw_vectors

__all__ = ["CatalogMixin", "MEMORY_TABLES"]

MEMORY_TABLES = ("robots", "nodes", "robot_nodes", "tags", "node_tags", "memory_events")
# Index usage and table health also cover the tables that serve searches.
# The tables whose usage and size the index and table listings show: the memory's, the
# toolkit's additions and its bookkeeping (as collect and advise see them).
_STATISTICS_TABLES = tuple(dict.fromkeys((*MEMORY_TABLES, *TOOLKIT_ADDITIONS,
                                          "htm_analytics_migrations",
                                          "htm_analytics_cache_generation")))

# What a snapshot keeps of each table (htm_analytics.store.snapshot creates the matching tables).
_EXPORT_COLUMNS = {
    "robots": "id, name, created_at, last_active, {metadata} AS metadata",
    "nodes": """id, content, content_hash, access_count, created_at, updated_at, last_accessed,
                token_count, in_working_memory, embedding_dimension,
                CASE WHEN embedding_dimension IS NOT NULL
                     THEN subvector(embedding, 1, embedding_dimension) END AS embedding,
                {metadata} AS metadata""",
    "robot_nodes": """id, robot_id, node_id, first_remembered_at, last_remembered_at,
                      remember_count, created_at, updated_at""",
    "tags": "id, name, created_at",
    "node_tags": "id, node_id, tag_id, created_at",
    "memory_events": "id, occurred_at, kind, robot_id, node_id",
}
# The tables of fixed-width columns only, read packed (see packed_rows): the links, most of a
# large memory's rows.
_PACKED_TABLES = {
    "robot_nodes": {"id": "bigint", "robot_id": "bigint", "node_id": "bigint",
                    "first_remembered_at": "timestamptz", "last_remembered_at": "timestamptz",
                    "remember_count": "integer", "created_at": "timestamptz",
                    "updated_at": "timestamptz"},
    "node_tags": {"id": "bigint", "node_id": "bigint", "tag_id": "bigint",
                  "created_at": "timestamptz"},
}


_TABLE_STATISTICS = {
    "table": "string", **dict.fromkeys(
        ["n_live_tup", "n_dead_tup", "seq_scan", "idx_scan", "n_tup_ins", "n_tup_upd",
         "n_tup_hot_upd", "n_tup_del", "total_bytes"], "int64"),
    **dict.fromkeys(["last_vacuum", "last_autovacuum", "last_analyze", "last_autoanalyze"],
                    "datetime64[us, UTC]")}

class CatalogMixin(StoreBase):
    """Statistics and exports (see :class:`~htm_analytics.LongTermMemory`)."""

    def analytics_pages(self, name: str, params: Mapping[str, Any],
                        columns: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        """Run ``sql/analytics/<name>.sql`` over one range of node ids at a time: see
        :meth:`htm_analytics.frames.MemorySource.analytics_pages`. Each page is one statement
        (``query_timeout`` applies to a page), all in one repeatable-read snapshot."""
        query = sql.SQL(self._read(load_analytics_query(name)))
        with self._transaction() as cur:
            one_snapshot(cur)
            bounds = cur.execute(self._read(load_analytics_query("node_id_range"))).fetchone()
            assert bounds is not None
            for page_from, page_to in node_id_pages(bounds["low"], bounds["high"],
                                                    bounds["nodes"]):
                yield fetch_bigint_columns(cur, query, {**params, "page_from": page_from,
                                                    "page_to": page_to}, columns)

    def stats(self) -> MemoryStats:
        """Memory statistics, with the keys of the reference API.

        Returns
        -------
        dict
            ``total_nodes``, ``nodes_by_robot`` ({robot_id: nodes}), ``total_tags``,
            ``oldest_memory``, ``newest_memory``, ``active_robots`` (robots registered),
            (live rows only: soft-deleted ones are counted in ``soft_deleted_nodes``, present
            only where the schema soft-deletes),
            ``robot_activity`` ([{id, name, last_active}]), ``database_size`` (bytes), and
            ``cache`` ({hits, misses, hit_rate, size}) only when the cache is enabled.
        """
        with self._transaction() as cur:
            totals = cur.execute(self._read("""
                SELECT (SELECT count(*) FROM nodes) AS total_nodes,
                       (SELECT count(*) FROM tags) AS total_tags,
                       (SELECT min(created_at) FROM nodes) AS oldest_memory,
                       (SELECT max(created_at) FROM nodes) AS newest_memory,
                       (SELECT count(*) FROM robots) AS active_robots,
                       pg_database_size(current_database()) AS database_size""")).fetchone()
            by_robot = cur.execute(self._read("""SELECT robot_id, count(*) AS n FROM robot_nodes
                                      GROUP BY robot_id ORDER BY robot_id""")).fetchall()
            activity = cur.execute("""SELECT id, name, last_active FROM robots
                                      ORDER BY last_active DESC NULLS LAST, id""").fetchall()
        assert totals is not None
        result: dict[str, Any] = {
            "total_nodes": totals["total_nodes"],
            "nodes_by_robot": {r["robot_id"]: r["n"] for r in by_robot},
            "total_tags": totals["total_tags"],
            "oldest_memory": totals["oldest_memory"],
            "newest_memory": totals["newest_memory"],
            "active_robots": totals["active_robots"],
            "robot_activity": activity,
            "database_size": totals["database_size"],
        }
        if self.schema_info.soft_deletes:
            result["soft_deleted_nodes"] = int(self._soft_deleted()["nodes"])
        if self._cache.enabled:
            result["cache"] = self._cache.stats()
        return MemoryStats(result)

    def _soft_deleted(self) -> dict[str, int]:
        """Soft-deleted rows per table (the current gem's ``deleted_at``), live ones left out."""
        tables = [t for t in ("robot_nodes", "nodes", "tags", "node_tags")
                  if self.schema_info.has_column(t, "deleted_at")]
        if not tables:
            return {}
        query = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT {name} AS table, count(*) AS rows FROM public.{table} "
                    "WHERE deleted_at IS NOT NULL").format(
                name=sql.Literal(t), table=sql.Identifier(t)) for t in tables)
        with self._transaction() as cur:  # the real tables: no live-rows prefix here
            return {r["table"]: int(r["rows"]) for r in cur.execute(query).fetchall()}

    def table_counts(self) -> pd.DataFrame:
        """Rows in each table of the memory schema.

        Returns
        -------
        pandas.DataFrame
            ``table`` (str) and ``rows`` (int64), one row per table, in schema order: live
            rows; where the schema soft-deletes (``deleted_at``), rows such as
            ``"nodes (soft-deleted)"`` follow with the deleted ones. ``memory_events`` counts 0
            where the toolkit's additions are not installed.
        """
        counts = self._fetch("""
            SELECT 'robots' AS table, count(*) AS rows, 1 AS position FROM robots
            UNION ALL SELECT 'nodes', count(*), 2 FROM nodes
            UNION ALL SELECT 'robot_nodes', count(*), 3 FROM robot_nodes
            UNION ALL SELECT 'tags', count(*), 4 FROM tags
            UNION ALL SELECT 'node_tags', count(*), 5 FROM node_tags
            UNION ALL SELECT 'memory_events', count(*), 6 FROM memory_events
            ORDER BY position""")
        counts += [{"table": f"{table} (soft-deleted)", "rows": rows}
                   for table, rows in self._soft_deleted().items()]
        return pd.DataFrame(counts, columns=["table", "rows"]).astype(
            {"table": "string", "rows": "int64"})

    def index_list(self) -> pd.DataFrame:
        """Indexes of the memory tables and the toolkit's own, with sizes and definitions.

        Returns
        -------
        pandas.DataFrame
            ``table`` (str), ``index`` (str), ``method`` (str: btree, gin, hnsw...),
            ``is_unique`` (bool), ``size_bytes`` (int64), ``definition`` (str), ordered by
            table and index.
        """
        return self._index_frame()[["table", "index", "method", "is_unique", "size_bytes",
                                    "definition"]].astype(
            {"table": "string", "index": "string", "method": "string", "is_unique": "bool",
             "size_bytes": "int64", "definition": "string"})

    def index_statistics(self) -> pd.DataFrame:
        """Cumulative usage counters of the indexes of :meth:`index_list`, with sizes.

        Flushes this process's pending statistics first (``pg_stat_force_next_flush``,
        PostgreSQL 15+) and reads a fresh snapshot; other connections flush on their own within
        about a second. See :func:`htm_analytics.index_usage` for the columns.
        """
        self._flush_statistics()
        return self._index_frame()

    def _index_frame(self) -> pd.DataFrame:
        return self.fetch_frame(
            # last_idx_scan exists from PostgreSQL 16; through jsonb it is NULL before.
            """SELECT s.relname AS table, s.indexrelname AS index, am.amname AS method,
                      x.indisunique AS is_unique, x.indisprimary AS is_primary,
                      s.idx_scan, s.idx_tup_read, s.idx_tup_fetch,
                      (to_jsonb(s) ->> 'last_idx_scan')::timestamptz AS last_idx_scan,
                      pg_relation_size(s.indexrelid) AS size_bytes,
                      pg_get_indexdef(s.indexrelid) AS definition
               FROM pg_stat_user_indexes s
               JOIN pg_index x ON x.indexrelid = s.indexrelid
               JOIN pg_class i ON i.oid = s.indexrelid
               JOIN pg_am am ON am.oid = i.relam
               WHERE s.schemaname = 'public' AND s.relname = ANY(%s::text[])
               ORDER BY s.relname, s.indexrelname""",
            (list(_STATISTICS_TABLES),))

    def table_statistics(self) -> pd.DataFrame:
        """Per-table activity counters; see :func:`htm_analytics.table_health`.

        Columns: ``table`` (string); ``n_live_tup``, ``n_dead_tup``, ``seq_scan``,
        ``idx_scan``, ``n_tup_ins``, ``n_tup_upd``, ``n_tup_hot_upd``, ``n_tup_del`` and
        ``total_bytes`` (int64); ``last_vacuum``, ``last_autovacuum``, ``last_analyze`` and
        ``last_autoanalyze`` (datetime64[us, UTC], NaT when never: typed alike on a fresh
        database, where every one is NULL).
        """
        self._flush_statistics()
        return self.fetch_frame(
            """SELECT relname AS table, n_live_tup, n_dead_tup, seq_scan,
                      coalesce(idx_scan, 0) AS idx_scan, n_tup_ins, n_tup_upd, n_tup_hot_upd,
                      n_tup_del, last_vacuum, last_autovacuum, last_analyze, last_autoanalyze,
                      pg_total_relation_size(relid) AS total_bytes
               FROM pg_stat_user_tables
               WHERE schemaname = 'public' AND relname = ANY(%s::text[])
               ORDER BY relname""", (list(_STATISTICS_TABLES),), dtypes=_TABLE_STATISTICS)

    def _flush_statistics(self) -> None:
        if self._server_version_num >= 150000:
            # Flushes when this transaction ends; the read that follows runs in a new
            # transaction, so it takes a fresh statistics snapshot.
            self._fetch("SELECT pg_stat_force_next_flush()")

    def iter_table_chunks(self, table: str, *, chunk_rows: int = 20_000) -> Iterator[pd.DataFrame]:
        """Yield a memory table's rows as DataFrames of at most ``chunk_rows`` rows, by id.

        Embeddings come back at their own dimension (the zero padding removed) as float32
        arrays; ``robots.metadata`` and ``nodes.metadata`` as JSON text (NULL where the schema has
        no such column); soft-deleted rows left out. All chunks are read in one transaction, so
        together they are one consistent picture of the table.
        """
        if not isinstance(table, str) or table not in _EXPORT_COLUMNS:
            raise ValidationError(f"must be one of {', '.join(MEMORY_TABLES)}, got "
                                  f"{table!r:.40}", field="table")
        for _, frame in self.iter_tables_chunks([table], chunk_rows=chunk_rows):
            yield frame

    def iter_tables_chunks(self, tables: Sequence[str] = MEMORY_TABLES, *,
                           chunk_rows: int = 20_000) -> Iterator[tuple[str, pd.DataFrame]]:
        """Yield ``(table, chunk)`` for each of ``tables`` in turn, as
        :meth:`iter_table_chunks` does for one, all read from one snapshot of the database
        (REPEATABLE READ): a memory remembered meanwhile is in none of them, so no link
        points to a memory the copy lacks."""
        tables = validate_list(tables, field="tables")
        unknown = [table for table in tables
                   if not isinstance(table, str) or table not in _EXPORT_COLUMNS]
        if unknown or not tables:
            raise ValidationError(f"must be among {', '.join(MEMORY_TABLES)}", field="tables")
        chunk_rows = validate_positive_int(chunk_rows, field="chunk_rows")
        with self._transaction() as cur:
            one_snapshot(cur)
            for table in tables:
                if table in _PACKED_TABLES:
                    yield from ((table, chunk) for chunk in self._packed_chunks(
                        cur, table, chunk_rows))
                    continue
                metadata = sql.SQL("metadata::text"
                                   if self.schema_info.has_column(table, "metadata")
                                   else "NULL::text")
                query = sql.SQL("SELECT {} FROM {} ORDER BY id").format(
                    sql.SQL(_EXPORT_COLUMNS[table]).format(metadata=metadata),
                    sql.Identifier(table))
                # A named cursor streams from the server instead of loading the table.
                with cur.connection.cursor(name=f"export_{table}", binary=True) as stream:
                    raw_vectors(stream)
                    stream.execute(self._read(query))
                    columns = [c.name for c in stream.description or []]
                    while rows := stream.fetchmany(chunk_rows):
                        frame = pd.DataFrame(rows, columns=columns)
                        if "embedding" in frame:
                            frame["embedding"] = pd.Series(
                                decode_vectors(frame["embedding"].tolist()),
                                index=frame.index, dtype=object)
                        yield table, frame

    def _packed_chunks(self, cur: Any, table: str, chunk_rows: int) -> Iterator[pd.DataFrame]:
        """``table`` (of :data:`_PACKED_TABLES`) read packed, in chunks of ``chunk_rows``."""
        columns = _PACKED_TABLES[table]
        query = self._read(sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(table)))
        relation = sql.SQL("({})").format(query if isinstance(query, sql.Composable)
                                          else sql.SQL(query))
        for page in packed_pages(cur, relation, columns):
            for start in range(0, len(page), chunk_rows):
                yield page.iloc[start:start + chunk_rows].reset_index(drop=True)
