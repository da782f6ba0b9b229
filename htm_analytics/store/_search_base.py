"""What every search shares: the query vector and whether it is comparable with the stored
ones (embedding provenance), per-transaction HNSW settings, cache keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from psycopg import sql

from ..errors import EmbeddingError, HTMError, ValidationError
from ..validation import (
    MAX_EMBEDDING_DIMENSION,
    prepare_embedding,
    validate_name,
    validate_positive_int,
)
from .search_pool import SearchPoolMixin

__all__ = ["SearchBase", "service_key"]


def service_key(service: Any) -> tuple[str, str]:
    """Cache-key part naming an embedding service by type and model, not by identity."""
    model = getattr(service, "model", None) or getattr(service, "name", None)
    return (f"{type(service).__module__}.{type(service).__qualname__}", str(model))


class SearchBase(SearchPoolMixin):
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

    def _run_search(self, statement: str | sql.Composed, params: dict[str, Any], *,
                    ef_search: int, filtered: bool,
                    before: Callable[[psycopg.Cursor[Any]], None] | None = None
                    ) -> list[dict[str, Any]]:
        """Run a search statement on a search connection (see :mod:`.search_pool`), read
        through this database's view of the tables (:meth:`_read`).

        At the default ``ef_search`` without a timeframe the statement runs alone, in
        autocommit, as raw SQL would; otherwise the other settings are set for one
        transaction. ``before(cur)`` runs first on the same connection (e.g. to compute a
        parameter).
        """
        with self._search_cursor(ef_search=ef_search, filtered=filtered) as cur:
            if before is not None:
                before(cur)
            return cur.execute(self._read(statement), params, prepare=True).fetchall()

    def embedding_models(self) -> pd.DataFrame:
        """Which models produced the stored embeddings.

        Returns
        -------
        pandas.DataFrame
            ``provider``, ``model`` (string, NA for embeddings stored without that
            information), ``dimension`` and ``nodes`` (int64), most nodes first.
        """
        return self.fetch_frame(
            """SELECT m.provider, m.model, n.embedding_dimension AS dimension, count(*) AS nodes
               FROM nodes n LEFT JOIN node_embedding_models m ON m.node_id = n.id
               WHERE n.embedding_dimension IS NOT NULL
               GROUP BY 1, 2, 3 ORDER BY nodes DESC, 1, 2, 3""",
            dtypes={"provider": "string", "model": "string", "dimension": "int64",
                    "nodes": "int64"})

    def check_embedding_model(self, provider: str, model: str, dimension: int) -> None:
        """Refuse to search with vectors of ``provider``/``model`` at ``dimension`` when the
        stored vectors come from another model or have another dimension.

        Embeddings stored without a model name pass if their dimension matches (there is no
        way to tell them apart). The answer is cached until this store adds an embedding.

        Raises
        ------
        EmbeddingError
            Naming the stored models and the query's.
        """
        provider = validate_name(provider, field="provider")
        model = validate_name(model, field="model")
        dimension = validate_positive_int(dimension, field="dimension",
                                          maximum=MAX_EMBEDDING_DIMENSION)
        # Unnamed vectors pass on their dimension alone; named ones must be this model's.
        mismatched = [(p, m, d, n) for p, m, d, n in self._stored_embedding_models()
                      if d != dimension or (p is not None and (p, m) != (provider, model))]
        if mismatched:
            found = "; ".join(("unknown model" if p is None else f"{p}/{m}")
                              + f" ({d}-d, {n:,} nodes)" for p, m, d, n in mismatched)
            raise EmbeddingError(
                f"the query is embedded with {provider}/{model} ({dimension}-d) but the stored "
                f"vectors include {found}; vectors of different models are not comparable. "
                "Re-embed the memories, or search with the model that made them "
                "(htm-analytics advise gives the SQL to clear the odd vectors).")

    def _stored_embedding_models(self) -> list[tuple[Any, Any, int, int]]:
        """:meth:`embedding_models` as plain tuples, cached until this store adds a vector
        (searches check it on every query)."""
        if self._embedding_models is None:
            stored = self.embedding_models().astype(object)
            self._embedding_models = list(
                stored.where(stored.notna(), None).itertuples(index=False, name=None))
        return self._embedding_models

    def _check_query_model(self, service: Any, dimension: int) -> None:
        """Refuse a query vector that cannot be compared with the stored ones, as HTM.recall
        does: a service naming its model (``name`` and ``model``) must be the stored vectors'
        model (:meth:`check_embedding_model`); a bare vector must have a stored dimension."""
        provider, model = getattr(service, "name", None), getattr(service, "model", None)
        if isinstance(provider, str) and isinstance(model, str):
            self.check_embedding_model(provider, model, dimension)
            return
        dimensions = sorted({d for _, _, d, _ in self._stored_embedding_models()})
        if dimensions and dimension not in dimensions:
            raise EmbeddingError(
                f"the query vector has {dimension} dimensions but the stored vectors have "
                f"{', '.join(map(str, dimensions))}; vectors of different models are not "
                "comparable. Search with the model that made them.")
