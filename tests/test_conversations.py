"""Conversation benchmarks scored: the three layouts replayed into scratch databases on the
real server, scored per strategy and question category, the command around it and its
document in the report; and arguments refused before any database is made. The files
themselves are read in test_conversations_formats.py, the default recall on a conversation
is test_conversations_recall.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from conversation_helpers import DATA, locomo_sample

import htm_analytics as ha
from htm_analytics.agent.embeddings import HashingEmbedder
from htm_analytics.cli import cli
from htm_analytics.errors import BenchmarkFormatError, ValidationError
from htm_analytics.report import conversation_section
from htm_analytics.tuning.conversation_formats import read_conversations

matplotlib.use("Agg")


def _scratch_databases(server_url: str) -> set[str]:
    with psycopg.connect(server_url, autocommit=True) as conn:
        return {row[0] for row in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'htm_conversations%'")}


# Scoring -----------------------------------------------------------------------------------

def test_locomo_scored_per_strategy_and_category(server_url: str) -> None:
    before = _scratch_databases(server_url)
    result = ha.evaluate_conversations(DATA / "locomo_mini.json", server_url=server_url,
                                       strategies=["fulltext_any", "vector_bm25"], k=5,
                                       embedding_service=HashingEmbedder(), progress=False,
                                       speaker_prefix=False)
    assert _scratch_databases(server_url) == before  # dropped
    per = result.per_question.query("strategy == 'fulltext_any'").set_index("question")
    assert len(per) == 5
    # No word of this question is in any bare turn (the speaker's name is not in the text).
    missed = per.loc["What did Ann name her new pet?"]
    assert missed["returned"] == 0 and pd_isna(missed["first_evidence_rank"])
    assert missed["recall_any_at_5"] == 0.0
    # Both evidence turns hold "cello" and "conservatory": all of them found.
    both = per.loc["Which instrument does Ben play at the conservatory?"]
    assert both["recall_all_at_5"] == 1.0 and set(both["evidence"]) == {"D1:2", "D2:1"}
    # D1:3 and D2:2 say the same thing: one memory standing for both turns.
    climbing = per.loc["When does Ann go climbing?"]
    assert climbing["first_evidence_rank"] == 1 and {"D1:3", "D2:2"} <= set(
        climbing["retrieved"][:2])
    summary = result.summary.set_index(["strategy", "category"])
    assert summary.loc[("fulltext_any", "all"), "recall_any_at_5"] == pytest.approx(0.8)
    assert summary.loc[("fulltext_any", "all"), "questions"] == 5
    assert summary.loc[("fulltext_any", "single-hop"), "questions"] == 2
    assert summary.loc[("fulltext_any", "single-hop"), "recall_any_at_5"] == pytest.approx(0.5)
    assert list(result.summary.columns) == [
        "strategy", "category", "questions", "recall_any_at_1", "recall_any_at_5",
        "recall_all_at_5", "ndcg_at_5", "mrr_at_5", "latency_p50_ms", "latency_p95_ms", "k"]
    abstention = result.abstention.set_index("strategy")
    assert abstention.loc["fulltext_any", "category"] == "adversarial"
    assert abstention.loc["fulltext_any", "returned_any"] == 1.0  # "greyhound" matches
    counts = result.conversations.iloc[0]
    assert (counts["turns"], counts["memories"], counts["questions"], counts["abstention"],
            counts["unresolved"]) == (7, 6, 5, 1, 1)
    ax = ha.plot_conversations(result.summary)
    assert len(ax.patches) == 2 * 5  # two strategies x (four categories + all)


def test_turns_are_remembered_with_their_speaker(server_url: str) -> None:
    result = ha.evaluate_conversations(DATA / "locomo_mini.json", server_url=server_url,
                                       strategies=["fulltext_any"], k=5, progress=False)
    per = result.per_question.set_index("question")
    # "Ann: Hi Ben! I adopted a greyhound called Pixel last week.": the name is found now
    # (bare, no word of the question was in any turn: test_locomo_scored_...).
    assert per.loc["What did Ann name her new pet?", "recall_any_at_5"] == 1.0
    assert result.conversations["memories"].tolist() == [6]


def pd_isna(value: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_longmemeval_one_database_per_question_and_kept_on_request(server_url: str) -> None:
    result = ha.evaluate_conversations(DATA / "longmemeval_mini.json", server_url=server_url,
                                       strategies=["vector", "fulltext_any"], keep=True,
                                       progress=False)
    kept = set(result.conversations["database"])
    try:
        assert len(kept) == 3 and kept <= _scratch_databases(server_url)
        per = result.per_question.set_index(["question_id", "strategy"])
        assert per.loc[("q-cello", "fulltext_any"), "first_evidence_rank"] == 1
        # Only the two turns of its own history were there to find.
        assert per.loc[("q-soup", "vector"), "returned"] == 2
        abstention = result.abstention.set_index("strategy")
        assert abstention.loc["fulltext_any", "returned_any"] == 0.0  # "violin" is nowhere
        assert abstention.loc["vector", "returned_any"] == 1.0  # a vector search always finds
    finally:
        for name in kept:
            ha.store.drop_database(server_url, name)


def test_one_database_for_the_whole_benchmark(server_url: str) -> None:
    result = ha.evaluate_conversations(DATA / "longmemeval_mini.json", server_url=server_url,
                                       strategies=["vector"], scope="benchmark",
                                       progress=False)
    # s1 and s2 repeat across the questions' histories: stored once in the shared database.
    assert result.conversations["memories"].tolist() == [4, 2, 2]
    per = result.per_question.set_index("question_id")
    assert per.loc["q-soup", "returned"] == 4  # every distinct memory of the benchmark


class _Interrupting(HashingEmbedder):
    def __init__(self, after: int) -> None:
        super().__init__()
        self.calls, self.after = 0, after

    def embed(self, texts: Any) -> np.ndarray:
        self.calls += 1
        if self.calls > self.after:
            raise KeyboardInterrupt
        return super().embed(texts)


def test_ctrl_c_returns_what_was_finished_and_drops_the_scratch_database(
        server_url: str) -> None:
    before = _scratch_databases(server_url)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        result = ha.evaluate_conversations(
            DATA / "longmemeval_mini.json", server_url=server_url, strategies=["vector"],
            embedding_service=_Interrupting(after=2), progress=False)
    assert result.interrupted
    assert result.conversations["conversation"].tolist() == ["q-cello"]
    assert result.per_question["question_id"].unique().tolist() == ["q-cello"]
    assert _scratch_databases(server_url) == before


def test_bad_arguments_are_refused_before_any_database(server_url: str,
                                                        tmp_path: Path) -> None:
    before = _scratch_databases(server_url)
    for options, field in [({"strategies": ["telepathy"]}, "strategies"),
                           ({"scope": "galaxy"}, "scope"), ({"k": 0}, "k"),
                           ({"conversations": ["conv-404"]}, "conversations")]:
        with pytest.raises(ValidationError) as caught:
            ha.evaluate_conversations(DATA / "locomo_mini.json", server_url=server_url,
                                      progress=False, **options)
        assert caught.value.field == field
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": "only a turn"}\n')
    with pytest.raises(ValidationError, match="no question"):
        ha.evaluate_conversations(empty, server_url=server_url, progress=False)
    assert _scratch_databases(server_url) == before


def test_eval_conversations_command(server_url: str, database_url: str,
                                    tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", server_url, "eval", "conversations",
                                 str(DATA / "conversations.jsonl"), "--strategies",
                                 "fulltext_any,vector", "--k", "3", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"interrupted", "summary", "per_question", "abstention",
                             "conversations"}
    rows = {(r["strategy"], r["category"]): r for r in document["summary"]}
    assert rows[("fulltext_any", "all")]["recall_any_at_3"] == 1.0
    assert rows[("fulltext_any", "all")]["questions"] == 2
    assert document["conversations"][0]["database"] is None
    _the_document_in_the_report(document, database_url, tmp_path)
    table = runner.invoke(cli, ["--db", server_url, "eval", "conversations",
                                str(DATA / "locomo_mini.json"), "--strategies",
                                "fulltext_any", "--show", "abstention"])
    assert table.exit_code == 0, table.output
    assert "adversarial" in table.stdout
    bad = runner.invoke(cli, ["--db", server_url, "eval", "conversations",
                              str(DATA / "7.json"), "--format", "longmemeval"])
    assert bad.exit_code != 0 and isinstance(bad.exception, BenchmarkFormatError)
    assert "is not longmemeval" in str(bad.exception)


def test_eval_conversations_writes_its_chart_and_keeps_on_request(server_url: str,
                                                                   tmp_path: Path) -> None:
    before = _scratch_databases(server_url)
    runner = CliRunner()
    chart = tmp_path / "chart.svg"
    result = runner.invoke(cli, ["--db", server_url, "eval", "conversations",
                                 str(DATA / "locomo_mini.json"), "--strategies",
                                 "fulltext_any,vector_bm25", "--k", "5", "--keep", "--csv",
                                 "--plot", str(chart)])
    assert result.exit_code == 0, result.output
    kept = set(_scratch_databases(server_url)) - before
    try:
        assert len(kept) == 1
        assert f"kept scratch database {next(iter(kept))}" in result.stderr
        assert f"chart written to {chart}" in result.stderr
        svg = chart.read_text()
        # matplotlib's SVG names each text it draws: the categories and the strategies.
        for label in ("single-hop", "multi-hop", "all", "fulltext_any", "vector_bm25",
                      "recall any@5"):
            assert f"<!-- {label} -->" in svg, label
        assert result.stdout.startswith("strategy,category,questions,recall_any_at_1,")
    finally:
        for name in kept:
            ha.store.drop_database(server_url, name)
    for plot, message in [(tmp_path / "chart.gif", "must end in .png, .svg, .pdf"),
                          (tmp_path / "missing" / "chart.png", "no folder")]:
        refused = runner.invoke(cli, ["--db", server_url, "eval", "conversations",
                                      str(DATA / "locomo_mini.json"), "--plot", str(plot)])
        assert refused.exit_code == 2 and message in refused.output, refused.output
        assert not plot.exists()
    assert _scratch_databases(server_url) == before  # refused before any database


class _BareEmbedder:
    """Only ``embed``: no provider or model name to record."""

    def embed(self, texts: Any) -> np.ndarray:
        return HashingEmbedder(96).embed(texts)


def test_an_embedder_without_names(server_url: str) -> None:
    result = ha.evaluate_conversations(DATA / "conversations.jsonl", server_url=server_url,
                                       strategies=["vector"], embedding_service=_BareEmbedder(),
                                       progress=False)
    # Remembered and searched with the bare vectors (nothing recorded about their model).
    assert result.per_question["returned"].tolist() == [3, 3]
    assert result.summary.query("category == 'all'")["recall_any_at_10"].item() == 1.0


def _the_document_in_the_report(document: dict[str, Any], database_url: str,
                                tmp_path: Path) -> None:
    """The ``--json`` document read back, made into the report's section, and through
    ``report --conversations``."""
    path = tmp_path / "result.json"
    path.write_text(json.dumps(document))
    result = ha.ConversationEvaluation.from_json(path)
    assert result.to_json() == document  # nothing lost on the way back
    assert result.summary["strategy"].dtype == "string"
    summary = result.summary.set_index(["strategy", "category"])["recall_any_at_3"]
    section = conversation_section(result)
    assert section.key == "conversations" and len(section.figures) == 1
    caption, table = section.tables[0]
    assert caption.startswith("recall_any@3 per question category")
    assert list(table.columns) == ["category", "fulltext_any", "vector", "questions"]
    rows = table.set_index("category")
    assert rows.loc["multimodal", "vector"] == summary[("vector", "multimodal")]
    assert rows["questions"].sum() == 2
    assert section.findings == ["Conversations: fulltext_any finds an evidence turn in the top "
                                "3 for 100.0% of 2 questions (MRR@3 1.000)."]
    abstention_caption, abstention = section.tables[2]
    assert abstention_caption.startswith("Questions that should find nothing")
    assert abstention["category"].tolist() == ["single-hop", "single-hop"]
    runner = CliRunner()
    written = runner.invoke(cli, ["--db", database_url, "report", "--no-benchmark",
                                  "--no-hygiene", "--format", "md", "--out",
                                  str(tmp_path / "r.md"), "--conversations", str(path)])
    assert written.exit_code == 0, written.output
    markdown = (tmp_path / "r.md").read_text()
    assert "## Conversation benchmark" in markdown and "multimodal" in markdown
    (tmp_path / "bad.json").write_text('{"summary": 3}')
    refused = runner.invoke(cli, ["--db", database_url, "report", "--conversations",
                                  str(tmp_path / "bad.json")])
    assert refused.exit_code == 2 and "no 'summary' list" in refused.output
    with pytest.raises(ValidationError) as error:
        ha.ConversationEvaluation.from_json({"summary": [{"strategy": "vector"}]})
    assert error.value.field == "document"
    row = document["summary"][0]
    for wrong in ({**row, "recall_any_at_3": "abc"}, {**row, "recall_any_at_3": 7.5},
                  {**row, "latency_p50_ms": -1}):
        with pytest.raises(ValidationError, match="was expected") as error:
            ha.ConversationEvaluation.from_json({**document, "summary": [wrong]})
        assert error.value.field == "document"
    with pytest.raises(ValidationError, match="two rows"):
        ha.ConversationEvaluation.from_json({**document, "summary": [row, row]})


# Refused as a typed error, before any database --------------------------------------------

def test_conversations_given_twice_are_refused_before_any_database(server_url: str) -> None:
    before = _scratch_databases(server_url)
    (conversation,) = read_conversations(DATA / "conversations.jsonl")
    turn, *others = conversation.turns
    for source, message in [
            ([conversation, conversation], "given twice"),
            ([dataclasses.replace(conversation, turns=(turn, turn, *others))], "given twice"),
            ([dataclasses.replace(conversation, turns=(dataclasses.replace(
                turn, speaker="s" * 300), *others))], "at most 255 characters"),
            ([dataclasses.replace(conversation, turns=(dataclasses.replace(
                turn, time=dt.datetime(2500, 1, 1, tzinfo=dt.UTC)), *others))], "outside"),
            ([dataclasses.replace(conversation, turns=tuple(others))], "names no turn"),
            ([conversation, "not a conversation"], "sequence of Conversation"),
            ([[1]], "sequence of Conversation"), (5, "sequence of Conversation")]:
        with pytest.raises(ValidationError) as caught:
            ha.evaluate_conversations(source, server_url=server_url, progress=False)
        assert caught.value.field == "source" and message in str(caught.value), source
    assert _scratch_databases(server_url) == before


def test_bad_arguments_of_any_type_are_refused(server_url: str) -> None:
    before = _scratch_databases(server_url)
    for options, field in [({"strategies": 5}, "strategies"),
                           ({"strategies": [["vector"]]}, "strategies"),
                           ({"conversations": 5}, "conversations"),
                           ({"conversations": [["trip"]]}, "conversations"),
                           ({"source": 5}, "source"), ({"source": "a\x00b"}, "source"),
                           ({"format": ["jsonl"]}, "format")]:
        arguments: dict[str, Any] = {"source": DATA / "conversations.jsonl", **options}
        with pytest.raises(ValidationError) as caught:
            ha.evaluate_conversations(arguments.pop("source"), server_url=server_url,
                                      progress=False, **arguments)
        assert caught.value.field == field, options
    assert _scratch_databases(server_url) == before


def test_only_abstention_questions_give_empty_frames_with_their_columns(
        server_url: str, tmp_path: Path) -> None:
    path = tmp_path / "adversarial.json"
    path.write_text(json.dumps([locomo_sample(
        [], [{"question": "alpha", "adversarial_answer": "none", "category": 5}])]))
    result = ha.evaluate_conversations(path, server_url=server_url,
                                       strategies=["fulltext", "vector"], k=2,
                                       speaker_prefix=False, progress=False)
    assert result.per_question.dtypes.astype(str).to_dict() == {
        "conversation": "string", "question_id": "string", "question": "string",
        "category": "string", "strategy": "string", "evidence": "object",
        "retrieved": "object", "first_evidence_rank": "Int64", "returned": "int64",
        "recall_any_at_1": "float64", "recall_any_at_2": "float64",
        "recall_all_at_2": "float64", "ndcg_at_2": "float64", "mrr_at_2": "float64",
        "latency_ms": "float64"}
    assert len(result.per_question) == 0 and len(result.summary) == 0
    assert result.abstention["questions"].tolist() == [1, 1]
    assert result.conversations[["turns", "memories", "abstention"]].values.tolist() == [
        [0, 0, 1]]
