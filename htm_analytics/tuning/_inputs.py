"""The tuning benchmarks' arguments, checked before any work: query vectors, lists of
settings, filters and flags, each refused by name with a
:class:`~htm_analytics.errors.ValidationError`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import EmbeddingError, EmbeddingMismatchError, ValidationError
from ..store.tuning_session import filter_conditions
from ..validation import MAX_EMBEDDING_DIMENSION, validate_number, validate_positive_int
from ._ground_truth import query_matrix, stable_sample

__all__ = ["filter_list", "iterative_modes",
           "resolve_queries", "validate_dimension", "validate_seed"]

ITERATIVE_MODES = (None, "strict_order", "relaxed_order")


def filter_list(filters: Any) -> list[Mapping[str, Any] | None]:
    """None, one filter mapping or a non-empty sequence of them (None or ``{}``: no filter),
    each checked as the searches will read it."""
    if filters is None or isinstance(filters, Mapping):
        items: list[Any] = [filters]
    elif isinstance(filters, (list, tuple)):
        items = list(filters)
    else:
        raise ValidationError("must be a filter (a dict of tag, robot or timeframe), None, or "
                              f"a list of them, got {type(filters).__name__}", field="filters")
    if not items:
        raise ValidationError("must hold at least one filter (None for no filter)",
                              field="filters")
    checked: list[Mapping[str, Any] | None] = []
    for item in items:
        if item is not None and not isinstance(item, Mapping):
            raise ValidationError(f"each filter must be a dict or None, got "
                                  f"{type(item).__name__}", field="filters")
        if item and not all(isinstance(name, str) for name in item):
            raise ValidationError("filter names must be strings: tag, robot or timeframe",
                                  field="filters")
        filter_conditions(item)  # refuses unknown names and bad values, naming filters
        checked.append(item or None)
    return checked


def iterative_modes(value: Any) -> list[str | None]:
    """None, one pgvector iterative scan mode, or a non-empty sequence of them."""
    modes = [value] if value is None or isinstance(value, str) else \
        list(value) if isinstance(value, (list, tuple)) else [value]
    if not modes:
        raise ValidationError("must hold at least one mode (None for off)",
                              field="iterative_scan")
    for mode in modes:
        if mode not in ITERATIVE_MODES:
            raise ValidationError("must be None, 'strict_order' or 'relaxed_order'",
                                  field="iterative_scan")
    return modes


def validate_dimension(dimension: Any) -> int | None:
    """None (the most common stored dimension) or a dimension a vector can have."""
    if dimension is None:
        return None
    return validate_positive_int(dimension, field="dimension", maximum=MAX_EMBEDDING_DIMENSION)


def validate_seed(seed: Any) -> int:
    """Any integer (it only salts the hash that picks the held-out queries)."""
    return int(validate_number(seed, field="seed", integer=True, minimum=-2**63))


def resolve_queries(queries: Any, dimension: int, ids: np.ndarray,
                    fetch: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                    embedder: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Query vectors and, for stored ones, their own ids (to leave out), else -1.

    Held-out queries are chosen among the stored ``ids`` and only they are fetched
    (``fetch(ids)`` gives their ids and vectors, ordered by id)."""
    check_queries(queries, embedder)
    if queries is None or isinstance(queries, (int, np.integer)):
        n = 500 if queries is None else int(queries)
        if n > len(ids):
            raise ValidationError(f"asked for {n} held-out queries but only {len(ids)} vectors "
                                  f"of dimension {dimension} are stored", field="queries")
        chosen = stable_sample(ids, n, seed)
        fetched_ids, vectors = fetch(np.sort(chosen))
        return vectors[np.searchsorted(fetched_ids, chosen)], chosen
    if not _is_texts(queries):
        matrix = query_matrix(queries, field="queries", dimension=dimension)
        return matrix, np.full(len(matrix), -1, dtype=np.int64)
    texts = list(queries)
    try:
        answer = embedder.embed(texts)
    except Exception as exc:  # the provider's own error, named
        raise EmbeddingError(f"embedding the benchmark queries failed: {exc}") from exc
    try:
        matrix = query_matrix(answer, field="embedder", dimension=dimension)
    except ValidationError as exc:
        raise EmbeddingMismatchError(f"its vectors for the {len(texts)} queries cannot be "
                                     f"searched: {exc}", field="embedder") from None
    if len(matrix) != len(texts):
        raise EmbeddingMismatchError(f"returned {len(matrix)} vectors for {len(texts)} query "
                                     "texts", field="embedder")
    return matrix, np.full(len(matrix), -1, dtype=np.int64)


def _is_texts(queries: Any) -> bool:
    return isinstance(queries, (list, tuple, pd.Series)) and len(queries) > 0 and \
        all(isinstance(text, str) for text in queries)


def check_queries(queries: Any, embedder: Any) -> None:
    """What :func:`resolve_queries` can take, checked before the store is read: None, a count,
    an ``(n, d)`` array of vectors or a list of texts (with an embedder)."""
    if queries is None:
        return
    if isinstance(queries, (int, np.integer)) and not isinstance(queries, (bool, np.bool_)):
        validate_positive_int(queries, field="queries")
        return
    if isinstance(queries, (bool, np.bool_, float, complex, np.number, str, bytes)):
        raise ValidationError(f"must be None, a count of held-out queries, an (n, d) array "
                              f"of vectors or a list of texts, got {queries!r:.40}",
                              field="queries")
    if _is_texts(queries):
        if not all(text.strip() for text in queries):
            raise ValidationError("holds a blank text", field="queries")
        if embedder is None or not callable(getattr(embedder, "embed", None)):
            raise ValidationError("texts need an embedder (an object with embed(texts))",
                                  field="embedder")
        return
    if not isinstance(queries, (np.ndarray, list, tuple, pd.DataFrame)):
        raise ValidationError(f"must be None, a count of held-out queries, an (n, d) array "
                              f"of vectors or a list of texts, got {type(queries).__name__}",
                              field="queries")
    query_matrix(queries, field="queries")
