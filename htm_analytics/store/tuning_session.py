"""Tuning experiments on one pooled connection: timed searches under chosen HNSW settings,
exact ground truth, and index builds on a copy of the vectors."""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import psycopg
from psycopg import pq, sql

from ..errors import DatabaseError, ValidationError
from ..validation import MAX_EMBEDDING_DIMENSION, validate_tag, validate_timeframe
from ._base import StoreBase
from ._common import create_index, lift_statement_timeout
from ._vectors import distance_sql, vector_index_name
from .vector_stream import copy_ids, copy_vector_batches

__all__ = ["TuningSession", "filter_conditions"]


class TuningSession:
    """Vector searches under chosen HNSW settings, timed; index builds on a copy.

    Made by :meth:`LongTermMemory.tuning_session`. A *target* is ``"live"`` (the nodes table and
    the index its searches use), ``"padded"`` (the nodes table through the reference schema's
    padded 2000-d index even when a native one exists) or ``"copy"`` (an unlogged copy of the
    vectors at their own dimension, made by :meth:`copy_vectors`, for index-build
    experiments).
    """

    def __init__(self, conn: psycopg.Connection[Any], store: StoreBase) -> None:
        self._conn = conn
        self._store = store
        self._copy: str | None = None
        self._copy_index: str | None = None

    def _live(self) -> list[sql.Composable]:
        """The condition leaving out soft-deleted memories (current gem schema), if any."""
        return [sql.SQL("n.deleted_at IS NULL")] if self._store.schema_info.soft_deletes else []

    # The statement that a search of each target runs; filters only apply to "live".
    def _knn_statement(self, target: str, dimension: int, k: int,
                       filters: Mapping[str, Any] | None
                       ) -> tuple[sql.Composed, str, dict[str, Any]]:
        # target "live" searches as the store does; "padded" the reference schema's index
        # even when a native one exists; "copy" the experiment table.
        if target == "copy":
            if self._copy is None:
                raise ValidationError("call copy_vectors() first", field="target")
            if filters:
                raise ValidationError("filters apply to the live target only", field="filters")
            return sql.SQL("SELECT v.id FROM {} v ORDER BY v.embedding <=> %(q)s LIMIT {}").format(
                sql.Identifier(self._copy), sql.Literal(k)), self._copy_index or "", {}
        native = self._native(target, dimension)
        distance, _ = distance_sql(native)
        index = vector_index_name(native)
        conditions, params = filter_conditions(filters)
        conditions.insert(0, self._has_dimension(dimension))
        conditions += self._live()
        statement = sql.SQL("SELECT n.id FROM nodes n WHERE {} ORDER BY {} LIMIT {}").format(
            sql.SQL(" AND ").join(conditions), distance, sql.Literal(k))
        return statement, index, params

    def _native(self, target: str, dimension: int) -> int | None:
        """``dimension`` when the target searches it through its native index, else None."""
        native = target == "live" and dimension in self._store.native_dimensions
        return dimension if native else None

    def live_index(self, dimension: int) -> str:
        """The index a search of the ``"live"`` target walks for vectors of ``dimension``:
        its native index (``idx_nodes_embedding_<d>``) where there is one, else the padded
        ``idx_nodes_embedding`` (the name :meth:`knn` reports as ``index``)."""
        return vector_index_name(self._native("live", dimension))

    def _query_parameter(self, target: str, vector: np.ndarray, dimension: int) -> np.ndarray:
        if target == "copy" or self._native(target, dimension) is not None:
            return np.ascontiguousarray(vector[:dimension], dtype=np.float32)
        padded = np.zeros(MAX_EMBEDDING_DIMENSION, dtype=np.float32)
        padded[:dimension] = vector[:dimension]
        return padded

    def _dimension(self, alias: str) -> sql.Composable:
        """A row's vector dimension: derived from the vector where the writer leaves
        ``embedding_dimension`` NULL (the current gem), as the store's reads and native
        indexes do."""
        return sql.SQL(self._store.schema_info.dimension_sql(alias))

    def _has_dimension(self, dimension: int) -> sql.Composable:
        return sql.SQL("{} = {}").format(self._dimension("n"), sql.Literal(dimension))

    def vector_dimensions(self) -> dict[int, int]:
        """Stored embeddings per dimension: ``{dimension: rows}``."""
        dimension = self._dimension("n")
        rows = self._conn.execute(sql.SQL(
            "SELECT {d}, count(*) FROM nodes n WHERE {d} IS NOT NULL{live} GROUP BY 1").format(
                d=dimension,
                live=sql.SQL("").join(sql.SQL(" AND ") + c for c in self._live()))).fetchall()
        self._conn.commit()
        return {int(d): int(n) for d, n in rows}

    def _vectors_query(self, dimension: int, target: str, filters: Mapping[str, Any] | None,
                       vectors_too: bool = True, ids: np.ndarray | None = None
                       ) -> tuple[sql.Composed, dict[str, Any]]:
        copy = target == "copy"
        conditions: list[sql.Composable] = [sql.SQL("true")]
        params: dict[str, Any] = {}
        if not copy:
            conditions, params = filter_conditions(filters)
            conditions.insert(0, self._has_dimension(dimension))
            conditions += self._live()
        if ids is not None:
            conditions.append(sql.SQL("n.id = ANY(%(ids)s)"))
            params["ids"] = ids.tolist()
        vector = sql.SQL(", n.embedding" if copy else ", subvector(n.embedding, 1, {d})").format(
            d=sql.Literal(dimension))
        return sql.SQL("SELECT n.id::bigint AS id{} FROM {} n WHERE {} ORDER BY n.id").format(
            sql.SQL("") if vectors_too is False else vector,
            sql.Identifier(self._copy or "") if copy else sql.Identifier("nodes"),
            sql.SQL(" AND ").join(conditions)), params

    def stored_ids(self, dimension: int, *, target: str = "live",
                   filters: Mapping[str, Any] | None = None) -> np.ndarray:
        """The int64 ids of the target's vectors (as :meth:`stored_vectors`), ordered."""
        query, params = self._vectors_query(dimension, target, filters, vectors_too=False)
        with self._conn.transaction(), self._conn.cursor() as cur:
            return copy_ids(cur, query, params)

    def vector_batches(self, dimension: int, *, target: str = "live",
                       filters: Mapping[str, Any] | None = None, ids: np.ndarray | None = None,
                       batch: int = 20_000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(ids, vectors)`` of the target in batches of ``batch`` rows ordered by id (only
        ``ids`` when given): pages of binary COPY in one snapshot
        (:mod:`~htm_analytics.store.vector_stream`), so memory stays one batch whatever the
        table's size."""
        query, params = self._vectors_query(dimension, target, filters, ids=ids)
        fresh = self._conn.info.transaction_status == pq.TransactionStatus.IDLE
        with self._conn.transaction(), self._conn.cursor() as cur:
            if fresh:  # the pages, one picture
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield from copy_vector_batches(cur, query, params, dimension, batch)

    def stored_vectors(self, dimension: int, *, target: str = "live",
                       filters: Mapping[str, Any] | None = None,
                       ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, vectors)``: int64 ids and float32 ``(n, dimension)`` vectors of the target
        (live: rows of that dimension matching ``filters``; only ``ids`` when given), ordered
        by id. All of them in memory: :meth:`vector_batches` streams them instead."""
        parts = list(self.vector_batches(dimension, target=target, filters=filters, ids=ids))
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float32)
        return np.concatenate([p[0] for p in parts]), np.vstack([p[1] for p in parts])

    def knn(self, queries: np.ndarray, *, dimension: int, k: int, ef_search: int,
            iterative_scan: str | None = None, filters: Mapping[str, Any] | None = None,
            target: str = "live", exact: bool = False, force_index: bool = False,
            repeats: int = 1, progress: Any = None) -> dict[str, Any]:
        """Run every query ``repeats`` times under one setting, in one transaction.

        Settings are applied with ``SET LOCAL`` and read back with ``SHOW``. ``exact`` turns
        index scans off instead, for a ground truth computed by PostgreSQL itself.
        ``force_index`` turns sorting off, so that the planner cannot answer a filtered query
        by sorting the matching rows exactly and must walk the HNSW index.

        Returns
        -------
        dict
            ``ids`` (list of int64 arrays, the last repeat's results), ``seconds`` (float64
            array ``(repeats, n)``), ``settings`` (what ``SHOW`` reported), ``index`` (the
            index name the target should use) and ``used_index`` (whether EXPLAIN of the first
            query shows that index).
        """
        statement, index, filter_params = self._knn_statement(target, dimension, k, filters)
        settings = {"hnsw.ef_search": str(ef_search),
                    "hnsw.iterative_scan": iterative_scan or "off",
                    "enable_seqscan": "on" if exact else "off",
                    "enable_indexscan": "off" if exact else "on",
                    "enable_sort": "off" if force_index else "on",
                    "enable_incremental_sort": "off" if force_index else "on",
                    # Plan every execution under these settings: a cached generic plan from
                    # an earlier setting would ignore them.
                    "plan_cache_mode": "force_custom_plan"}
        if not self._store.supports_iterative_scan:
            if iterative_scan:
                raise ValidationError("needs pgvector 0.8 or later", field="iterative_scan")
            settings.pop("hnsw.iterative_scan")
        parameters = [self._query_parameter(target, q, dimension) for q in queries]
        seconds = np.zeros((repeats, len(parameters)), dtype=np.float64)
        found: list[np.ndarray] = []
        with self._conn.transaction(), self._conn.cursor() as cur:
            if exact:
                lift_statement_timeout(cur)
            for name, value in settings.items():
                cur.execute("SELECT set_config(%s, %s, true)", (name, value))
            shown = {name: cur.execute(sql.SQL("SHOW {}").format(sql.Identifier(name)))
                     .fetchone()[0] for name in settings}  # type: ignore[index]
            if shown != settings:
                raise DatabaseError(f"settings did not apply: asked {settings}, got {shown}")
            used_index = False
            if parameters:
                plan = cur.execute(sql.SQL("EXPLAIN (FORMAT JSON) {}").format(statement),
                                   {"q": parameters[0], **filter_params}).fetchone()[0]  # type: ignore[index]
                used_index = index in _plan_index_names(plan)
            for repeat in range(repeats):
                found = []
                for i, parameter in enumerate(parameters):
                    started = time.perf_counter()
                    cur.execute(statement, {"q": parameter, **filter_params}, prepare=True)
                    rows = cur.fetchall()
                    seconds[repeat, i] = time.perf_counter() - started
                    found.append(np.fromiter((r[0] for r in rows), dtype=np.int64,
                                             count=len(rows)))
                    if progress is not None:
                        progress(1)
        return {"ids": found, "seconds": seconds, "settings": shown, "index": index,
                "used_index": used_index}

    def copy_vectors(self, dimension: int) -> int:
        """Copy the vectors of one dimension into an unlogged table for index experiments.

        An unlogged table, not a temporary one, so that PostgreSQL can build its indexes with
        parallel workers as it would on the live table. Dropped when the session ends.
        Returns the number of rows copied.
        """
        self._drop_copy()
        name = f"htm_analytics_bench_{os.getpid()}_{secrets.token_hex(3)}"
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.execute(sql.SQL(
                "CREATE UNLOGGED TABLE {name} AS SELECT id, "
                "subvector(embedding, 1, {d})::vector({d}) AS embedding FROM nodes "
                "WHERE {dimension} = {d}").format(
                name=sql.Identifier(name), d=sql.Literal(dimension),
                dimension=self._dimension("")))
            rows = cur.rowcount
            cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
        self._copy = name
        return rows

    def build_copy_index(self, *, m: int, ef_construction: int) -> dict[str, Any]:
        """Build an HNSW index on the copy (replacing the previous one); time and size it."""
        if self._copy is None:
            raise ValidationError("call copy_vectors() first", field="target")
        self._drop_copy_index()
        name = f"{self._copy}_m{m}_efc{ef_construction}"
        with self._conn.transaction(), self._conn.cursor() as cur:
            lift_statement_timeout(cur)
            started = time.perf_counter()
            create_index(cur, sql.SQL(
                "CREATE INDEX {name} ON {table} USING hnsw (embedding vector_cosine_ops) "
                "WITH (m = {m}, ef_construction = {efc})").format(
                name=sql.Identifier(name), table=sql.Identifier(self._copy),
                m=sql.Literal(m), efc=sql.Literal(ef_construction)))
            build_seconds = time.perf_counter() - started
            size = cur.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()
        self._copy_index = name
        return {"index": name, "build_seconds": build_seconds,
                "index_bytes": int(size[0]) if size else 0}

    def setting(self, name: str) -> str:
        """The current value of a server setting (e.g. ``maintenance_work_mem``)."""
        row = self._conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
        self._conn.commit()
        return str(row[0]) if row else ""

    def index_parameters(self, index: str) -> dict[str, int]:
        """``m`` and ``ef_construction`` of an HNSW index (pgvector's defaults if unset)."""
        row = self._conn.execute(
            "SELECT c.reloptions FROM pg_class c WHERE c.relname = %s", (index,)).fetchone()
        self._conn.commit()
        options = dict(o.split("=", 1) for o in (row[0] or [])) if row else {}
        return {"m": int(options.get("m", 16)),
                "ef_construction": int(options.get("ef_construction", 64))}

    def _drop_copy_index(self) -> None:
        if self._copy_index:
            with self._conn.transaction():
                self._conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(
                    sql.Identifier(self._copy_index)))
            self._copy_index = None

    def _drop_copy(self) -> None:
        if self._copy is None:
            return
        status = self._conn.info.transaction_status
        if self._conn.closed or status in (pq.TransactionStatus.ACTIVE,
                                           pq.TransactionStatus.UNKNOWN):
            self._drop_copy_elsewhere(self._copy)
            return
        if status != pq.TransactionStatus.IDLE:
            self._conn.rollback()  # an interrupted experiment
        self._drop_copy_index()
        with self._conn.transaction():
            self._conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
                sql.Identifier(self._copy)))
        self._copy = None

    def _drop_copy_elsewhere(self, copy: str) -> None:
        """Drop the copy through another connection when this one was interrupted in the
        middle of a statement (a signal between sending it and reading its result) and can
        no longer talk: its statement is cancelled and the connection closed, which rolls
        back its transaction and releases the copy's locks."""
        if not self._conn.closed:
            with contextlib.suppress(psycopg.Error):  # then the drop waits lock_timeout
                self._conn.cancel_safe(timeout=5.0)
            self._conn.close()
        # a connection of its own: the pool may have no other
        with psycopg.connect(self._store._url, connect_timeout=10,
                             cursor_factory=self._store._cursor_classes[0]) as other:
            # bounded: a build the server has not stopped yet still holds the table
            other.execute("SELECT set_config('lock_timeout', '10s', true)")
            other.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(copy)))
        self._copy = self._copy_index = None


