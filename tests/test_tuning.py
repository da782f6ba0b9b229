"""Recall and index-build benchmarks on real MiniLM vectors from the corpus."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
from fixtures_db import temporary_database
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import htm_analytics as ha
import htm_analytics.tuning.benchmark as tuning
from htm_analytics import LongTermMemory, ValidationError
from htm_analytics._progress import Progress
from htm_analytics.agent.datasets import read_corpus, read_dev_queries


@pytest.fixture(scope="module")
def vectors_url(server_url: str) -> Iterator[str]:
    """4,000 corpus rows with their real embeddings and a native 384-d index."""
    frame, vectors = read_corpus(rows=4000)
    with temporary_database(server_url, "htm_tuning") as url:
        with LongTermMemory(url) as store:
            store.bulk_add(frame["content"].tolist(), robots="indexer", embeddings=vectors,
                           tags=frame["tags"].tolist())
            store.create_native_index(384)
        yield url


@pytest.fixture
def store(vectors_url: str) -> Iterator[LongTermMemory]:
    # One pooled connection: whatever a benchmark leaves on it, the next query sees.
    with LongTermMemory(vectors_url, pool_size=1, cache_size=0) as live:
        yield live


def test_numpy_ground_truth_agrees_with_an_exact_sql_scan(store: LongTermMemory) -> None:
    with store.tuning_session() as session:
        ids, vectors = session.stored_vectors(384)
        queries = vectors[:25] + np.float32(0.01)  # near stored rows, not equal to them
        run = session.knn(queries, dimension=384, k=10, ef_search=40, exact=True)
    assert not run["used_index"]
    positions, distances = ha.exact_neighbors(queries, vectors, 10)
    for i, found in enumerate(run["ids"]):
        expected = ids[positions[i]]
        same = np.isin(found, expected).mean()
        # Ties at the k-th distance may order differently; distances must match regardless.
        assert same >= 0.9, (i, found, expected)
        order = np.searchsorted(ids, found)
        normalised = vectors[order] / np.linalg.norm(vectors[order], axis=1, keepdims=True)
        query = queries[i] / np.linalg.norm(queries[i])
        np.testing.assert_allclose(np.sort(1 - normalised @ query), distances[i], atol=1e-5)


def test_exact_search_has_recall_one(store: LongTermMemory) -> None:
    result = ha.benchmark_recall(store, queries=60, ef_search=40, exact=True, repeats=1,
                                 progress=False)
    assert result["recall_mean"].tolist() == [1.0]
    assert not result["used_index"].iloc[0]
    assert result[["latency_p50_spread_ms", "qps_spread"]].iloc[0].tolist() == [0.0, 0.0]


def test_recall_rises_with_ef_search(store: LongTermMemory) -> None:
    result = ha.benchmark_recall(store, queries=200, ef_search=(5, 10, 20, 40, 80, 160),
                                 repeats=2, progress=False)
    recall = result["recall_mean"].to_numpy()
    assert recall[0] < 0.7 and recall[-1] > 0.97, recall
    assert (np.diff(recall) >= -0.01).all(), recall
    assert result["used_index"].all() and (result["index"] == "idx_nodes_embedding_384").all()
    assert (result["latency_p50_ms"] <= result["latency_p95_ms"]).all()
    assert (result["latency_p95_ms"] <= result["latency_p99_ms"]).all()
    assert (result["latency_p50_spread_ms"] >= 0).all() and (result["qps_spread"] >= 0).all()
    # ef_search below the rows asked for (k + 1 for a held-out query) caps what comes back.
    low = result[result["ef_search"] == 5].iloc[0]
    assert low["ef_below_k"] and low["returned_mean"] <= 5
    assert result[["m", "ef_construction", "dimension"]].iloc[0].tolist() == [16, 64, 384]
    assert result["queries"].eq(200).all() and result["rows"].eq(len_vectors(store)).all()
    assert result["pgvector"].iloc[0] == store.server_info["pgvector_version"]
    # the mean's 95% interval over the queries holds it, and narrows as recall saturates
    assert (result["recall_low"] <= result["recall_mean"]).all()
    assert (result["recall_mean"] <= result["recall_high"]).all()
    width = (result["recall_high"] - result["recall_low"]).to_numpy()
    assert width[0] > width[-1] >= 0 and width[0] < 0.1


def test_the_recall_interval_is_students_t_over_the_queries() -> None:
    from scipy import stats

    recall = np.array([1.0, 0.9, 0.8, 1.0, 0.7, 1.0])
    low, high = stats.t.interval(0.95, len(recall) - 1, loc=recall.mean(),
                                 scale=stats.sem(recall))
    assert tuning._mean_interval(recall) == pytest.approx(
        {"recall_low": low, "recall_high": min(high, 1.0)})
    assert tuning._mean_interval(np.ones(5)) == {"recall_low": 1.0, "recall_high": 1.0}
    assert np.isnan(tuning._mean_interval(np.ones(1))["recall_low"])


def len_vectors(store: LongTermMemory) -> int:
    with store.tuning_session() as session:
        return session.vector_dimensions()[384]


def test_padded_index_is_measured_when_there_is_no_native_one(memory_url: str) -> None:
    with LongTermMemory(memory_url, pool_size=1) as padded:
        result = ha.benchmark_recall(padded, queries=50, ef_search=(20, 80), repeats=1,
                                     progress=False)
    assert (result["index"] == "idx_nodes_embedding").all() and result["used_index"].all()
    assert result["recall_mean"].iloc[-1] > 0.9


def test_filtered_search_stays_in_scope_and_iterative_scan_helps(store: LongTermMemory) -> None:
    tags = ha.popular_tags(store, limit=None)
    # A tag on about a tenth of the rows: a plain HNSW scan runs out of matching rows.
    tag = tags.loc[(tags["share"] > 0.05) & (tags["share"] < 0.15), "tag"].iloc[0]
    planned = ha.benchmark_recall(store, queries=40, ef_search=40, repeats=1,
                                  filters={"tag": tag}, progress=False)
    if not planned["used_index"].iloc[0]:  # the planner sorted the matching rows exactly
        assert planned["recall_mean"].iloc[0] == 1.0
    result = ha.benchmark_recall(store, queries=80, ef_search=(20, 40), repeats=1,
                                 filters=[{"tag": tag}, {"robot": "indexer"}],
                                 iterative_scan=(None, "relaxed_order"), force_index=True,
                                 progress=False)
    assert (result["outside_scope"] == 0).all() and result["force_index"].all()
    tagged = result[result["filter"] == f"tag={tag}"].set_index(["iterative_scan", "ef_search"])
    assert tagged["used_index"].all(), tagged
    plain, iterative = tagged.loc[("off", 40)], tagged.loc[("relaxed_order", 40)]
    assert plain["returned_mean"] < 10 <= iterative["returned_mean"] + 1e-9
    assert iterative["recall_mean"] > plain["recall_mean"] + 0.2
    assert tagged["rows"].iloc[0] < result[result["filter"] == "robot=indexer"]["rows"].iloc[0]
    # A filter nothing matches would measure a recall of 0: refused, by name.
    with pytest.raises(ha.ValidationError, match="matches no stored vector") as raised:
        ha.benchmark_recall(store, queries=10, filters={"tag": "no:such-tag"}, progress=False)
    assert raised.value.field == "filters"


def test_settings_never_leak_to_pooled_connections(store: LongTermMemory) -> None:
    ha.benchmark_recall(store, queries=10, ef_search=(7, 333), repeats=1,
                        iterative_scan="strict_order", progress=False)
    settings = store.fetch_frame("SELECT current_setting('hnsw.ef_search') AS ef, "
                                 "current_setting('hnsw.iterative_scan') AS iterative, "
                                 "current_setting('enable_seqscan') AS seqscan")
    assert settings.iloc[0].tolist() == ["40", "off", "on"]


def test_text_queries_are_embedded(store: LongTermMemory) -> None:
    titles, title_vectors = read_dev_queries(rows=30)

    class DevQueryEmbedder:  # stands for a provider: the titles' real MiniLM vectors
        lookup: ClassVar[dict[str, np.ndarray]] = dict(zip(titles["title"], title_vectors))

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.stack([self.lookup[t] for t in texts])

    result = ha.benchmark_recall(store, queries=titles["title"].tolist(), ef_search=80,
                                 embedder=DevQueryEmbedder(), repeats=1, progress=False)
    assert result["recall_mean"].iloc[0] > 0.9 and not result["ef_below_k"].iloc[0]
    with pytest.raises(ValidationError, match="embedder"):
        ha.benchmark_recall(store, queries=["a title"], progress=False)


def test_index_build_experiment_leaves_the_live_index_alone(store: LongTermMemory) -> None:
    before = store.index_list()
    result = ha.benchmark_index_build(store, m=(4, 16), ef_construction=(8, 32), queries=60,
                                      ef_search=(10, 40), progress=False)
    # (16, 8) and (16, 32)... only pairs with ef_construction >= 2m are built.
    assert sorted(result["variant"].unique()) == ["m=16,efc=32", "m=4,efc=32", "m=4,efc=8"]
    assert (result["build_seconds"] > 0).all() and (result["index_bytes"] > 0).all()
    assert result["used_index"].all()
    assert result["maintenance_work_mem"].iloc[0] == store.fetch_frame(
        "SHOW maintenance_work_mem").iloc[0, 0]
    assert result["max_parallel_maintenance_workers"].iloc[0] == int(store.fetch_frame(
        "SHOW max_parallel_maintenance_workers").iloc[0, 0])
    # Every variant holds all 4,000 vectors (1,536 bytes each at 384-d). Comparing sizes across
    # m is not stable: the vectors dominate the pages, so m=4 and m=16 often fill the same count.
    assert (result["index_bytes"] >= 4000 * 384 * 4).all()
    assert_frame_equal_ignoring_scans(before, store.index_list())
    leftovers = store.fetch_frame("SELECT relname FROM pg_class "
                                  "WHERE relname LIKE 'htm_analytics_bench%%'")
    assert leftovers.empty


def test_a_copy_is_dropped_when_its_connection_was_left_mid_statement(
        store: LongTermMemory) -> None:
    """A signal can land after a statement is sent and before its result is read (psycopg
    then cannot cancel it): the connection can no longer talk, and the copy went away with
    it only at the server's next restart. It is now dropped through another connection."""
    scratch = ("SELECT count(*) AS n FROM pg_class "
               "WHERE relname LIKE 'htm_analytics_bench%%'")
    with store.tuning_session() as session:
        session.copy_vectors(384)
        session.build_copy_index(m=4, ef_construction=8)
        assert session._conn.execute(scratch).fetchone()[0] == 2  # table and index
        session._conn.commit()
        # the state such a signal leaves: a statement sent, its result never read
        session._conn.pgconn.send_query(b"SELECT pg_sleep(60)")
    assert store.fetch_frame(scratch)["n"].iloc[0] == 0  # and the pool serves again


