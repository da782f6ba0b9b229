"""Native-dimension HNSW indexes, and the connection that tuning experiments run on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from ..errors import (
    ValidationError,
)
from ..validation import MAX_EMBEDDING_DIMENSION, validate_memory_size, validate_positive_int
from ._base import StoreBase
from ._common import create_index, lift_statement_timeout
from ._vectors import vector_index_name
from .schema_info import derived_dimension_sql
from .tuning_session import TuningSession

__all__ = ["IndexingMixin", "hnsw_graph_bytes", "raise_build_memory"]

# An index build raises maintenance_work_mem by itself up to this many kB, for its HNSW graph.
AUTO_BUILD_MEMORY_KB = 1024 * 1024


def hnsw_graph_bytes(dimensions: int, m: int = 16, value_bytes: int = 4) -> int:
    """Bytes one vector takes in an HNSW graph while pgvector builds it in
    ``maintenance_work_mem``: the value (``value_bytes`` per dimension: 4 for ``vector``, 2
    for ``halfvec``, plus 8) and about 80 bytes per unit of ``m`` for the element and its
    neighbour lists as allocated. It errs on the large side: at m = 16 a 64MB graph held
    7,247 padded 2000-dimension vectors in a parallel build (9.3 kB each; this gives 9.3 kB),
    7,681 in a serial one and 29,794 native 384-dimension ones (2.3 kB; this gives 2.8 kB).
    The part of a graph past that memory is built on disk, about three times slower."""
    return value_bytes * dimensions + 8 + 80 * m


def raise_build_memory(cur: psycopg.Cursor[dict[str, Any]], graph_bytes: int,
                       build_memory_kb: int | None = None) -> None:
    """Give this transaction's index builds ``build_memory_kb`` of ``maintenance_work_mem``,
    or by default what an HNSW graph of ``graph_bytes`` needs, up to
    :data:`AUTO_BUILD_MEMORY_KB`, when the server's setting is lower: pgvector builds the
    part of a graph past that memory on disk, about three times slower."""
    if build_memory_kb is None:
        # a tenth more, and 16MB for small graphs (a parallel build keeps 1MB spare)
        needed = min(int(graph_bytes * 1.1) // 1024 + 16 * 1024, AUTO_BUILD_MEMORY_KB)
        current = cur.execute("SELECT setting::bigint AS kb FROM pg_settings "
                              "WHERE name = 'maintenance_work_mem'").fetchone()
        build_memory_kb = needed if current is None or needed > current["kb"] else None
    if build_memory_kb is not None:
        cur.execute("SELECT set_config('maintenance_work_mem', %s, true)",
                    (f"{build_memory_kb}kB",))


def _build_options(dimension: Any, m: Any, ef_construction: Any) -> tuple[int, int, int]:
    """A native index's dimension and HNSW options, checked as pgvector would check them."""
    dimension = validate_positive_int(dimension, field="dimension",
                                      maximum=MAX_EMBEDDING_DIMENSION)
    m = validate_positive_int(m, field="m", maximum=100)
    ef_construction = validate_positive_int(ef_construction, field="ef_construction",
                                            maximum=1000)
    if ef_construction < 2 * m:
        raise ValidationError(f"must be at least 2 * m = {2 * m}", field="ef_construction")
    return dimension, m, ef_construction


def _native_index_sql(dimension: int, m: int, ef_construction: int, name: str, *,
                      derived: bool, concurrently: bool = False) -> sql.Composed:
    # Where the writer leaves embedding_dimension NULL (the current gem), the predicate is the
    # dimension as reads derive it, the same expression, so that the planner matches them.
    has_dimension = derived_dimension_sql() if derived else "embedding_dimension"
    return sql.SQL(
        "CREATE INDEX {concurrently}IF NOT EXISTS {name} ON {nodes} USING hnsw "
        "((subvector(embedding, 1, {d})::vector({d})) vector_cosine_ops) "
        "WITH (m = {m}, ef_construction = {efc}) WHERE {has_dimension} = {d}").format(
        concurrently=sql.SQL("CONCURRENTLY " if concurrently else ""),
        nodes=sql.Identifier("public", "nodes"),
        name=sql.Identifier(name), d=sql.Literal(dimension), m=sql.Literal(m),
        efc=sql.Literal(ef_construction), has_dimension=sql.SQL(has_dimension))



