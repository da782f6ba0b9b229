"""Exact ground truth without the stored vectors in memory: held-out queries chosen among the
stored ids and fetched by id, exact neighbours computed over the vectors streamed in batches."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["streamed_neighbor_distances", "returned_distances", "unit_rows"]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` (float32) with every non-zero row scaled to unit length."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def streamed_neighbor_distances(queries: np.ndarray, batches: Iterable[tuple[np.ndarray,
                                                                             np.ndarray]],
                                k: int, own_ids: np.ndarray) -> np.ndarray:
    """The cosine distances of each query's exact ``k`` nearest stored vectors, ascending.

    ``batches`` yields ``(ids, vectors)``; a query's own id (``own_ids``, -1 for none) is left
    out. Memory is one batch times the queries, whatever the number of stored vectors; the
    result equals :func:`~htm_analytics.exact_neighbors`' distances.
    """
    unit_queries = unit_rows(queries).astype(np.float64)
    best = np.full((len(queries), 0), np.inf)
    for ids, vectors in batches:
        distance = 1.0 - unit_queries @ unit_rows(vectors).astype(np.float64).T
        distance[own_ids[:, None] == ids[None, :]] = np.inf
        merged = np.concatenate([best, distance], axis=1)
        if merged.shape[1] > k:
            merged = np.partition(merged, k - 1, axis=1)[:, :k]
        best = merged
    return np.sort(best, axis=1)


def returned_distances(found: list[np.ndarray], unit_queries: np.ndarray,
                       fetch: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
                       ) -> list[np.ndarray]:
    """The cosine distance of every row each query returned, fetched by id (the returned rows
    only, never the whole table); NaN for an id not found in scope."""
    wanted = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    ids, vectors = fetch(wanted) if len(wanted) else (  # nothing returned at all
        wanted, np.zeros((0, unit_queries.shape[1]), np.float32))
    unit = unit_rows(vectors).astype(np.float64)
    result = []
    for i, rows in enumerate(found):
        position = np.searchsorted(ids, rows)
        inside = (position < len(ids)) & (ids[np.minimum(position, max(len(ids) - 1, 0))] == rows)
        distance = np.full(len(rows), np.nan)
        distance[inside] = 1.0 - unit[position[inside]] @ unit_queries[i]
        result.append(distance)
    return result