def filter_conditions(filters: Mapping[str, Any] | None
                       ) -> tuple[list[sql.Composable], dict[str, Any]]:
    """Conditions on ``nodes n`` for benchmark filters (tag, robot, timeframe), with their
    bound parameters."""
    conditions: list[sql.Composable] = []
    params: dict[str, Any] = {}
    for name, value in (filters or {}).items():
        if name == "tag":
            params["filter_tag"] = validate_tag(value, field="filters")
            conditions.append(sql.SQL(
                "EXISTS (SELECT 1 FROM node_tags nt JOIN tags t ON t.id = nt.tag_id "
                "WHERE nt.node_id = n.id AND t.name = %(filter_tag)s)"))
        elif name == "robot":
            if not isinstance(value, str) or not value:
                raise ValidationError("the robot filter must be a robot name", field="filters")
            params["filter_robot"] = value
            conditions.append(sql.SQL(
                "EXISTS (SELECT 1 FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id "
                "WHERE rn.node_id = n.id AND r.name = %(filter_robot)s)"))
        elif name == "timeframe":
            frame = validate_timeframe(value, field="filters")
            if frame is not None:
                params["filter_start"], params["filter_end"] = frame
                conditions.append(sql.SQL(
                    "n.created_at BETWEEN %(filter_start)s AND %(filter_end)s"))
        else:
            raise ValidationError(f"unknown filter {name!r}: use tag, robot or timeframe",
                                  field="filters")
    return conditions, params


def _plan_index_names(plan: Any) -> set[str]:
    """Every index an EXPLAIN (FORMAT JSON) plan scans."""
    names: set[str] = set()
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "Index Name" in node:
                names.add(node["Index Name"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names
