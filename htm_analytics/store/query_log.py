"""The query log (migration 011, installed by ``init-db``): the vectors recalls searched with,
kept in 1,000 slots that the newest query overwrites, so that ``htm-analytics collect`` can
measure the live index's recall on real questions.

Logging happens only where the database has the log and this role may write to it
(``schema_info.can_log_queries``) and the store is not read-only; elsewhere it does nothing.
Reads never create anything.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import checked_vector, validate_id, validate_positive_int
from ._base import StoreBase
from ._common import to_numpy

__all__ = ["QUERY_LOG_SLOTS", "QueryLogMixin"]

QUERY_LOG_SLOTS = 1000
"""Rows the query log keeps at most (migration 011): the newest query replaces the oldest."""

_LOG = """SELECT set_config('synchronous_commit', 'off', true),
                 public.htm_analytics_log_query_vector(%s, %s) AS query_id"""

_LOGGED = """SELECT query_id, embedding FROM memory_query_vectors
             WHERE vector_dims(embedding) = %(dimension)s ORDER BY query_id"""


class QueryLogMixin(StoreBase):
    """Write and read the query log (see :mod:`htm_analytics.store.query_log`)."""

    @property
    def logs_query_vectors(self) -> bool:
        """Whether :meth:`log_query_vector` writes: the database has the query log
        (``htm-analytics init-db``), this role may write to it, and the store is not
        read-only."""
        return self.schema_info.can_log_queries and self.schema_info.can_write \
            and not self.read_only

    def log_query_vector(self, embedding: Any, *, robot_id: int | None = None) -> int | None:
        """Log the vector of one query (what a recall searched with).

        Parameters
        ----------
        embedding : sequence of float or numpy.ndarray
            The query vector, unpadded (checked as a stored vector is).
        robot_id : int, optional
            The robot that asked.

        Returns
        -------
        int or None
            The query's ``query_id`` in the log, or None where nothing is logged (see
            :attr:`logs_query_vectors`). Only the last 1,000 queries logged are kept.

        Raises
        ------
        ValidationError
            A malformed vector or robot id (checked even where nothing is logged).
        """
        vector = checked_vector(embedding, field="embedding")
        if robot_id is not None:
            robot_id = validate_id(robot_id, field="robot_id")
        if not self.logs_query_vectors:
            return None
        with self._transaction(memory_operation=True) as cur:
            # A query lost in a crash costs nothing: the commit does not wait for the WAL's
            # flush to disk (it would be most of the call's time).
            row = cur.execute(_LOG, (vector, robot_id)).fetchone()
        return int(row["query_id"]) if row else None

    def logged_query_vectors(self, dimension: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The logged query vectors of ``dimension``: ``(query_ids, vectors)``, int64 ids and
        a float32 ``(n, dimension)`` matrix ordered by id; None where the database has no
        query log this role may read."""
        dimension = validate_positive_int(dimension, field="dimension")
        if not self.schema_info.has_table("memory_query_vectors"):
            return None
        rows = self._fetch(_LOGGED, {"dimension": dimension})
        ids = np.fromiter((r["query_id"] for r in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, dimension), dtype=np.float32)
        return ids, np.vstack([to_numpy(r["embedding"]) for r in rows]).astype(np.float32)
