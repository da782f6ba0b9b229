"""Recall of the live HNSW index per query, for several sets of queries in one pass: what
``htm-analytics collect`` measures on held-out stored vectors and on logged query vectors.

The same rules as :func:`~htm_analytics.benchmark_recall` (exact ground truth over every
stored vector of the dimension, streamed in batches; a stored query's own row left out; a hit
is a returned row within the truth's farthest distance plus 1e-3; recall@k is the share of
the ``min(k, available)`` true neighbours found), but the ground truth of every query is
computed in one read of the stored vectors, whatever set the query belongs to.
"""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..store import LongTermMemory
from ..validation import validate_positive_int
from ._ground_truth import query_matrix, recall_at_k, streamed_neighbor_distances, unit_rows

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
        ``(n,)`` float64 recall of each query: the share of its ``min(k, available)`` true
        neighbours found (available: the stored vectors of that dimension, less the query's
        own row); NaN for a query with no other stored vector to find. Where more than ``k``
        vectors are stored every query has ``k`` true neighbours, so ``recall * k`` counts
        its hits (what a Wilson interval over hits / (queries * k) needs).
    """
    k = validate_positive_int(k, field="k", maximum=1000)
    ef_search = validate_positive_int(ef_search, field="ef_search", maximum=1000)
    dimension = validate_positive_int(dimension, field="dimension", maximum=2000)
    if isinstance(queries, np.ndarray) and queries.ndim == 2 and not len(queries):
        return np.zeros(0)
    queries = query_matrix(queries, field="queries", dimension=dimension)
    own_ids = np.asarray(own_ids)
    if own_ids.dtype.kind not in "iu" or own_ids.shape != (len(queries),):
        raise ValidationError(f"must be {len(queries)} integer ids (one per query, -1 for "
                              "none)", field="own_ids")
    own_ids = own_ids.astype(np.int64)
    with store.tuning_session() as session:
        truth = streamed_neighbor_distances(queries, session.vector_batches(dimension), k,
                                            own_ids)
        # One more row when a query is itself stored: it finds itself, and that hit is dropped.
        asked = k + 1 if (own_ids >= 0).any() else k
        run = session.knn(queries, dimension=dimension, k=asked, ef_search=ef_search)
        recall, _, _ = recall_at_k(run["ids"], own_ids, truth,
                                   unit_rows(queries).astype(np.float64),
                                   lambda ids: session.stored_vectors(dimension, ids=ids), k)
    return recall
