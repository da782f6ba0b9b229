"""The retrieval harness on real labelled queries (dev titles whose answer is in the 1,200
loaded corpus rows), checked against metrics computed here from the store's own results."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import htm_analytics as ha
from htm_analytics.agent.datasets import read_corpus, read_dev_queries
from htm_analytics.cli import cli
from htm_analytics.store.lexical import search_fulltext_any_bounded


@pytest.fixture(scope="module")
def store(memory_url: str) -> Iterator[ha.LongTermMemory]:
    with ha.LongTermMemory(memory_url, cache_size=0) as live:
        yield live


@pytest.fixture(scope="module")
def labelled(store: ha.LongTermMemory) -> pd.DataFrame:
    frame, _ = read_corpus(rows=1200, embeddings=False)
    queries, vectors = read_dev_queries()
    inside = (queries["row"] < 1200).to_numpy()
    queries, vectors = queries[inside].reset_index(drop=True), vectors[inside]
    ids = store.node_ids_by_content(frame["content"].iloc[queries["row"]].tolist())
    assert None not in ids
    return pd.DataFrame({"query": queries["title"], "relevant": ids, "vector": list(vectors)})


def _expected(store: ha.LongTermMemory, labelled: pd.DataFrame, strategy: str,
              k: int) -> dict[str, float]:
    """Recall@1/k and MRR@k straight from the store's result lists."""
    ranks = []
    for row in labelled.itertuples():
        found = [r["id"] for r in store.search_by_strategy(
            strategy, query=row.query, limit=k, embedding=row.vector)]
        ranks.append(found.index(row.relevant) + 1 if row.relevant in found else 0)
    ranks = np.asarray(ranks)
    return {"recall_at_1": float((ranks == 1).mean()), f"recall_at_{k}": float((ranks > 0).mean()),
            f"mrr_at_{k}": float(np.where(ranks > 0, 1 / np.maximum(ranks, 1), 0).mean()),
            "first": ranks}


def test_metrics_match_the_results_the_store_returns(store: ha.LongTermMemory,
                                                     labelled: pd.DataFrame) -> None:
    result = ha.evaluate_retrieval(store, labelled, strategies=["vector", "fulltext"], k=10)
    summary = result.summary.set_index("strategy")
    assert list(summary.index) == ["vector", "fulltext"]
    assert len(labelled) == 83 and (summary["queries"] == 83).all()
    for strategy in ("vector", "fulltext"):
        expected = _expected(store, labelled, strategy, 10)
        for metric in ("recall_at_1", "recall_at_10", "mrr_at_10"):
            assert summary.loc[strategy, metric] == pytest.approx(expected[metric])
        # With one relevant memory, nDCG@10 is 1 / log2(1 + rank).
        ndcg = np.where(expected["first"] > 0, 1 / np.log2(1 + np.maximum(expected["first"], 1)),
                        0).mean()
        assert summary.loc[strategy, "ndcg_at_10"] == pytest.approx(ndcg)
        ranks = result.per_query.query("strategy == @strategy")["first_relevant_rank"]
        assert ranks.fillna(0).astype(int).tolist() == expected["first"].tolist()
    # Real vectors beat every-word full text, which often finds nothing; both are measured.
    assert summary.loc["vector", "recall_at_10"] > summary.loc["fulltext", "recall_at_10"] + 0.2
    assert summary.loc["fulltext", "no_result"] > 0.3
    assert (summary["latency_p95_ms"] >= summary["latency_p50_ms"]).all()
    assert result.per_query["first_relevant_rank"].dtype == "Int64"
    pair = result.significance.query("metric == 'recall_at_10'").iloc[0]
    assert (pair["strategy_a"], pair["strategy_b"]) == ("vector", "fulltext")
    assert pair["difference"] == pytest.approx(summary.loc["vector", "recall_at_10"]
                                               - summary.loc["fulltext", "recall_at_10"])
    assert pair["significant"] and pair["p_value_holm"] >= pair["p_value"]


