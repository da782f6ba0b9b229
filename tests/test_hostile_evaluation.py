"""Hostile labelled queries at the search-quality evaluation (``evaluate_retrieval``,
``read_labelled_queries``, ``htm-analytics eval retrieval``) and at ``htm-analytics bench``.

The rules checked: the metrics equal a direct computation from the store's own result lists
(ties included); bad input is refused with a ``ValidationError`` naming the argument or field
(on the command line: one line and exit 1, or a usage error and exit 2); an evaluation
writes nothing. The database is real (one per module, shared by the examples).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import run_main
from fixtures_db import temporary_database
from hostile_helpers import counts
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from htm_analytics import LongTermMemory, ValidationError
from htm_analytics.tuning.evaluation import (
    evaluate_retrieval,
    read_labelled_queries,
    retrieval_quality,
)
from htm_analytics.tuning.labelled_queries import relevance

# Two memories share a vector and every content holds "memory": ties in both searches.
VECTORS = [[1, 0, 0, 0], [0.9, 0.1, 0, 0], [0.9, 0.1, 0, 0], [0, 1, 0, 0], [0, 0.8, 0.6, 0],
           [0, 0, 1, 0], [0.5, 0.5, 0.5, 0.5], [0, 0, 0, 1]]
QUERY_VECTORS = [np.array([1.0, 0.2, 0.1, 0.0]), np.array([0.1, 0.3, 0.9, 0.2]),
                 np.array([0.4, 0.4, 0.1, 0.6])]
STRATEGIES = ["vector", "fulltext_any"]
ABSENT = 10**6  # an id no memory has
CHECKED = settings(max_examples=25, deadline=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow])


@pytest.fixture(scope="module")
def url(server_url: str) -> Iterator[str]:
    with temporary_database(server_url, "htm_hostile_eval") as database:
        yield database


@pytest.fixture(scope="module")
def store(url: str) -> Iterator[LongTermMemory]:
    with LongTermMemory(url, cache_size=0) as memory:
        robot = memory.register_robot("evaluator")
        for number, vector in enumerate(VECTORS):
            memory.add(content=f"memory {number} about {'postgres' if number % 2 else 'robots'}",
                       robot_id=robot, embedding=vector, tags=["topic:a"])
        yield memory


@pytest.fixture(scope="module")
def ids(store: LongTermMemory) -> list[int]:
    return sorted(int(i) for i in store.fetch_frame("SELECT id FROM nodes")["id"])


def _direct(ranked: list[int], grades: dict[int, int], k: int) -> dict[str, float]:
    """Recall@1/5/k, MRR@k and nDCG@k (the grade as the gain, grades <= 0 gain nothing)."""
    relevant = {node for node, grade in grades.items() if grade > 0}
    top = ranked[:k]
    metrics = {f"recall_at_{c}": len(relevant & set(top[:c])) / len(relevant)
               for c in {1, 5, k} if c <= k}
    first = next((rank for rank, node in enumerate(top, 1) if node in relevant), None)
    metrics[f"mrr_at_{k}"] = 1 / first if first else 0.0
    dcg = sum(max(grades.get(node, 0), 0) / math.log2(rank + 1)
              for rank, node in enumerate(top, 1))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    metrics[f"ndcg_at_{k}"] = dcg / sum(g / math.log2(r + 1) for r, g in enumerate(ideal, 1))
    metrics["first"] = first or 0
    return metrics


judgements = st.lists(st.tuples(st.integers(0, len(VECTORS)), st.integers(-2, 3)),
                      min_size=1, max_size=4)


@CHECKED
@given(judged=st.lists(judgements, min_size=1, max_size=3), k=st.integers(1, 10),
       as_text=st.booleans())
@example(judged=[[(0, 4294967295), (1, 1)]], k=10, as_text=True)  # wrapped round to -1
@example(judged=[[(0, 2.7), (1, 1)]], k=10, as_text=False)  # was taken as grade 2
# trec_eval allocates per grade up to the highest: 2**31 - 1 took 45 s and gigabytes.
@example(judged=[[(0, 10**6), (1, 1)]], k=10, as_text=True)
@example(judged=[[(0, 1000), (1, 1), (2, -1000), (8, 3)]], k=3, as_text=True)
def test_metrics_match_a_direct_computation(store: LongTermMemory, url: str, ids: list[int],
                                            judged: list[list[tuple[int, Any]]], k: int,
                                            as_text: bool) -> None:
    before = counts(url)
    grades = [{[*ids, ABSENT][i]: grade for i, grade in pairs} for pairs in judged]
    texts = ["memory postgres", "robots", "memory about"][:len(grades)]
    relevant = [json.dumps({str(n): g for n, g in row.items()}) if as_text else row
                for row in grades]
    frame = pd.DataFrame({"query": texts, "relevant": relevant,
                          "vector": pd.Series(QUERY_VECTORS[:len(grades)], dtype=object)})
    valid = all(isinstance(g, int) and abs(g) <= 1000 for row in grades for g in row.values())
    if not valid or not all(any(g > 0 for g in row.values()) for row in grades):
        with pytest.raises(ValidationError) as error:
            evaluate_retrieval(store, frame, strategies=STRATEGIES, k=k)
        assert error.value.field == "relevant"
        assert counts(url) == before
        return
    result = evaluate_retrieval(store, frame, strategies=STRATEGIES, k=k)
    assert counts(url) == before  # an evaluation only reads
    labelled = {n for row in grades for n in row}
    assert result.missing_relevant == ((ABSENT,) if ABSENT in labelled else ())
    for strategy in STRATEGIES:
        rows = result.per_query.query("strategy == @strategy").reset_index(drop=True)
        expected = []
        for position, row in enumerate(grades):
            ranked = [r["id"] for r in store.search_by_strategy(
                strategy, query=texts[position], limit=k, embedding=QUERY_VECTORS[position])]
            assert rows["retrieved"][position] == ranked  # the store's order, ties included
            expected.append(_direct(ranked, row, k))
            assert (rows["first_relevant_rank"].fillna(0)[position]
                    == expected[-1]["first"])
        summary = result.summary.set_index("strategy").loc[strategy]
        for metric in expected[0]:
            if metric != "first":
                assert rows[metric].tolist() == pytest.approx([e[metric] for e in expected])
                assert summary[metric] == pytest.approx(np.mean([e[metric] for e in expected]))


@pytest.mark.parametrize("relevant", [
    "[Infinity]", float("inf"), float("nan"), "[-1]", "[true]", 2**63, "[9223372036854775808]",
    1e30, 12.5, '{"1": 2.7}', '{"1": 1e30}', '{"1": 1001}', '{"1": 2, "2": -1001}',
    json.dumps({"1": 2**40}), '{"1": "two"}',
    "[" * 5000, "1" * 5000, "[[1, 2]]", '{"1": null}', None, "", "[]", '{"1": 0}',
])
def test_bad_relevant_ids_are_refused_by_name(store: LongTermMemory, url: str,
                                              relevant: Any) -> None:
    before = counts(url)
    frame = pd.DataFrame({"query": ["memory"], "relevant": pd.Series([relevant], dtype=object)})
    with pytest.raises(ValidationError) as error:
        evaluate_retrieval(store, frame, strategies=["fulltext_any"])
    assert error.value.field == "relevant" and "row 0" in str(error.value)
    assert counts(url) == before


def test_relevant_ids_in_their_usual_spellings_are_read(store: LongTermMemory,
                                                        ids: list[int]) -> None:
    node = ids[0]
    spellings = [node, str(node), float(node), np.int64(node), f"[{node}]", f"{node}.0",
                 f'{{"{node}": 2}}', {str(node): "2"}, (node,)]
    frame = pd.DataFrame({"query": ["memory"] * len(spellings),
                          "relevant": pd.Series(spellings, dtype=object)})
    result = evaluate_retrieval(store, frame, strategies=["fulltext_any"])
    assert result.per_query["recall_at_10"].tolist() == [1.0] * len(spellings)


@pytest.mark.parametrize(("change", "field"), [
    ({"query": [None]}, "query"), ({"query": [pd.NA]}, "query"), ({"query": [5]}, "query"),
    ({"query": [["memory"]]}, "query"), ({"query": ["a\ud800b"]}, "query"),
    ({"vector": ["abc"]}, "vector"), ({"vector": ["[" * 5000]}, "vector"),
])
def test_bad_query_texts_and_vectors_are_refused(store: LongTermMemory, url: str,
                                                 change: dict[str, list[Any]],
                                                 field: str) -> None:
    """A missing query was searched for as the text "None" or "<NA>"; a lone surrogate made
    pyarrow fail building the frame, bad vector JSON raised JSONDecodeError."""
    columns = {"query": ["memory"], "relevant": [1], "vector": [QUERY_VECTORS[0]]} | change
    frame = pd.DataFrame({name: pd.Series(values, dtype=object)
                          for name, values in columns.items()})
    before = counts(url)
    with pytest.raises(ValidationError) as error:
        evaluate_retrieval(store, frame, strategies=["vector"])
    assert error.value.field == field
    assert counts(url) == before


@pytest.mark.parametrize("strategies", [[1, "telepathy"], [["vector"]], None, [], 7])
def test_bad_strategies_are_refused(store: LongTermMemory, strategies: Any) -> None:
    frame = pd.DataFrame({"query": ["memory"], "relevant": [1]})
    with pytest.raises(ValidationError) as error:
        evaluate_retrieval(store, frame, strategies=strategies)
    assert error.value.field == "strategies"
    twice = pd.concat([frame, frame[["query"]]], axis=1)  # was an IndexError
    with pytest.raises(ValidationError) as error:
        evaluate_retrieval(store, twice, strategies=["fulltext_any"])
    assert error.value.field == "queries"


def test_one_query_is_no_evidence_of_a_difference(store: LongTermMemory,
                                                  ids: list[int]) -> None:
    """One query gave p = 0 and 'significant' whenever two strategies differed on it."""
    ranked = [r["id"] for r in store.search(embedding=QUERY_VECTORS[0], limit=10)]
    text = [r["id"] for r in store.search_fulltext(query="memory", match="any", limit=10)]
    wanted = next(n for n in ranked if ranked.index(n) != text.index(n))
    frame = pd.DataFrame({"query": ["memory"], "relevant": [wanted],
                          "vector": [QUERY_VECTORS[0]]})
    one = evaluate_retrieval(store, frame, strategies=STRATEGIES).significance
    mrr = one.query("metric == 'mrr_at_10'").iloc[0]
    assert mrr["difference"] != 0
    assert one["p_value"].isna().all() and one["p_value_holm"].isna().all()
    assert not one["significant"].any()
    two = evaluate_retrieval(store, pd.concat([frame, frame], ignore_index=True),
                             strategies=STRATEGIES).significance
    assert two["p_value"].notna().all()  # the same difference twice: a test is made


FILES: dict[str, tuple[bytes | str, str | None]] = {
    # name: (content, the field refused, or None when read)
    "bom.jsonl": ("\ufeff" + json.dumps({"query": "memory", "relevant": 1}) + "\n", None),
    "bom.csv": ("\ufeffquery,relevant\nmemory,1\n", None),
    "blank-lines.jsonl": ("\n" + json.dumps({"query": "memory", "relevant": [1]}) + "\n\n", None),
    "longer-row.csv": ("query,relevant\nmemory,1,2\n", "path"),  # was read shifted: query '1'
    "not-objects.jsonl": ("[1, 2]\n3\n", "path"),  # was a TypeError
    "array.json": (json.dumps([{"query": "memory", "relevant": 1}]), None),
    "array-of-numbers.json": ("[1, 2]", "path"),
    "broken-array.json": ('[{"query": "memory",\n', "path"),
    "deep-array.json": ("[" * 5000, "path"),
    "not-parquet.parquet": ("query,relevant\nmemory,1\n", "path"),
    "empty.csv": ("", "path"), "empty.jsonl": ("", "path"), "header.csv": ("query,relevant\n",
                                                                           "path"),
    "latin-1.csv": ("query,relevant\ncaf\xe9,1\n".encode("latin-1"), "path"),
    "deep.jsonl": ("[" * 5000 + "\n", "path"),
    "null-query.jsonl": ('{"query": null, "relevant": 1}\n', "query"),
    "list-query.jsonl": ('{"query": ["a"], "relevant": 1}\n', "query"),
    "surrogate.jsonl": ('{"query": "a\\ud800", "relevant": 1}\n', "query"),
}


@pytest.mark.parametrize("name", FILES)
def test_labelled_query_files(tmp_path: Path, name: str) -> None:
    content, field = FILES[name]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if field is None:
        frame = read_labelled_queries(path)
        assert frame["query"].tolist() == ["memory"] and frame["query"].dtype == "string"
        assert json.loads(str(frame["relevant"].iloc[0])) in (1, [1])
        return
    with pytest.raises(ValidationError) as error:
        read_labelled_queries(path)
    assert error.value.field == field and "\n" not in str(error.value)


def test_a_vector_past_float32_is_refused_without_a_warning(tmp_path: Path) -> None:
    """Finite in float64, infinite in float32: numpy's overflow warning reached stderr."""
    from htm_analytics.tuning.labelled_queries import query_vectors

    path = tmp_path / "huge.jsonl"
    path.write_text('{"query": "memory", "relevant": 1, "vector": [1e300, 1]}\n')
    with pytest.raises(ValidationError, match="not a finite") as error:
        query_vectors(read_labelled_queries(path))
    assert error.value.field == "vector"


