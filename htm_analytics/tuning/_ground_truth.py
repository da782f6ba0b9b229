"""Exact ground truth without the stored vectors in memory: held-out queries chosen among the
stored ids and fetched by id, exact neighbours computed over the vectors streamed in batches
(:func:`exact_neighbors` for vectors already in memory), and recall@k against it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..store.table_recall import HIT_EPSILON
from ..validation import check_norms, real_matrix, validate_number, validate_positive_int

__all__ = ["stable_sample", "streamed_neighbor_distances", "returned_distances", "unit_rows",
           "recall_at_k", "mean_interval", "exact_neighbors", "query_matrix"]

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


def query_matrix(value: Any, *, field: str, dimension: int | None = None) -> np.ndarray:
    """``value`` as a float32 ``(n, d)`` matrix of real, finite query vectors, ``n >= 1``,
    each with a cosine similarity (no all-zero row, no norm that float32 loses)."""
    matrix = real_matrix(value, field=field)  # refuses strings, complex, objects, 1-d
    if not len(matrix) or not matrix.shape[1]:
        raise ValidationError(f"holds no vectors (shape {matrix.shape})", field=field)
    if dimension is not None and matrix.shape[1] != dimension:
        raise ValidationError(f"has {matrix.shape[1]}-d vectors; the stored ones have "
                              f"{dimension}: must be an (n, {dimension}) array", field=field)
    if not np.isfinite(matrix).all():
        raise ValidationError("contains NaN or infinite values", field=field)
    zero = np.flatnonzero(~matrix.any(axis=1))
    if zero.size:
        raise ValidationError(f"row {int(zero[0])} is all zeros, so its cosine similarity is "
                              "undefined", field=field)
    if np.abs(matrix).max() > np.finfo(np.float32).max:
        raise ValidationError("has values too large for float32", field=field)
    vectors = matrix.astype(np.float32)
    check_norms(vectors, field=field)
    return vectors


def exact_neighbors(queries: np.ndarray, vectors: np.ndarray, k: int, *,
                    exclude: np.ndarray | None = None,
                    batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """The exact ``k`` nearest rows of ``vectors`` by cosine distance, for each query.

    Parameters
    ----------
    queries : numpy.ndarray
        ``(n, d)`` query vectors, ``n >= 1``: real, finite, none all zeros (its cosine
        distance would be undefined).
    vectors : numpy.ndarray
        ``(N, d)`` stored vectors, ``N >= 1``, under the same rules.
    k : int
        Neighbours per query, a positive integer; above N, N columns come back.
    exclude : numpy.ndarray, optional
        For each query, a row position of ``vectors`` to leave out (the query itself when it is
        a stored vector), or -1: ``n`` integers from -1 to N - 1.
    batch : int
        Queries per matrix product (a positive integer), bounding memory at ``batch * N``
        floats.

    Returns
    -------
    positions : numpy.ndarray
        ``(n, min(k, N))`` int64 row positions, nearest first; -1 where no row is left (k
        at least N and that query's row excluded).
    distances : numpy.ndarray
        ``(n, min(k, N))`` float64 cosine distances, ascending; infinity where the position
        is -1.

    Raises
    ------
    ValidationError
        Naming ``queries``, ``vectors``, ``k``, ``exclude`` or ``batch``.
    """
    k = validate_positive_int(k, field="k")
    batch = validate_positive_int(batch, field="batch")
    stored = unit_rows(query_matrix(vectors, field="vectors"))
    queries = query_matrix(queries, field="queries", dimension=stored.shape[1])
    if exclude is not None:
        exclude = np.asarray(exclude)
        if exclude.dtype.kind not in "iu" or exclude.shape != (len(queries),):
            raise ValidationError(f"must be {len(queries)} integer row positions (one per "
                                  f"query, -1 for none), got {exclude.dtype} of shape "
                                  f"{exclude.shape}", field="exclude")
        if ((exclude < -1) | (exclude >= len(stored))).any():
            raise ValidationError(f"must hold row positions from -1 to {len(stored) - 1}",
                                  field="exclude")
        exclude = exclude.astype(np.int64)
    k = min(k, len(stored))
    positions = np.zeros((len(queries), k), dtype=np.int64)
    distances = np.zeros((len(queries), k), dtype=np.float64)
    for start in range(0, len(queries), batch):
        block = unit_rows(queries[start:start + batch])
        distance = 1.0 - block.astype(np.float64) @ stored.T.astype(np.float64)
        if exclude is not None:
            rows = np.flatnonzero(exclude[start:start + batch] >= 0)
            distance[rows, exclude[start:start + batch][rows]] = np.inf
        nearest = np.argpartition(distance, k - 1, axis=1)[:, :k] if k < len(stored) else \
            np.tile(np.arange(len(stored)), (len(block), 1))
        nearest_distance = np.take_along_axis(distance, nearest, axis=1)
        order = np.argsort(nearest_distance, axis=1, kind="stable")
        positions[start:start + batch] = np.take_along_axis(nearest, order, axis=1)
        distances[start:start + batch] = np.take_along_axis(nearest_distance, order, axis=1)
    positions[np.isinf(distances)] = -1  # an excluded row is no neighbour
    return positions, distances


def streamed_neighbor_distances(queries: np.ndarray, batches: Iterable[tuple[np.ndarray,
                                                                             np.ndarray]],
                                k: int, own_ids: np.ndarray) -> np.ndarray:
    """The cosine distances of each query's exact ``k`` nearest stored vectors, ascending.

    ``batches`` yields ``(ids, vectors)``; a query's own id (``own_ids``, -1 for none) is left
    out: its place, when fewer than ``k`` other vectors are there, holds infinity (so the
    finite entries of a row are that query's ground truth, ``min(k, available)`` of them).
    Memory is one batch times the queries, whatever the number of stored vectors; the
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


def recall_at_k(found: list[np.ndarray], own_ids: np.ndarray, truth_distance: np.ndarray,
                unit_queries: np.ndarray,
                fetch: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Recall@k of each query, rows returned per query, and rows returned outside the scope.

    Recall@k is as ann-benchmarks and pgvector's own tests define it: the share of the true
    neighbours found, ``|returned & truth| / |truth|``, the truth being the
    ``min(k, available)`` nearest vectors in scope (the finite entries of ``truth_distance``,
    from :func:`streamed_neighbor_distances`; a query's own row is never one of them). A
    returned row is a hit when its true distance is within the truth's farthest plus 1e-3, so
    that ties there are no misses. A query with no true neighbour (no other vector in scope)
    has no recall: NaN. ``fetch(ids)`` gives the ``(ids, vectors)`` of those ids in scope.
    """
    kept = [result[result != own_ids[i]][:k] for i, result in enumerate(found)]
    distances = returned_distances(kept, unit_queries, fetch)
    truth_size = np.isfinite(truth_distance).sum(axis=1) if truth_distance.size else \
        np.zeros(len(found), dtype=np.int64)
    recall = np.full(len(found), np.nan)
    returned = np.array([len(result) for result in kept], dtype=np.int64)
    outside = 0
    for i, distance in enumerate(distances):
        inside = ~np.isnan(distance)
        outside += int((~inside).sum())
        size = int(truth_size[i])
        if size:
            threshold = truth_distance[i, size - 1] + HIT_EPSILON
            recall[i] = min(int((distance[inside] <= threshold).sum()), size) / size
    return recall, returned, outside


def mean_interval(recall: np.ndarray) -> dict[str, float]:
    """The 95% interval of the mean recall over the queries (Student's t): how far another
    draw of as many queries could put it (NaN with fewer than two queries)."""
    if len(recall) < 2:
        return {"recall_low": float("nan"), "recall_high": float("nan")}
    from scipy import stats  # here, not with the module: about a second of every import

    half = float(stats.t.ppf(0.975, len(recall) - 1) * recall.std(ddof=1)
                 / np.sqrt(len(recall)))
    mean = float(recall.mean())
    return {"recall_low": max(0.0, mean - half), "recall_high": min(1.0, mean + half)}