def test_graded_and_many_relevant(store: ha.LongTermMemory, labelled: pd.DataFrame) -> None:
    """Graded judgements: nDCG uses the grades, recall counts every relevant memory."""
    row = labelled.iloc[0]
    found = [r["id"] for r in store.search(embedding=row["vector"], limit=10)]
    second, absent = found[1], 10**9
    queries = pd.DataFrame({"query": [row["query"]],
                            "relevant": [json.dumps({str(second): 2, str(absent): 1})],
                            "vector": [row["vector"]]})
    result = ha.evaluate_retrieval(store, queries, strategies=["vector"], k=10)
    summary = result.summary.iloc[0]
    # trec_eval's nDCG: the grade itself is the gain, discounted by log2(1 + rank).
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert summary["ndcg_at_10"] == pytest.approx(2 / math.log2(3) / ideal)
    assert summary["recall_at_10"] == pytest.approx(0.5)  # one of two relevant found
    assert summary["mrr_at_10"] == pytest.approx(0.5)
    assert result.per_query["first_relevant_rank"].iloc[0] == 2
    assert result.missing_relevant == (absent,)  # said, not only scored


def test_bad_input_is_named(store: ha.LongTermMemory, labelled: pd.DataFrame) -> None:
    with pytest.raises(ha.ValidationError) as error:
        ha.evaluate_retrieval(store, labelled, strategies=["telepathy"])
    assert error.value.field == "strategies"
    with pytest.raises(ha.ValidationError) as error:
        ha.evaluate_retrieval(store, labelled.drop(columns="vector"), strategies=["vector"])
    assert error.value.field == "vector"
    for wrong in ("twelve", "[-1]", "[true]", "[0]"):  # not node ids (True is no id 1)
        with pytest.raises(ha.ValidationError) as error:
            ha.evaluate_retrieval(store, labelled.assign(relevant=wrong),
                                  strategies=["fulltext"])
        assert error.value.field == "relevant"
    with pytest.raises(ha.ValidationError) as error:
        ha.evaluate_retrieval(store, labelled.rename(columns={"query": "text"}))
    assert error.value.field == "queries"


def test_cli_reads_jsonl_and_csv(memory_url: str, store: ha.LongTermMemory,
                                 labelled: pd.DataFrame, tmp_path: Path) -> None:
    sample = labelled.head(20)
    jsonl = tmp_path / "queries.jsonl"
    jsonl.write_text("".join(json.dumps({"query": r.query, "relevant": [int(r.relevant)],
                                         "vector": [float(v) for v in r.vector]}) + "\n"
                             for r in sample.itertuples()))
    csv = tmp_path / "queries.csv"
    sample[["query", "relevant"]].to_csv(csv, index=False)
    array = tmp_path / "queries.json"
    array.write_text(json.dumps([{"query": r.query, "relevant": {str(r.relevant): 1}}
                                 for r in sample.itertuples()]))
    parquet = tmp_path / "queries.parquet"
    # ids as integers, lists and maps of grades; vectors as lists of floats
    pq.write_table(pa.table({
        "query": sample["query"].tolist(),
        "relevant": pa.array([[(int(r), 1)] for r in sample["relevant"]],
                             type=pa.map_(pa.int64(), pa.int32())),
        "vector": [list(map(float, v)) for v in sample["vector"]]}), parquet)
    listed = tmp_path / "listed.parquet"
    pd.DataFrame({"query": sample["query"], "relevant": [[int(r)] for r in sample["relevant"]]}
                 ).to_parquet(listed)
    expected = _expected(store, sample, "fulltext_any", 10)
    runner = CliRunner()
    for path, strategies in ((jsonl, "vector,fulltext_any"), (csv, "fulltext_any"),
                             (array, "fulltext_any"), (parquet, "vector,fulltext_any"),
                             (listed, "fulltext_any")):
        result = runner.invoke(cli, ["--db", memory_url, "eval", "retrieval", str(path),
                                     "--strategies", strategies, "--json"])
        assert result.exit_code == 0, result.output
        rows = {r["strategy"]: r for r in json.loads(result.stdout)}
        assert rows["fulltext_any"]["mrr_at_10"] == pytest.approx(expected["mrr_at_10"])
    assert rows.keys() == {"fulltext_any"}
    repeated = runner.invoke(cli, ["--db", memory_url, "eval", "retrieval", str(csv),
                                   "--strategies", "fulltext_any", "--repeats", "3", "--json"])
    (row,) = json.loads(repeated.stdout)
    assert row["repeats"] == 3 and row["latency_p50_spread_ms"] >= 0
    assert row["mrr_at_10"] == pytest.approx(expected["mrr_at_10"])
    no_vectors = runner.invoke(cli, ["--db", memory_url, "eval", "retrieval", str(csv),
                                     "--strategies", "vector"])
    assert no_vectors.exit_code != 0


