"""The query vector of a search: embedded, checked against the stored vectors' model, and
matched to the index that serves its dimension (native or the reference schema's padded one).

Every vector search (``search``, ``search_hybrid``, ``search_vector_bm25``) and the tuning
session take their vector and their distance expression from here, so the rules are written
once: a vector of another model or dimension is refused, and a dimension with a native index
(:meth:`~htm_analytics.LongTermMemory.create_native_index`) is searched through it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg import sql

from ..errors import EmbeddingError, EmbeddingMismatchError, HTMError, ValidationError
from ..validation import MAX_EMBEDDING_DIMENSION, checked_vector
from ._common import StoredModel
from .display import model_label

if TYPE_CHECKING:
    from ._base import StoreBase

__all__ = ["EMBEDDING_MODELS", "PADDED_INDEX", "StoredModel", "VectorQuery", "check_model",
           "distance_sql", "native_distance", "query_vector", "service_key",
           "stored_embedding_models", "vector_index_name", "check_against_stored"]


EMBEDDING_MODELS = """
SELECT m.provider, m.model, n.embedding_dimension AS dimension, count(*) AS nodes
FROM nodes n LEFT JOIN node_embedding_models m ON m.node_id = n.id
WHERE n.embedding_dimension IS NOT NULL
GROUP BY 1, 2, 3 ORDER BY nodes DESC, 1, 2, 3"""

# The reference schema's HNSW index on the vectors zero-padded to 2000 dimensions.
PADDED_INDEX = "idx_nodes_embedding"


def native_distance(dimension: int) -> sql.Composed:
    """Cosine distance on a native-dimension index's expression, to the query ``%(q)s``."""
    # Literals, not parameters: the planner matches the index expression only against
    # constants.
    return sql.SQL("(subvector(n.embedding, 1, {d})::vector({d})) <=> %(q)s").format(
        d=sql.Literal(dimension))


def distance_sql(native_dimension: int | None) -> tuple[sql.Composable, sql.Composable]:
    """``(distance to %(q)s, condition on nodes n)`` through the native index of
    ``native_dimension``, or through the padded index when it is None."""
    if native_dimension is None:
        return sql.SQL("n.embedding <=> %(q)s"), sql.SQL("n.embedding IS NOT NULL")
    return (native_distance(native_dimension),
            sql.SQL("n.embedding_dimension = {}").format(sql.Literal(native_dimension)))


def vector_index_name(native_dimension: int | None) -> str:
    """The HNSW index a search through ``distance_sql(native_dimension)`` walks.

    Parameters
    ----------
    native_dimension : int or None
        A dimension searched through its native index, or None for the padded index.

    Returns
    -------
    str
        ``idx_nodes_embedding_<d>`` (native), else :data:`PADDED_INDEX`, unqualified (both
        are on ``public.nodes``).

    Examples
    --------
    >>> vector_index_name(384), vector_index_name(None)
    ('idx_nodes_embedding_384', 'idx_nodes_embedding')
    """
    return PADDED_INDEX if native_dimension is None else f"{PADDED_INDEX}_{native_dimension}"


def service_key(service: Any) -> tuple[str, str]:
    """Cache-key part naming an embedding service by type and model, not by identity."""
    model = getattr(service, "model", None) or getattr(service, "name", None)
    return (f"{type(service).__module__}.{type(service).__qualname__}", str(model))


class VectorQuery:
    """A checked query vector and how to search with it."""

    __slots__ = ("native", "values")

    def __init__(self, values: np.ndarray, native: bool) -> None:
        self.values = values
        """The vector as given (float32, unpadded)."""
        self.native = native
        """Whether a native index of :attr:`dimension` serves it."""

    @property
    def dimension(self) -> int:
        return int(self.values.shape[0])

    @property
    def vector(self) -> np.ndarray:
        """The vector padded to the reference schema's 2000 dimensions (float32)."""
        padded = np.zeros(MAX_EMBEDDING_DIMENSION, dtype=np.float32)
        padded[:self.values.shape[0]] = self.values
        return padded

    @property
    def parameter(self) -> np.ndarray:
        """The value of ``%(q)s`` in :attr:`distance`."""
        return self.values if self.native else self.vector

    @property
    def key(self) -> bytes:
        """The vector as a cache-key part (its length is its dimension)."""
        return self.values.tobytes()

    @property
    def native_dimension(self) -> int | None:
        return self.values.shape[0] if self.native else None

    def sql(self) -> tuple[sql.Composable, sql.Composable]:
        """``(distance, condition)``: see :func:`distance_sql`."""
        return distance_sql(self.native_dimension)


