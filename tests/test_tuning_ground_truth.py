"""The ground truth of the recall benchmarks: exact neighbours in memory and streamed, recall
counted over the neighbours there are (memories with fewer than k of them) and its interval,
and exact_neighbors' input refused by name."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from fixtures_db import temporary_database
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import htm_analytics as ha
import htm_analytics.tuning.benchmark as tuning
from htm_analytics import LongTermMemory, ValidationError


def test_the_recall_interval_is_students_t_over_the_queries() -> None:
    from scipy import stats

    recall = np.array([1.0, 0.9, 0.8, 1.0, 0.7, 1.0])
    low, high = stats.t.interval(0.95, len(recall) - 1, loc=recall.mean(),
                                 scale=stats.sem(recall))
    assert tuning._mean_interval(recall) == pytest.approx(
        {"recall_low": low, "recall_high": min(high, 1.0)})
    assert tuning._mean_interval(np.ones(5)) == {"recall_low": 1.0, "recall_high": 1.0}
    assert np.isnan(tuning._mean_interval(np.ones(1))["recall_low"])


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