@pytest.mark.parametrize("path", [None, 3, b"queries.jsonl"])
def test_a_path_that_is_no_file_name_is_refused(path: Any) -> None:
    with pytest.raises(ValidationError) as error:
        read_labelled_queries(path)
    assert error.value.field == "path"


def test_cli_refuses_bad_files_in_one_line(url: str, store: LongTermMemory, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    before = counts(url)
    files = {"inf.csv": 'query,relevant\nmemory,"[Infinity]"\n',  # was an OverflowError
             "vector.csv": "query,relevant,vector\nmemory,1,abc\n",  # was a JSONDecodeError
             "deep.csv": 'query,relevant\nmemory,"' + "[" * 5000 + '"\n',  # RecursionError
             "grade.jsonl": '{"query": "memory", "relevant": {"1": 1e30}}\n'}  # SystemError
    for name, content in files.items():
        (tmp_path / name).write_text(content)
        code, _, err = run_main(["--db", url, "eval", "retrieval", str(tmp_path / name),
                           "--strategies", "fulltext_any"], monkeypatch, capsys)
        assert code == 1, (name, err)
        assert err.splitlines()[-1].startswith("Error: ") and "Traceback" not in err
    assert counts(url) == before


@pytest.mark.parametrize(("args", "code", "said"), [
    # An empty --strategies was read as "every strategy"; a trailing comma named strategy ''.
    (["--strategies", ""], 2, "names no strategy"),
    (["--strategies", "fulltext_any,"], 0, ""),
    # An unknown --embedder was "name: unknown embedding provider", after connecting.
    (["--strategies", "vector", "--embedder", "telepathy"], 2, "--embedder"),
])
def test_cli_eval_options(url: str, store: LongTermMemory, tmp_path: Path, args: list[str],
                          code: int, said: str, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"query": "memory", "relevant": [1]}) + "\n")
    got, _, err = run_main(["--db", url, "eval", "retrieval", str(good), *args],
                           monkeypatch, capsys)
    assert got == code and said in err and "name:" not in err, err