class IndexingMixin(StoreBase):
    """:meth:`create_native_index` and :meth:`tuning_session` (see
    :class:`~htm_analytics.LongTermMemory`)."""

    def create_native_index(self, dimension: int, *, m: int = 16, ef_construction: int = 64,
                            maintenance_work_mem: str | None = None) -> str:
        """Build an HNSW index over the vectors of one model at their own dimension.

        The reference schema stores every vector zero-padded to 2000 dimensions, which makes
        its HNSW index 2-5x slower to build and query than one at a model's native size. This
        adds a partial expression index ``idx_nodes_embedding_<d>`` on
        ``subvector(embedding, 1, d)::vector(d)`` for rows with ``embedding_dimension = d``
        (where the writer leaves that column NULL, as the current gem does, for rows whose
        vector's last non-zero component is the d-th).
        The seed tables and index are untouched; :meth:`search` and RRF hybrid search use the
        native index automatically for query vectors of that dimension. ``query_timeout``
        does not apply to the build, only to a wait for another session's lock.

        ``maintenance_work_mem`` (``"3GB"``) is the build's memory, for this transaction
        only. By default the build raises the server's setting to what the HNSW graph needs
        (about 2.3 kB per 384-dimension vector at m = 16), up to 1GB: pgvector builds the
        part of a larger graph on disk, several times slower. Give more past about 400,000
        vectors of 384 dimensions, if the server has it.

        Returns
        -------
        str
            The index name.
        """
        dimension, m, ef_construction = _build_options(dimension, m, ef_construction)
        build_memory = None if maintenance_work_mem is None else validate_memory_size(
            maintenance_work_mem, field="maintenance_work_mem")
        name = vector_index_name(dimension)
        with self._transaction() as cur:
            lift_statement_timeout(cur)
            rows = cur.execute("SELECT greatest(reltuples, 0)::bigint AS n FROM pg_class "
                               "WHERE oid = 'public.nodes'::regclass").fetchone()
            raise_build_memory(cur, hnsw_graph_bytes(dimension, m) * (rows["n"] if rows else 0),
                               build_memory)
            create_index(cur, _native_index_sql(
                dimension, m, ef_construction, name,
                derived=self.schema_info.derives_dimensions))
        self._native_index_added(dimension)
        self._cache.clear()
        return name

    def native_index_statement(self, dimension: int, *, m: int = 16,
                               ef_construction: int = 64) -> str:
        """The ``CREATE INDEX CONCURRENTLY`` that builds the index of
        :meth:`create_native_index` outside a transaction, for a user to review and run
        (without blocking writers for the build). Nothing is run.

        Returns
        -------
        str
            The statement, with the predicate this database's reads match (the dimension
            derived from the vector where the writer leaves ``embedding_dimension`` NULL).
        """
        dimension, m, ef_construction = _build_options(dimension, m, ef_construction)
        return _native_index_sql(dimension, m, ef_construction, vector_index_name(dimension),
                                 derived=self.schema_info.derives_dimensions,
                                 concurrently=True).as_string(None)

    @contextmanager
    def tuning_session(self) -> Iterator[TuningSession]:
        """One pooled connection for recall and index-build experiments.

        Everything a :class:`TuningSession` changes is per transaction (``SET LOCAL``) or
        dropped when the session ends, so the connection goes back to the pool as it came.
        """
        self._check_open()
        with self._translated_errors(), self._pool.connection() as conn:
            session = TuningSession(conn, self)
            try:
                yield session
            finally:
                session._drop_copy()
