"""Exact ground truth without the stored vectors in memory: held-out queries chosen among the
stored ids and fetched by id, exact neighbours computed over the vectors streamed in batches."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from ..validation import validate_number

__all__ = ["stable_sample", "streamed_neighbor_distances", "returned_distances", "unit_rows"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 values (wrapping arithmetic): a fixed, well-spread
    hash, the same on every platform and in every process."""
    values = values.copy()
    values ^= values >> np.uint64(30)
    values *= np.uint64(0xBF58476D1CE4E5B9)
    values ^= values >> np.uint64(27)
    values *= np.uint64(0x94D049BB133111EB)
    values ^= values >> np.uint64(31)
    return values


def stable_sample(ids: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The ``n`` ids whose hash with ``seed`` is smallest, in that hash order.

    Whether an id is chosen depends on its own hash and on the ``n``-th smallest hash only,
    so adding ids keeps the earlier choice but for the few new ids that hash lower (each
    displaces one): adding m ids to N replaces about ``n * m / (N + m)`` of the ``n``.
    Removing an unchosen id changes nothing. The same ids and seed give the same sample.
    """
    n = validate_number(n, field="n", minimum=0, integer=True)
    seed = validate_number(seed, field="seed", integer=True)
    ids = np.asarray(ids, dtype=np.int64)
    salt = _mix(np.array([seed % 2**64], dtype=np.uint64)) * _GOLDEN
    hashes = _mix(ids.astype(np.uint64) ^ salt)
    order = np.lexsort((ids, hashes))  # ties (never seen in practice) broken by id
    return ids[order[:n]]


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