@pytest.mark.parametrize("command", [["eval", "conversations"], ["mcp"]])
def test_cli_unknown_embedder_is_a_usage_error(url: str, tmp_path: Path, command: list[str],
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Both said "name: unknown embedding provider", the library's field, not the option."""
    (tmp_path / "turns.jsonl").write_text("{}\n")
    path = [str(tmp_path / "turns.jsonl")] if command[0] == "eval" else []
    code, _, err = run_main(["--db", url, *command, *path, "--embedder", "telepathy"],
                            monkeypatch, capsys)
    assert code == 2 and "Invalid value for --embedder" in err and "name:" not in err, err


@pytest.mark.parametrize("command", ["recall", "build"])
@pytest.mark.parametrize("out", ["bench.txt", "."])
def test_bench_out_is_checked_as_the_option(url: str, tmp_path: Path, command: str, out: str,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --out said "output:", the library's field, after connecting."""
    code, _, err = run_main(["--db", url, "bench", command, "--out", str(tmp_path / out)],
                            monkeypatch, capsys)
    assert code == 2 and "Invalid value for --out" in err and "output:" not in err, err


def test_bench_refuses_an_empty_tag(url: str, store: LongTermMemory, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``--tag ""`` measured the unfiltered searches only, without a word."""
    code, _, err = run_main(["--db", url, "bench", "recall", "--queries", "3", "--repeats", "1",
                       "--tag", "", "--out", str(tmp_path / "bench.csv")], monkeypatch, capsys)
    assert code == 1 and "'' is not a valid tag" in err
    assert not (tmp_path / "bench.csv").exists()


@pytest.mark.parametrize("query", ["a\ud800b", None, 7])
def test_retrieval_quality_refuses_bad_query_texts(store: LongTermMemory, query: Any) -> None:
    """A lone surrogate made pandas (pyarrow strings) raise UnicodeEncodeError."""
    with pytest.raises(ValidationError) as error:
        retrieval_quality(store, [query], np.array([QUERY_VECTORS[0]]), [1],
                          strategies=("vector",))
    assert error.value.field == "query"


_IDS = st.integers(-(2**63), 2**63 - 1)
_GRADES = st.integers(-(2**31), 2**31 - 1)
# Parquet columns of each type relevant ids may come in: an id, a list, a map of grades
_PARQUET_RELEVANT = st.sampled_from([
    (pa.int64(), _IDS),
    (pa.list_(pa.int64()), st.lists(_IDS, max_size=3)),
    (pa.map_(pa.int64(), pa.int32()), st.lists(st.tuples(_IDS, _GRADES), max_size=3,
                                               unique_by=lambda pair: pair[0])),
    (pa.string(), st.text(max_size=20))])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), rows=st.integers(1, 4), as_array=st.booleans())
def test_any_typed_relevant_column_is_read_or_refused_by_row(
        tmp_path: Path, data: st.DataObject, rows: int, as_array: bool) -> None:
    """Parquet (typed columns) and JSON arrays: each row's ids and grades are taken, or
    refused with ValidationError naming the field, never another exception."""
    kind, values = data.draw(_PARQUET_RELEVANT)
    relevant = [data.draw(values) for _ in range(rows)]
    if as_array:
        path = tmp_path / "queries.json"
        path.write_text(json.dumps([{"query": "memory", "relevant": dict(value)
                                     if kind == pa.map_(pa.int64(), pa.int32()) else value}
                                    for value in relevant]))
    else:
        path = tmp_path / "queries.parquet"
        pq.write_table(pa.table({"query": ["memory"] * rows,
                                 "relevant": pa.array(relevant, type=kind)}), path)
    frame = read_labelled_queries(path)
    for row, value in enumerate(frame["relevant"]):
        try:
            graded = relevance(value, row)
        except ValidationError as error:
            assert error.field == "relevant"
            continue
        assert graded and all(1 <= int(node) < 2**63 and -1000 <= grade <= 1000
                              for node, grade in graded.items())
