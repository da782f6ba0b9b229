"""Recall of the live HNSW index per query, for several sets of queries in one pass: what
``htm-analytics collect`` measures on held-out stored vectors and on logged query vectors.

The same rules as :func:`~htm_analytics.benchmark_recall` (exact ground truth over every
stored vector of the dimension, streamed in batches; a stored query's own row left out; a hit
is a returned row within the true k-th distance plus 1e-3), but the ground truth of every
query is computed in one read of the stored vectors, whatever set the query belongs to.
"""

from __future__ import annotations

import numpy as np

from ..store import LongTermMemory
from ..validation import validate_positive_int
from ._ground_truth import streamed_neighbor_distances, unit_rows
from .benchmark import _recall

__all__ = ["recall_per_query"]


def recall_per_query(store: LongTermMemory, queries: np.ndarray, own_ids: np.ndarray, *,
                     dimension: int, k: int, ef_search: int) -> np.ndarray:
    """Recall@k of each query through the live index at ``ef_search``.

    Parameters
    ----------
    store : LongTermMemory
    queries : numpy.ndarray
        ``(n, dimension)`` float32 query vectors.
    own_ids : numpy.ndarray
        For each query, the id of the stored row it is (left out of its results and its
        ground truth), or -1.
    dimension, k, ef_search : int
        Which stored vectors, neighbours per query, the search depth.

    Returns
    -------
    numpy.ndarray
        ``(n,)`` float64 recall of each query (hits / k).
    """
    k = validate_positive_int(k, field="k", maximum=1000)
    ef_search = validate_positive_int(ef_search, field="ef_search", maximum=1000)
    queries = np.asarray(queries, dtype=np.float32)
    own_ids = np.asarray(own_ids, dtype=np.int64)
    if not len(queries):
        return np.zeros(0)
    with store.tuning_session() as session:
        truth = streamed_neighbor_distances(queries, session.vector_batches(dimension), k,
                                            own_ids)
        # One more row when a query is itself stored: it finds itself, and that hit is dropped.
        asked = k + 1 if (own_ids >= 0).any() else k
        run = session.knn(queries, dimension=dimension, k=asked, ef_search=ef_search)
        recall, _, _ = _recall(run["ids"], own_ids, truth, unit_rows(queries).astype(np.float64),
                               lambda ids: session.stored_vectors(dimension, ids=ids), k)
    return recall
