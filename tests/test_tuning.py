"""Recall and index-build benchmarks on real MiniLM vectors from the corpus (their ground
truth, and recall over the neighbours there are: test_tuning_ground_truth.py)."""

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
