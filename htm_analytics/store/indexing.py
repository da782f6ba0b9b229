"""Native-dimension HNSW indexes, and the connection that tuning experiments run on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from psycopg import sql

from ..errors import (
    ValidationError,
)
from ..validation import MAX_EMBEDDING_DIMENSION, validate_positive_int
from ._base import StoreBase
from ._common import create_index, lift_statement_timeout
from .schema_info import derived_dimension_sql
from .tuning_session import TuningSession

__all__ = ["IndexingMixin", "hnsw_graph_bytes"]


def hnsw_graph_bytes(dimensions: int, m: int = 16, value_bytes: int = 4) -> int:
    """Bytes one vector takes in an HNSW graph while pgvector builds it in
    ``maintenance_work_mem``: the value (``value_bytes`` per dimension: 4 for ``vector``, 2
    for ``halfvec``, plus 8) and about 80 bytes per unit of ``m`` for the element and its
    neighbour lists as allocated. It errs on the large side: at m = 16 a 64MB graph held
    7,247 padded 2000-dimension vectors in a parallel build (9.3 kB each; this gives 9.3 kB),
    7,681 in a serial one and 29,794 native 384-dimension ones (2.3 kB; this gives 2.8 kB).
    The part of a graph past that memory is built on disk, about three times slower."""
    return value_bytes * dimensions + 8 + 80 * m


def _native_index_sql(dimension: int, m: int, ef_construction: int, name: str, *,
                      derived: bool) -> sql.Composed:
    # Where the writer leaves embedding_dimension NULL (the current gem), the predicate is the
    # dimension as reads derive it, the same expression, so that the planner matches them.
    has_dimension = derived_dimension_sql() if derived else "embedding_dimension"
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON nodes USING hnsw "
        "((subvector(embedding, 1, {d})::vector({d})) vector_cosine_ops) "
        "WITH (m = {m}, ef_construction = {efc}) WHERE {has_dimension} = {d}").format(
        name=sql.Identifier(name), d=sql.Literal(dimension), m=sql.Literal(m),
        efc=sql.Literal(ef_construction), has_dimension=sql.SQL(has_dimension))



class IndexingMixin(StoreBase):
    """:meth:`create_native_index` and :meth:`tuning_session` (see
    :class:`~htm_analytics.LongTermMemory`)."""

    def create_native_index(self, dimension: int, *, m: int = 16,
                            ef_construction: int = 64) -> str:
        """Build an HNSW index over the vectors of one model at their own dimension.

        The reference schema stores every vector zero-padded to 2000 dimensions, which makes
        its HNSW index 2-5x slower to build and query than one at a model's native size. This
        adds a partial expression index ``idx_nodes_embedding_<d>`` on
        ``subvector(embedding, 1, d)::vector(d)`` for rows with ``embedding_dimension = d``
        (where the writer leaves that column NULL, as the current gem does, for rows whose
        vector's last non-zero component is the d-th).
        The seed tables and index are untouched; :meth:`search` and RRF hybrid search use the
        native index automatically for query vectors of that dimension. ``query_timeout``
        does not apply to the build.

        Returns
        -------
        str
            The index name.
        """
        dimension = validate_positive_int(dimension, field="dimension",
                                          maximum=MAX_EMBEDDING_DIMENSION)
        m = validate_positive_int(m, field="m", maximum=100)
        ef_construction = validate_positive_int(ef_construction, field="ef_construction",
                                                maximum=1000)
        if ef_construction < 2 * m:
            raise ValidationError(f"must be at least 2 * m = {2 * m}", field="ef_construction")
        name = f"idx_nodes_embedding_{dimension}"
        with self._transaction() as cur:
            lift_statement_timeout(cur)
            create_index(cur, _native_index_sql(
                dimension, m, ef_construction, name,
                derived=self.schema_info.derives_dimensions))
        self._native_index_added(dimension)
        self._cache.clear()
        return name

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
