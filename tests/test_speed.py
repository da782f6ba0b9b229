"""The fast paths keep the behaviour: search connections, buffered recall writes, threads."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from htm_analytics import LongTermMemory

SETTINGS = ("SELECT current_setting('hnsw.ef_search') AS ef, "
            "current_setting('hnsw.iterative_scan') AS iterative, "
            "current_setting('enable_seqscan') AS seqscan")


def unit(rng: np.random.Generator, n: int, d: int = 8) -> np.ndarray:
    vectors = rng.normal(size=(n, d)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def loaded(database_url: str) -> tuple[LongTermMemory, np.ndarray, list[int]]:
    rng = np.random.default_rng(15)
    vectors = unit(rng, 60)
    store = LongTermMemory(database_url, pool_size=1, cache_size=0)
    frame = store.bulk_add([f"memory {i} about postgres tuning" for i in range(60)],
                           robots="speed-bot", embeddings=vectors,
                           tags=[["db:postgres"]] * 60, token_counts=[5] * 60)
    yield store, vectors, frame["node_id"].tolist()
    store.close()


def test_search_settings_stay_on_search_connections(loaded: tuple) -> None:
    store, vectors, ids = loaded
    now = dt.datetime.now(dt.UTC)
    # a larger ef_search and the iterative scan, for one transaction each
    wide = store.search(embedding=vectors[0], limit=50)
    store.search(embedding=vectors[0], limit=5, timeframe=(now - dt.timedelta(days=1), now))
    store.search_hybrid(query="postgres", embedding=vectors[0], fusion="rrf",
                        prefilter_limit=200)
    assert len(wide) == 50 and wide[0]["id"] == ids[0]  # limit > 40 still returns them all
    # pool_size=1: the only connection of each pool is the one the searches used
    assert store.fetch_frame(SETTINGS).iloc[0].tolist() == ["40", "off", "on"]
    with store._search_cursor() as cur:
        row = cur.execute(SETTINGS).fetchone()
    assert row == {"ef": "40", "iterative": "off", "seqscan": "off"}  # the session's


def test_default_search_is_one_traced_statement(database_url: str) -> None:
    seen: list[str] = []
    vector = unit(np.random.default_rng(1), 1)[0]
    with LongTermMemory(database_url, tracer=lambda text, *_: seen.append(text),
                        cache_size=0) as store:
        store.bulk_add(["one traced memory"], robots="trace-bot", embeddings=[vector])
        store.search(embedding=vector, limit=3)  # opens the search connection
        before = len(seen)
        rows = store.search(embedding=vector, limit=3)
        search_statements = seen[before:]
        store.search(embedding=vector, limit=41)
    assert rows[0]["content"] == "one traced memory"
    assert len(search_statements) == 1 and "<=>" in search_statements[0]
    assert any("hnsw.ef_search" in text for text in seen[before + 1:])  # set for ef 41