def test_plot_retrieval_and_short_form(store: ha.LongTermMemory,
                                       labelled: pd.DataFrame) -> None:
    sample = labelled.head(15)
    quality = ha.retrieval_quality(store, sample["query"].tolist(),
                                   np.stack(sample["vector"]), sample["relevant"].tolist(),
                                   strategies=("vector",))
    expected = _expected(store, sample, "vector", 10)
    assert quality["recall_at_k"].iloc[0] == pytest.approx(expected["recall_at_10"])
    assert quality["mrr"].iloc[0] == pytest.approx(expected["mrr_at_10"])
    summary = ha.evaluate_retrieval(store, sample, strategies=["vector", "fulltext"]).summary
    ax = ha.plot_retrieval(summary)
    assert len(ax.collections) == 2 and ax.get_xscale() == "log"
    assert ax.texts[0].get_text().startswith("vector (R@10 ")


# -- the vector + BM25 strategy and bounded any-word full text ---------------------------------

def test_vector_bm25_beats_each_arm_on_real_queries(store: ha.LongTermMemory,
                                                    labelled: pd.DataFrame) -> None:
    summary = ha.evaluate_retrieval(store, labelled, strategies=["vector", "fulltext_any", "rrf",
                                                                 "vector_bm25"]).summary
    quality = summary.set_index("strategy")["mrr_at_10"]
    assert quality["vector_bm25"] > max(quality["vector"], quality["fulltext_any"],
                                        quality["rrf"])
    assert "vector_bm25" in ha.store.SEARCH_STRATEGIES


def test_vector_bm25_scores(store: ha.LongTermMemory, labelled: pd.DataFrame) -> None:
    frame, vectors = read_corpus(rows=1200)
    by_id = dict(zip(store.node_ids_by_content(frame["content"].tolist()), vectors))
    for row in labelled.head(5).itertuples():
        # Without the conversation terms (test_conversations_recall.py checks those exactly).
        rows = store.search_vector_bm25(query=row.query, embedding=row.vector, limit=10,
                                        neighbours=0, speaker_boost=0, date_boost=0)
        scores = [r["score"] for r in rows]
        assert scores == sorted(scores, reverse=True) and len(rows) == 10
        for r in rows:  # similarity is the exact cosine, bm25 lifts the score
            vector = by_id[r["id"]]
            expected = vector @ row.vector / np.linalg.norm(vector) / np.linalg.norm(row.vector)
            assert r["similarity"] == pytest.approx(float(expected), abs=1e-5)
            assert r["similarity"] <= r["score"] <= r["similarity"] + 0.5 + 1e-9
        best_text = max(rows, key=lambda r: r["bm25"])
        if best_text["bm25"] > 0:
            assert best_text["score"] == pytest.approx(best_text["similarity"] + 0.5)
        # Without the lexical weight it is a nearest-neighbour search (exact at this size).
        plain = store.search_vector_bm25(query=row.query, embedding=row.vector, limit=10,
                                         alpha=0, neighbours=0, speaker_boost=0, date_boost=0)
        ids = np.array(list(by_id))
        matrix = np.stack(list(by_id.values()))
        cosines = matrix @ row.vector / np.linalg.norm(matrix, axis=1)
        order = np.lexsort((ids, -cosines.round(5)))  # ties (same vector) by id, as the store
        assert [r["id"] for r in plain] == ids[order[:10]].tolist()
    with pytest.raises(ha.ValidationError) as error:
        store.search_vector_bm25(query="x", embedding=labelled["vector"][0], alpha=-1)
    assert error.value.field == "alpha"


def test_bounded_any_word_full_text_ranks_like_the_reference(store: ha.LongTermMemory,
                                                             labelled: pd.DataFrame) -> None:
    """With a budget above every match, the bounded ranking is the reference ranking; a
    small budget reads only the memories holding the rarest word."""
    reference = """
        SELECT n.id FROM nodes n JOIN node_search_vectors sv ON sv.node_id = n.id
        CROSS JOIN (SELECT replace(plainto_tsquery('english', %(q)s)::text, ' & ', ' | ')
                           ::tsquery AS q) t
        WHERE sv.content_tsv @@ q ORDER BY ts_rank(sv.content_tsv, q) DESC, n.id LIMIT 10"""
    for query in labelled["query"].head(5):
        expected = store.fetch_frame(reference, {"q": query})["id"].tolist()
        bounded = search_fulltext_any_bounded(store, query, 10, None, 100_000)
        assert [r["id"] for r in bounded] == expected
        assert [r["id"] for r in store.search_fulltext(query=query, match="any",
                                                       limit=10)] == \
            [r["id"] for r in search_fulltext_any_bounded(store, query, 10, None)]
