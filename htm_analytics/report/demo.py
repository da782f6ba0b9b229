"""The demo: a real memory (3,000 Debian package descriptions with their MiniLM embeddings),
remembered by five robots over six months, in a database of its own."""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..agent.datasets import read_demo, remember_history
from ..errors import EmbeddingError, NotFoundError, SchemaError
from ..store import (
    LongTermMemory,
    claimed_database,
    create_database,
    database_exists,
    drop_database,
    drop_unused_databases,
    live_store,
    replace_database,
    with_database,
)
from ..store.connection import mask_url, resolve_database_url
from ..store.file_paths import output_path
from ..validation import validate_positive_int

__all__ = ["DEMO_DATABASE", "load_demo", "demo_database_url", "demo_queries", "run_demo",
           "DemoQueryEmbedder"]

DEMO_DATABASE = "htm_demo"
# The model that embedded the bundled texts and queries.
DEMO_MODEL_PROVIDER, DEMO_MODEL = "sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2"


def load_demo(store: LongTermMemory, *, days: int = 180, end: dt.datetime | None = None,
              seed: int = 0, native_index: bool = True) -> pd.DataFrame:
    """Remember the bundled demo memory in ``store``.

    Five robots (planner, researcher, coder, reviewer, ops) remember the 3,000 texts over the
    ``days`` before ``end`` (default now), sharing about a third and reinforcing many (see
    :func:`~htm_analytics.agent.datasets.simulate_remembers`), with the texts' Debian
    tags. Loaded with one :meth:`~LongTermMemory.bulk_add`; then a native 384-d HNSW index is built.

    Returns
    -------
    pandas.DataFrame
        :meth:`~LongTermMemory.table_counts` after loading.
    """
    store = live_store(store)
    memories, vectors, _, _ = read_demo()
    remember_history(store, memories, vectors, days=days, end=end, seed=seed,
                     token_counts=True, embedding_model=(DEMO_MODEL_PROVIDER, DEMO_MODEL))
    if native_index:
        store.create_native_index(vectors.shape[1])
    return store.table_counts()


def demo_database_url(server_url: str | None = None, *, fresh: bool = False,
                      database: str = DEMO_DATABASE) -> str:
    """URL of the demo database on ``server_url`` (default: the configured or embedded server),
    built if it is missing or holds no memory; ``fresh`` builds it anew.

    A build loads a new database and swaps it in (:func:`~htm_analytics.store.replace_database`)
    only once it is complete: until then the old ``database`` stays as it was, and a build that
    fails or is interrupted leaves nothing behind.
    """
    server = resolve_database_url(server_url)
    if not fresh and database_exists(server, database):
        url = with_database(server, database)
        try:
            with LongTermMemory(url) as store:
                counts = store.table_counts()
                if counts.loc[counts["table"] == "nodes", "rows"].sum() > 0:
                    return url
        except SchemaError:
            pass  # no memory there yet: build one
    return _build_demo_database(server, database)


def _build_prefix(database: str) -> str:
    return f"{database.encode('utf-8')[:40].decode('utf-8', 'ignore')}__building_"


def _build_demo_database(server: str, database: str) -> str:
    prefix = _build_prefix(database)
    drop_unused_databases(server, prefix)  # builds of runs that were killed
    build = f"{prefix}{uuid.uuid4().hex[:8]}"
    # claimed: another run's clean-up above must not take it for a killed run's
    with claimed_database(server, build):
        url = create_database(server, build)
        try:
            with LongTermMemory(url, init_schema=True) as store:
                load_demo(store)
            return replace_database(server, build, database)
        except BaseException:  # Ctrl-C included: the old database was never touched
            drop_database(server, build)
            raise


def demo_queries(store: LongTermMemory, *, limit: int | None = None
                 ) -> tuple[list[str], np.ndarray, list[int]]:
    """The demo's labelled queries (package titles, their MiniLM vectors, and the node id of
    the description that answers each), for :func:`~htm_analytics.retrieval_quality`."""
    store = live_store(store)
    memories, _, queries, query_vectors = read_demo()
    if limit is not None:
        queries, query_vectors = queries.head(limit), query_vectors[:limit]
    ids = store.node_ids_by_content(memories["content"].tolist())
    relevant = [ids[p] for p in queries["position"]]
    if any(node is None for node in relevant):
        raise NotFoundError("the demo memory is not loaded in this database (load_demo)")
    return queries["title"].tolist(), query_vectors, [int(n) for n in relevant if n]


def run_demo(out: str | os.PathLike[str] = "report.html", *, server_url: str | None = None,
             database: str = DEMO_DATABASE, queries: int = 100,
             echo: Callable[[str], Any] = print) -> Path:
    """The main job: a fresh demo database (``database`` on the configured or embedded
    server) and its report, written to ``out``. ``out`` and ``queries`` are checked before
    the database is touched (a :class:`~htm_analytics.ValidationError` naming them)."""
    out = output_path(out, field="out")  # before minutes of loading, not after
    queries = validate_positive_int(queries, field="queries")
    started = time.perf_counter()
    server = resolve_database_url(server_url)
    # One run at a time per demo database: a second run's swap would end the first's
    # report sessions.
    with claimed_database(server, database, on_wait=lambda: echo(
            f"another demo run is using {database}: waiting for it to finish")):
        try:
            url = demo_database_url(server, fresh=True, database=database)
        except KeyboardInterrupt:
            echo(f"\ninterrupted while loading: {database} is as it was before this run")
            raise
        echo(f"demo memory loaded into {mask_url(url)} in "
             f"{time.perf_counter() - started:.1f} s")
        from .build import build_report

        with LongTermMemory(url) as store:
            echo(store.table_counts().to_string(index=False))
            report = build_report(store, title="htm_analytics demo: the memory of five robots",
                                  labelled_queries=demo_queries(store, limit=queries))
    path = report.write_html(out)
    echo(f"report written to {path} ({time.perf_counter() - started:.1f} s in all)")
    echo(f'explore it further: htm-analytics --db "{mask_url(url)}" tags (or robots, trends, '
         "tag-tree, indexes, bench recall), or the notebooks in notebooks/")
    return path


class DemoQueryEmbedder:
    """Embeds the bundled demo queries only, with their real precomputed MiniLM vectors.

    For demos and notebooks without a model: any other text raises
    :class:`~htm_analytics.EmbeddingError`. It answers as the model that made the vectors
    (all-MiniLM-L6-v2), so model checks pass; use a real provider for your own queries.
    """

    name = DEMO_MODEL_PROVIDER
    model = DEMO_MODEL
    dimensions = 384

    def __init__(self) -> None:
        _, _, queries, vectors = read_demo()
        self._vectors = dict(zip(queries["title"].tolist(), vectors))
        self.examples = list(self._vectors)

    def embed(self, texts: str | list[str]) -> np.ndarray:
        """The vector of one demo query (or a matrix for a list of them)."""
        single = isinstance(texts, str)
        items = [texts] if single else list(texts)
        missing = [t for t in items if t not in self._vectors]
        if missing:
            raise EmbeddingError(f"the demo embedder only knows the bundled demo queries, not "
                                 f"{missing[0]!r}; pass a real embedding provider")
        matrix = np.stack([self._vectors[t] for t in items])
        return matrix[0] if single else matrix