def stored_embedding_models(store: StoreBase) -> list[StoredModel]:
    """The stored vectors' models: read (a scan of every memory with a vector), then kept,
    with the vectors this store stores counted in, until ``cache_ttl`` has passed, after
    which another process's vectors of another model are seen."""
    models = store._embedding_models
    if models is None or time.monotonic() - store._embedding_models_read_at > store._cache.ttl:
        # Read on an agent's first remember or search: one of its memory operations.
        models = [tuple(row.values()) for row in
                  store._fetch(EMBEDDING_MODELS, memory_operation=True)]
        store._embedding_models = models
        store._embedding_models_read_at = time.monotonic()
    return models


def check_model(stored: Iterable[StoredModel], provider: str, model: str,
                dimension: int, *, field: str, subject: str = "the query is") -> None:
    """Refuse vectors of ``provider``/``model`` at ``dimension`` when the stored vectors
    come from another model or have another dimension (unnamed ones pass on their
    dimension: there is no way to tell them apart): an :class:`EmbeddingMismatchError`
    naming ``field``."""
    # One model may be named two ways (provider "sentence-transformers" with model
    # "all-MiniLM-L6-v2" or "sentence-transformers/all-MiniLM-L6-v2"): compare their labels.
    wanted = model_label(provider, model)
    mismatched = [(p, m, d, n) for p, m, d, n in stored
                  if d != dimension or (p is not None and model_label(p, m) != wanted)]
    if mismatched:
        found = "; ".join(f"{model_label(p, m)} ({d}-d, {n:,} nodes)"
                          for p, m, d, n in mismatched)
        raise EmbeddingMismatchError(
            f"{subject} embedded with {model_label(provider, model)} ({dimension}-d) but "
            f"the stored vectors include {found}; vectors of different models are not comparable. "
            "Re-embed the memories, or search with the model that made them "
            "(htm-analytics advise gives the SQL to clear the odd vectors).", field=field)


def check_against_stored(store: StoreBase, provider: str | None, model: str | None,
                         dimension: int, *, field: str, writing: bool = False) -> None:
    """Refuse vectors of ``provider``/``model`` (None: unnamed, checked on their dimension
    only) that cannot be compared with the stored ones: a search's query vector, or, when
    ``writing``, vectors about to be stored (one vector of another model would make every
    later search refuse)."""
    stored = stored_embedding_models(store)
    if provider is not None and model is not None:
        check_model(stored, provider, model, dimension, field=field,
                    subject="these vectors are" if writing else "the query is")
        return
    dimensions = {d for _, _, d, _ in stored}
    if dimensions and dimension not in dimensions:
        raise EmbeddingMismatchError(
            f"{'these vectors have' if writing else 'the query vector has'} {dimension} "
            f"dimensions but the stored vectors have {', '.join(map(str, sorted(dimensions)))}; "
            "vectors of different models are not comparable. "
            f"{'Store vectors of' if writing else 'Search with'} the model that made them.",
            field=field)


def _embed(query: str | None, service: Any) -> Any:
    if service is None:  # neither given: the vector is what is missing
        raise ValidationError("a vector search needs the query's vector, or an "
                              "embedding_service= to embed the query", field="embedding")
    if not callable(getattr(service, "embed", None)):
        raise ValidationError("needs an object with an embed(text) method, or pass embedding=",
                              field="embedding_service")
    try:
        embedding = service.embed(query)
    except HTMError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"the embedding service failed on the query: {exc}") from exc
    if hasattr(embedding, "to_numpy"):
        embedding = embedding.to_numpy()
    if isinstance(embedding, (list, tuple, np.ndarray)) and len(embedding) == 1 \
            and np.ndim(embedding[0]) == 1:  # a batch of one
        embedding = embedding[0]
    return embedding


def query_vector(store: StoreBase, query: str | None, embedding: Any,
                 service: Any) -> VectorQuery:
    """The query vector of a search: ``embedding``, or ``query`` embedded by ``service``.

    A service that names its model (``name`` and ``model``) must be the stored vectors'
    model (:func:`check_model`); a bare vector must have a stored dimension.

    Raises
    ------
    ValidationError
        No vector and no service, or a malformed vector.
    EmbeddingError
        The service failed, or the vector cannot be compared with the stored ones.
    """
    if embedding is None:
        embedding = _embed(query, service)
    else:
        service = None
    vector = checked_vector(embedding, field="embedding")
    dimension = vector.shape[0]
    provider, model = getattr(service, "name", None), getattr(service, "model", None)
    named = isinstance(provider, str) and isinstance(model, str)
    check_against_stored(store, provider if named else None, model if named else None,
                         dimension, field="embedding_service" if named else "embedding")
    return VectorQuery(vector, dimension in store._native_dimensions)