def assert_frame_equal_ignoring_scans(before: pd.DataFrame, after: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(before[["table", "index", "definition"]],
                                  after[["table", "index", "definition"]])


def test_results_are_written_and_plotted(store: LongTermMemory, tmp_path: Path) -> None:
    csv = tmp_path / "recall.csv"
    result = ha.benchmark_recall(store, queries=30, ef_search=(10, 40), repeats=1,
                                 iterative_scan=(None, "relaxed_order"), progress=False,
                                 output=csv)
    assert pd.read_csv(csv)["recall_mean"].tolist() == pytest.approx(
        result["recall_mean"].tolist())
    parquet = tmp_path / "recall.parquet"
    ha.benchmark_recall(store, queries=30, ef_search=10, repeats=1, progress=False,
                        output=parquet)
    assert pd.read_parquet(parquet)["ef_search"].tolist() == [10]

    ax = ha.plot_recall_latency(result)
    assert len(ax.lines) == 2 and ax.get_yscale() == "log"
    assert list(ax.lines[0].get_xdata()) == result.loc[
        result["iterative_scan"] == "off", "recall_mean"].tolist()
    ax = ha.plot_recall_by_ef(result)
    assert len(ax.lines) == 4  # mean and 5th percentile per curve


def test_interrupting_returns_what_finished(store: LongTermMemory,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    class StopAfter:
        def __init__(self, *_: object) -> None:
            self.seen = 0

        def update(self, n: int) -> None:
            self.seen += n
            if self.seen > 45:  # during the second setting
                raise KeyboardInterrupt

    @contextlib.contextmanager
    def stopping(*_: object, **__: object) -> Iterator[Progress]:
        yield Progress(StopAfter())

    monkeypatch.setattr(tuning, "progress_bar", stopping)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        result = ha.benchmark_recall(store, queries=30, ef_search=(10, 20, 40), repeats=1)
    assert result.attrs["interrupted"] and result["ef_search"].tolist() == [10]
    # The interrupted transaction was rolled back: the connection is clean and usable.
    assert store.fetch_frame("SHOW hnsw.ef_search").iloc[0, 0] == "40"


@pytest.mark.parametrize(("options", "field"), [
    ({"k": 0}, "k"),
    ({"ef_search": (10, 0)}, "ef_search"),
    ({"iterative_scan": "sometimes"}, "iterative_scan"),
    ({"filters": {"colour": "red"}}, "filters"),
    ({"filters": {"tag": "Bad Tag"}}, "filters"),
    ({"queries": 10**6}, "queries"),
    ({"queries": np.zeros((3, 5), dtype=np.float32)}, "queries"),
    ({"dimension": 768}, "dimension"),
    ({"output": "results.xlsx"}, "output"),
])
def test_bad_benchmark_options(store: LongTermMemory, options: dict, field: str,
                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(), pytest.raises(ValidationError) as info:
        ha.benchmark_recall(store, **{"queries": 5, "ef_search": 10, "repeats": 1,
                                      "progress": False, **options})
    assert info.value.field == field


def test_padded_index_can_be_compared_with_the_native_one(store: LongTermMemory) -> None:
    options = {"queries": 40, "ef_search": 40, "repeats": 1, "progress": False}
    native = ha.benchmark_recall(store, **options)
    padded = ha.benchmark_recall(store, padded_index=True, **options)
    assert native["index"].iloc[0] == "idx_nodes_embedding_384"
    assert padded["index"].iloc[0] == "idx_nodes_embedding" and padded["used_index"].iloc[0]
    assert padded["recall_mean"].iloc[0] > 0.9


def test_streamed_ground_truth_equals_the_in_memory_one() -> None:
    """The sweep's ground truth streams the stored vectors in batches (bounded memory); it
    must give exact_neighbors' distances, a query's own row left out."""
    from htm_analytics.tuning._ground_truth import streamed_neighbor_distances

    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(523, 16)).astype(np.float32)
    ids = np.arange(100, 623, dtype=np.int64)
    own = np.array([0, 17, 522, -1])
    queries = np.vstack([vectors[own[:3]], rng.normal(size=(1, 16)).astype(np.float32)])
    own_ids = np.where(own >= 0, ids[own], -1)
    _, expected = ha.exact_neighbors(queries, vectors, 10, exclude=own)
    batches = ((ids[i:i + 50], vectors[i:i + 50]) for i in range(0, len(ids), 50))
    streamed = streamed_neighbor_distances(queries, batches, 10, own_ids)
    np.testing.assert_allclose(streamed, expected, rtol=1e-9, atol=1e-12)


# -- recall against the neighbours there are, and input refused by name --------------------------

@contextlib.contextmanager
def tiny_memory(server_url: str, n: int, *, robots: list[str] | None = None
                ) -> Iterator[LongTermMemory]:
    """``n`` random 8-d vectors (fewer than k = 10 neighbours to find when n <= 10)."""
    vectors = np.random.default_rng(n).normal(size=(n, 8)).astype(np.float32)
    with temporary_database(server_url, "htm_tiny") as url, \
            LongTermMemory(url, pool_size=1, cache_size=0) as memory:
        memory.bulk_add([f"memory {i}" for i in range(n)], robots=robots or "r",
                        embeddings=vectors)
        yield memory


@pytest.mark.parametrize("n", [2, 3, 10, 11])
def test_recall_counts_the_neighbours_there_are(server_url: str, n: int) -> None:
    """With fewer than k other vectors, the exact search finds every one of them: recall 1,
    as ann-benchmarks computes it (hits over the true top-min(k, available)), not hits / k."""
    with tiny_memory(server_url, n) as memory:
        for exact in (True, False):
            result = ha.benchmark_recall(memory, queries=n, k=10, ef_search=40, exact=exact,
                                         repeats=1, progress=False)
            row = result.iloc[0]
            assert row["recall_mean"] == 1.0 and row["recall_p5"] == 1.0, (exact, row)
            assert row["returned_mean"] == min(10, n - 1)
        advice = ha.recommend_ef_search(memory, queries=n, k=10, repeats=1)
        # ef_search 10 returns 10 rows: a held-out query's 10 true neighbours and itself
        # need 11 (n = 11), fewer neighbours fit.
        assert advice.ef_search == (10 if n <= 10 else 20) and advice.recall == 1.0, \
            advice.evidence
        built = ha.benchmark_index_build(memory, m=4, ef_construction=8, queries=n,
                                         ef_search=40, progress=False)
        assert built["recall_mean"].tolist() == [1.0]


def test_recall_within_a_filter_counts_its_rows_and_skips_queries_without_any(
        server_url: str) -> None:
    robots = ["q"] * 5 + ["p"] * 4 + ["solo"]
    with tiny_memory(server_url, 10, robots=robots) as memory:
        scoped = ha.benchmark_recall(memory, queries=10, k=10, ef_search=40, exact=True,
                                     repeats=1, filters={"robot": "q"}, progress=False)
        assert scoped["recall_mean"].tolist() == [1.0] and scoped["rows"].tolist() == [5]
        # The one 'solo' vector has no other vector in its scope: its own query has nothing
        # to find (left out of the means), the nine others must find it.
        solo = ha.benchmark_recall(memory, queries=10, k=10, ef_search=40, exact=True,
                                   repeats=1, filters={"robot": "solo"}, progress=False)
        row = solo.iloc[0]
        assert [row["recall_mean"], row["recall_p5"], row["recall_low"],
                row["recall_high"]] == [1.0, 1.0, 1.0, 1.0]


def test_table_recall_counts_the_neighbours_there_are(server_url: str) -> None:
    """benchmark_recall(table=...) on 24 rows with k = 50: each held-out query has 23 true
    neighbours, and finding them all is recall 1 (it read 23 / 50 = 0.46)."""
    with tiny_memory(server_url, 24) as memory:
        result = ha.benchmark_recall(memory, table="nodes", k=50, queries=5, ef_search=40)
    assert result["recall_mean"].tolist() == [1.0] and result["k"].tolist() == [50]
    assert result["k"].dtype == "int64" and result["rows"].tolist() == [24]


def test_a_query_with_no_neighbour_at_all_is_refused(server_url: str) -> None:
    with tiny_memory(server_url, 1) as memory, pytest.raises(ValidationError) as raised:
        ha.benchmark_recall(memory, queries=1, k=10, ef_search=40, exact=True, repeats=1,
                            progress=False)
    assert raised.value.field == "queries" and "no query has any other" in str(raised.value)


def test_sampled_recall_counts_the_neighbours_there_are(server_url: str) -> None:
    from htm_analytics.tuning.sampled_recall import recall_per_query

    with tiny_memory(server_url, 5) as memory:
        with memory.tuning_session() as session:
            ids, vectors = session.stored_vectors(8)
        outside = np.random.default_rng(9).normal(size=(2, 8)).astype(np.float32)
        recall = recall_per_query(memory, np.vstack([vectors, outside]),
                                  np.concatenate([ids, [-1, -1]]), dimension=8, k=10,
                                  ef_search=40)
    assert recall.tolist() == [1.0] * 7


@given(n=st.integers(1, 30), k=st.integers(1, 40), seed=st.integers(0, 2**16),
       data=st.data())
@settings(max_examples=60)
def test_recall_is_hits_over_the_true_top_k(n: int, k: int, seed: int,
                                            data: st.DataObject) -> None:
    """Held-out queries over n vectors: returned rows score their hits (within the truth's
    farthest distance plus 1e-3, as ann-benchmarks counts them) over min(k, n - 1), the
    true neighbours there are; the true top itself scores 1; NaN without another vector."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, 6)).astype(np.float32)
    ids = np.arange(10, 10 + n, dtype=np.int64)
    positions, distances = ha.exact_neighbors(vectors, vectors, k, exclude=np.arange(n))
    drawn = [ids[data.draw(st.lists(st.sampled_from(range(n)), unique=True, max_size=k + 1))]
             for _ in range(n)]
    exact = [ids[row[row >= 0]] for row in positions]
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    truth = streamed_truth(vectors, ids, k)

    def recall_of(found: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        recall, returned, outside = tuning._recall(
            found, ids, truth, unit.astype(np.float64),
            lambda wanted: (wanted, vectors[np.searchsorted(ids, wanted)]), k)
        assert outside == 0
        return recall, returned

    assert np.isnan(recall_of(exact)[0]).all() if n == 1 else \
        (recall_of(exact)[0] == 1.0).all()
    recall, returned = recall_of(drawn)
    cosine = 1.0 - unit.astype(np.float64) @ unit.astype(np.float64).T
    for i in range(n):
        kept = drawn[i][drawn[i] != ids[i]][:k]
        assert returned[i] == len(kept)
        if n == 1:
            assert np.isnan(recall[i])
            continue
        available = np.isfinite(distances[i])
        assert available.sum() == min(k, n - 1)
        hits = (cosine[i, kept - 10] <= distances[i][available][-1] + 1e-3).sum()
        assert recall[i] == pytest.approx(hits / min(k, n - 1))


def streamed_truth(vectors: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    from htm_analytics.tuning._ground_truth import streamed_neighbor_distances

    return streamed_neighbor_distances(vectors, [(ids, vectors)], k, ids)


@pytest.mark.parametrize(("options", "field"), [
    ({"queries": np.zeros((2, 384), dtype=np.float32)}, "queries"),  # cosine undefined
    ({"queries": np.zeros((0, 384), dtype=np.float32)}, "queries"),
    ({"queries": np.array([["a"] * 384] * 2)}, "queries"),
    ({"queries": np.full((2, 384), 1 + 1j)}, "queries"),
    ({"queries": 2.5}, "queries"),
    ({"queries": True}, "queries"),
    ({"queries": "a title"}, "queries"),
    ({"queries": object()}, "queries"),
    ({"ef_search": 40.0}, "ef_search"),
    ({"ef_search": []}, "ef_search"),
    ({"ef_search": "40"}, "ef_search"),
    ({"filters": "tag"}, "filters"),
    ({"filters": []}, "filters"),
    ({"filters": [{"tag": "devel"}, 3]}, "filters"),
    ({"iterative_scan": []}, "iterative_scan"),
    ({"iterative_scan": 2.0}, "iterative_scan"),
    ({"dimension": 8.0}, "dimension"),
    ({"probes": 3}, "probes"),
    ({"seed": "x"}, "seed"),
    ({"repeats": True}, "repeats"),
    ({"table": "nodes", "ef_search": []}, "ef_search"),
    ({"table": "nodes", "probes": 3}, "probes"),
    ({"table": "nodes", "filters": {"tag": "devel"}}, "filters"),
])
def test_more_bad_benchmark_options(store: LongTermMemory, options: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        ha.benchmark_recall(store, **{"queries": 5, "ef_search": 10, "repeats": 1,
                                      "progress": False, **options})
    assert info.value.field == field


def test_an_embedder_must_answer_every_text(store: LongTermMemory) -> None:
    class OneVector:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((1, 384), dtype=np.float32)

    with pytest.raises(ha.EmbeddingError) as raised:
        ha.benchmark_recall(store, queries=["x", "y"], embedder=OneVector(), progress=False)
    assert isinstance(raised.value, ValidationError) and raised.value.field == "embedder"


@pytest.mark.parametrize(("call", "field"), [
    (lambda s: ha.benchmark_index_build(s, m=4.0, ef_construction=32, progress=False), "m"),
    (lambda s: ha.benchmark_index_build(s, ef_construction=[], progress=False),
     "ef_construction"),
    (lambda s: ha.benchmark_index_build(s, dimension=8.0, progress=False), "dimension"),
    (lambda s: ha.benchmark_index_build(s, queries=np.zeros((1, 384)), progress=False),
     "queries"),
    (lambda s: ha.recommend_ef_search(s, queries=5, repeats=1, ef_search=[]), "ef_search"),
    (lambda s: ha.recommend_ef_search(s, queries=1.5, repeats=1), "queries"),
    (lambda s: ha.recommend_ef_search(s, target_recall=float("nan")), "target_recall"),
    (lambda s: ha.recommend_ef_search(s, k=0), "k"),
    (lambda s: ha.concurrency_sweep(s, ef_search=40.0), "ef_search"),
    (lambda s: ha.concurrency_sweep(s, ef_search=40, threads=[]), "threads"),
    (lambda s: ha.concurrency_sweep(s, ef_search=40, threads="2"), "threads"),
    (lambda s: ha.concurrency_sweep(s, ef_search=40, seed=1.5), "seed"),
])
def test_bad_tuning_options_are_named(store: LongTermMemory, call: object,
                                      field: str) -> None:
    with pytest.raises(ValidationError) as info:
        call(store)  # type: ignore[operator]
    assert info.value.field == field


def test_one_thread_count_is_a_sweep_of_one(store: LongTermMemory) -> None:
    result = ha.concurrency_sweep(store, ef_search=40, threads=2, queries=6, repeats=1)
    assert result["threads"].tolist() == [2] and result["queries"].tolist() == [6]


@pytest.mark.parametrize("frame", [None, pd.DataFrame(), [1, 2],
                                   pd.DataFrame({"threads": [1], "qps": [1.0]}),
                                   pd.DataFrame(columns=["threads", "qps", "qps_spread",
                                                         "repeats", "speedup",
                                                         "latency_p95_ms"])])
def test_describe_concurrency_names_a_frame_it_cannot_read(frame: object) -> None:
    with pytest.raises(ValidationError) as info:
        ha.describe_concurrency(frame)  # type: ignore[arg-type]
    assert info.value.field == "df"


_VECTORS = np.random.default_rng(1).normal(size=(20, 4)).astype(np.float32)


@pytest.mark.parametrize(("arguments", "field"), [
    ({"k": -1}, "k"),
    ({"k": 2.0}, "k"),
    ({"k": True}, "k"),
    ({"queries": np.ones((3, 5), np.float32)}, "queries"),
    ({"queries": np.ones(4, np.float32)}, "queries"),
    ({"queries": np.array([["a"] * 4])}, "queries"),
    ({"queries": [[np.nan, 1, 1, 1]]}, "queries"),
    ({"queries": np.zeros((1, 4))}, "queries"),
    ({"queries": np.full((1, 4), 1j)}, "queries"),
    ({"vectors": np.zeros((0, 4), np.float32)}, "vectors"),
    ({"vectors": [[np.inf, 1, 1, 1]]}, "vectors"),
    ({"vectors": "abcd"}, "vectors"),
    ({"exclude": np.array([25, 0, 0])}, "exclude"),
    ({"exclude": np.array([-2, 0, 0])}, "exclude"),
    ({"exclude": np.array([0, 1])}, "exclude"),
    ({"exclude": np.array([0.5, 1, 2])}, "exclude"),
    ({"batch": 0}, "batch"),
])
def test_exact_neighbors_refuses_bad_input_by_name(arguments: dict, field: str) -> None:
    call = {"queries": _VECTORS[:3], "vectors": _VECTORS, "k": 5, **arguments}
    with pytest.raises(ValidationError) as info:
        ha.exact_neighbors(**call)
    assert info.value.field == field


def test_exact_neighbors_never_returns_an_excluded_row() -> None:
    positions, distances = ha.exact_neighbors(_VECTORS[:3], _VECTORS[:3], 5,
                                              exclude=np.array([0, -1, 2]))
    assert positions.shape == (3, 3)
    assert positions[0, -1] == -1 and np.isinf(distances[0, -1])
    assert (positions[1] >= 0).all() and np.isfinite(distances[1]).all()
    assert 0 not in positions[0] and 2 not in positions[2]


_DTYPES = st.sampled_from(["float32", "float64", "int64", "bool", "complex128", "U3", "O"])


@given(queries=hnp.arrays(_DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                     max_side=4)),
       vectors=hnp.arrays(_DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                     max_side=4)),
       k=st.one_of(st.integers(-2, 6), st.floats(allow_nan=True), st.booleans()),
       batch=st.one_of(st.integers(-1, 3), st.just(2.0)))
@settings(max_examples=300)
def test_exact_neighbors_answers_or_names_the_input(queries: np.ndarray, vectors: np.ndarray,
                                                    k: object, batch: object) -> None:
    """Whatever arrays come in: neighbours, or a ValidationError naming one argument."""
    try:
        with np.errstate(all="ignore"):
            positions, distances = ha.exact_neighbors(queries, vectors, k,  # type: ignore[arg-type]
                                                      batch=batch)  # type: ignore[arg-type]
    except ValidationError as error:
        assert error.field in {"queries", "vectors", "k", "batch"}
        return
    assert positions.shape == distances.shape == (len(queries), min(int(k), len(vectors)))
    assert np.isfinite(distances).all() and (positions >= 0).all()
