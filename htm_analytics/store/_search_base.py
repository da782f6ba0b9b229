"""What every search shares: the query vector, per-transaction HNSW settings, cache keys."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg

from ..errors import EmbeddingError, HTMError, ValidationError
from ..validation import prepare_embedding
from .tagging import TaggingMixin

__all__ = ["SearchBase", "DEFAULT_EF_SEARCH", "service_key"]

DEFAULT_EF_SEARCH = 40


def service_key(service: Any) -> tuple[str, str]:
    """Cache-key part naming an embedding service by type and model, not by identity."""
    model = getattr(service, "model", None) or getattr(service, "name", None)
    return (f"{type(service).__module__}.{type(service).__qualname__}", str(model))


class SearchBase(TaggingMixin):
    """Query vectors and search settings (hybrid search also reads tags)."""

    def _query_vector(self, query: str | None, embedding: Any,
                      embedding_service: Any) -> tuple[np.ndarray, int]:
        if embedding is None:
            if embedding_service is None or not callable(getattr(embedding_service, "embed",
                                                                 None)):
                raise ValidationError(
                    "needs an object with an embed(text) method, or pass embedding=",
                    field="embedding_service")
            try:
                embedding = embedding_service.embed(query)
            except HTMError:
                raise
            except Exception as exc:
                raise EmbeddingError(
                    f"the embedding service failed on the query: {exc}") from exc
            if hasattr(embedding, "to_numpy"):
                embedding = embedding.to_numpy()
            if isinstance(embedding, (list, tuple, np.ndarray)) and len(embedding) == 1 \
                    and np.ndim(embedding[0]) == 1:  # a batch of one
                embedding = embedding[0]
        return prepare_embedding(embedding, field="embedding")

    def _search_settings(self, cur: psycopg.Cursor[Any], *, ef_search: int,
                         filtered: bool) -> None:
        """Per-transaction HNSW settings: ``SET LOCAL`` never leaks to pooled connections.

        Sequential scans are disabled too: the planner under-costs scans of TOASTed vectors
        (every padded 2000-d vector is TOASTed), and picks an exact scan + sort that reads
        every vector, 30k rows in, instead of the HNSW index.
        """
        cur.execute("SELECT set_config('hnsw.ef_search', %s, true),"
                    "       set_config('enable_seqscan', 'off', true)", (str(ef_search),))
        if filtered and self.supports_iterative_scan:
            cur.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
