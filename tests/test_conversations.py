"""Conversation benchmarks: the three layouts read from small files written for the suite,
replayed into scratch databases on the real server, scored, and the command around it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import htm_analytics as ha
from htm_analytics.agent.embeddings import HashingEmbedder
from htm_analytics.cli import cli
from htm_analytics.errors import BenchmarkFormatError, ValidationError
from htm_analytics.report import conversation_section
from htm_analytics.tuning.conversation_formats import read_conversations

matplotlib.use("Agg")
DATA = Path(__file__).parent / "data" / "conversations"


def _scratch_databases(server_url: str) -> set[str]:
    with psycopg.connect(server_url, autocommit=True) as conn:
        return {row[0] for row in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'htm_conversations%'")}


# Reading -----------------------------------------------------------------------------------

def test_locomo_published_layout() -> None:
    (conversation,) = read_conversations(DATA / "locomo_mini.json")
    assert conversation.conversation_id == "conv-1"
    turns = {t.turn_id: t for t in conversation.turns}
    assert len(turns) == 7 and turns["D1:1"].speaker == "Ann"
    # The session's time, one second per turn after it, in order.
    assert turns["D2:1"].time == dt.datetime(2023, 6, 9, 19, 55, tzinfo=dt.UTC)
    assert turns["D2:3"].time == dt.datetime(2023, 6, 9, 19, 55, 2, tzinfo=dt.UTC)
    assert turns["D1:4"].text.endswith("[image: a photo of sailboats in a harbour at sunrise]")
    questions = {q.question: q for q in conversation.questions}
    # "D1:4; D9:9": two ids in one string; D9:9 names no turn and is dropped.
    assert questions["What boats did Ben photograph at sunrise?"].evidence == ("D1:4",)
    assert questions["Which instrument does Ben play at the conservatory?"].category \
        == "multi-hop"
    adversarial = questions["What did Ben say about his greyhound?"]
    assert adversarial.abstention and adversarial.evidence == ()
    assert len(conversation.questions) == 6 and conversation.unresolved == 1


def test_locomo_per_sample_layout_is_named_after_its_file() -> None:
    (conversation,) = read_conversations(DATA / "7.json")
    assert conversation.conversation_id == "conv-7"
    assert [q.evidence for q in conversation.questions] == [("D1:1",), ("D1:2", "D2:1"),
                                                            ("D2:2",)]


def _per_sample_copies(folder: Path) -> Path:
    """LoCoMo's per-sample layout as published: numbered files, 10 after 7 in number order."""
    folder.mkdir()
    sample = (DATA / "7.json").read_text()
    for number in (10, 7):
        (folder / f"{number}.json").write_text(sample)
    (folder / "README.txt").write_text("not a benchmark file")
    return folder


def test_a_folder_of_per_sample_files_and_the_published_zip(tmp_path: Path) -> None:
    folder = _per_sample_copies(tmp_path / "locomo10_v2")
    from_folder = read_conversations(folder)
    assert [c.conversation_id for c in from_folder] == ["conv-7", "conv-10"]
    assert from_folder[1].turns == read_conversations(DATA / "7.json")[0].turns
    archive = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("data/multimodal_dialog/locomo10_v2/", "")
        for file in sorted(folder.iterdir()):
            zipped.write(file, f"data/multimodal_dialog/locomo10_v2/{file.name}")
    assert read_conversations(archive) == from_folder


def test_a_folder_or_zip_without_benchmarks_or_with_a_name_twice(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BenchmarkFormatError, match=r"holds no \.json"):
        read_conversations(empty)
    (tmp_path / "broken.zip").write_bytes(b"PK not a zip")
    with pytest.raises(BenchmarkFormatError, match="cannot read"):
        read_conversations(tmp_path / "broken.zip")
    twice = tmp_path / "twice"
    twice.mkdir()
    for name in ("a.json", "b.json"):
        (twice / name).write_text((DATA / "locomo_mini.json").read_text())
    with pytest.raises(BenchmarkFormatError, match=r"also in a\.json") as caught:
        read_conversations(twice)
    assert caught.value.record == "conversation 'conv-1'"


def test_longmemeval_layout() -> None:
    conversations = read_conversations(DATA / "longmemeval_mini.json")
    assert [c.conversation_id for c in conversations] == ["q-cello", "q-soup", "q-violin_abs"]
    cello, soup, violin = conversations
    assert cello.questions[0].evidence == ("s1:1",)  # the turn marked has_answer
    assert cello.turns[2].time == dt.datetime(2023, 5, 21, 9, 0, tzinfo=dt.UTC)
    assert soup.questions[0].evidence == ("s2:1", "s2:2")  # no mark: the answer session
    assert soup.questions[0].category == "single-session-assistant"
    assert violin.questions[0].abstention and violin.questions[0].evidence == ()
    assert {t.speaker for t in cello.turns} == {"user", "assistant"}


def test_jsonl_layout() -> None:
    (trip,) = read_conversations(DATA / "conversations.jsonl")
    assert trip.conversation_id == "trip"
    assert trip.turns[1].time == trip.turns[0].time + dt.timedelta(seconds=1)
    assert trip.turns[2].text == ("The volcano crater hike starts at dusk. "
                                  "[image: a map of the crater trail]")
    assert [(q.question_id, q.abstention) for q in trip.questions] == [
        ("ferry", False), ("trail", False), ("piano", True)]


def test_a_question_without_a_category_is_uncategorized_not_all(tmp_path: Path) -> None:
    """'all' is the total the summary adds: a question's own category never takes it (the
    summary had two rows of one name, and its chart failed on them)."""
    path = tmp_path / "plain.jsonl"
    path.write_text('{"text": "hi"}\n{"question": "a?", "evidence": ["t1"]}\n'
                    '{"question": "b?", "evidence": ["t1"], "category": "4"}\n')
    (plain,) = read_conversations(path)
    assert [q.category for q in plain.questions] == ["uncategorized", "4"]


@pytest.mark.parametrize(("name", "content", "record"), [
    ("bad.jsonl", '{"text": "hi", "turn_id": "t1"}\n{"question": ', "line 2"),
    ("bad.jsonl", '{"text": "hi", "turn_id": "t1"}\n{"question": "q?", "evidence": ["t9"]}\n',
     "line 2"),
    ("bad.jsonl", '{"text": "hi", "time": "yesterday"}\n{"question": "q?"}\n', "line 1"),
    ("bad.json", json.dumps([{"sample_id": "conv-9", "qa": [], "conversation": {
        "session_1": [], "session_1_date_time": "the day after"}}]),
     "conv-9 session_1_date_time"),
    ("bad.json", json.dumps([{"sample_id": "conv-9", "qa": [{"category": 1}], "conversation": {
        "session_1": [], "session_1_date_time": "1:56 pm on 8 May, 2023"}}]), "conv-9 qa[0]"),
    ("bad.json", json.dumps([{"question_id": "q7", "question": "?", "haystack_dates": [],
                              "haystack_sessions": [[]]}]), "question q7"),
    ("bad.json", json.dumps({"rows": [1, 2]}), "top level"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "top level"),
    ("twice.jsonl", '{"text": "hi", "turn_id": "t1"}\n{"text": "bye", "turn_id": "t1"}\n',
     "conversation 'default'"),
    ("twice.jsonl", '{"text": "hi", "turn_id": "t1"}\n{"question": "a?", "question_id": "q", '
     '"evidence": ["t1"]}\n{"question": "b?", "question_id": "q", "evidence": ["t1"]}\n',
     "conversation 'default'"),
    ("total.jsonl", '{"text": "hi"}\n{"question": "a?", "evidence": ["t1"], "category": "all"}\n',
     "line 2"),
    ("end.jsonl", '{"text": "hi", "time": "2261-12-31T23:59:59+00:00"}\n{"text": "then"}\n',
     "line 2"),
    # What a memory cannot hold is refused here, not by the scratch database's bulk_add.
    ("late.jsonl", '{"text": "hi", "time": "2500-01-01"}\n', "line 1"),
    ("early.jsonl", '{"text": "hi", "time": "0001-01-01T00:00:00+05:00"}\n', "line 1"),
    ("calendar.jsonl", '{"text": "hi", "time": "9999-12-31T23:59:59+00:00"}\n', "line 1"),
    ("speaker.jsonl", '{"text": "hi", "speaker": "' + "s" * 300 + '"}\n', "line 1"),
    ("speaker.json", json.dumps([{"sample_id": "conv-9", "qa": [], "conversation": {
        "session_1": [{"speaker": "s" * 300, "dia_id": "D1:1", "text": "hi"}],
        "session_1_date_time": "1:56 pm on 8 May, 2023"}}]), "conv-9 session_1[0]"),
    ("late.json", json.dumps([{"sample_id": "conv-9", "qa": [], "conversation": {
        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
        "session_1_date_time": "1:56 pm on 8 May, 2500"}}]), "conv-9 session_1_date_time"),
    ("role.json", json.dumps([{"question_id": "q7", "question": "?", "haystack_dates": [
        "2023/05/20 (Sat) 02:21"], "haystack_sessions": [[{"role": "", "content": "hi"}]]}]),
     "question q7, session 0"),
    ("late.json", json.dumps([{"question_id": "q7", "question": "?", "haystack_dates": [
        "2500/05/20 (Sat) 02:21"], "haystack_sessions": [[{"role": "user", "content": "hi"}]]}]),
     "question q7, session 0"),
    # A string is not a boolean ("false" was true).
    ("flag.jsonl", '{"text": "hi"}\n{"question": "a?", "evidence": ["t1"], '
     '"abstention": "false"}\n', "line 2"),
    ("flag.json", json.dumps([{"question_id": "q7", "question": "?", "haystack_dates": [
        "2023/05/20 (Sat) 02:21"], "haystack_sessions": [[{"role": "user", "content": "hi",
                                                           "has_answer": "false"}]]}]),
     "question q7, session 0"),
])
def test_a_malformed_file_names_its_record(tmp_path: Path, name: str, content: str,
                                           record: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(BenchmarkFormatError, match=re.escape(record)) as caught:
        read_conversations(path)
    assert caught.value.record == record and caught.value.path == str(path)


def test_format_given_must_match(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkFormatError, match="is not longmemeval"):
        read_conversations(DATA / "locomo_mini.json", format="longmemeval")
    with pytest.raises(ValidationError, match="format"):
        read_conversations(DATA / "locomo_mini.json", format="csv")
    with pytest.raises(BenchmarkFormatError, match="cannot read"):
        read_conversations(tmp_path / "missing.json")


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(
                         ["qa", "conversation", "session_1", "session_1_date_time", "speaker",
                          "dia_id", "text", "question", "evidence", "category", "haystack_sessions",
                          "haystack_dates", "question_id", "sample_id", "turn_id", "time"]),
                         inner, max_size=5), max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(data=_json, lines=st.booleans())
def test_any_json_is_read_or_refused_with_a_typed_error(tmp_path: Path, data: Any,
                                                        lines: bool) -> None:
    path = tmp_path / "any.json"
    path.write_text(json.dumps(data) + ("\n" + json.dumps(data) if lines else ""))
    try:
        conversations = read_conversations(path)
    except ValidationError:
        return
    assert all(isinstance(c, ha.tuning.conversation_formats.Conversation) for c in conversations)


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


# The default recall on a conversation -------------------------------------------------------

_SESSION = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)
_TURNS = [  # (robot, text, minutes after the session's start)
    ("Ann", "Ann: I adopted a greyhound last week.", 0),
    ("Ben", "Ben: Lovely! What did you call the greyhound?", 1),
    ("Ann", "Ann: Pixel, after my first phone.", 2),
    ("Ben", "Ben: I practise the cello every evening.", 3),
    ("Ann", "Ann: My sister visits in June.", 60 * 24 * 9),
    ("Ann", "Ann: The museum trip was fun.", 60 * 24 * 9 + 1),
]


def _conversation(store: ha.LongTermMemory, *, same_instant: bool = False) -> list[int]:
    times = [_SESSION if same_instant else _SESSION + dt.timedelta(minutes=m)
             for _, _, m in _TURNS]
    texts = [text for _, text, _ in _TURNS]
    return store.bulk_add(texts, robots=[robot for robot, _, _ in _TURNS],
                          embeddings=HashingEmbedder().embed(texts),
                          remembered_at=times)["node_id"].tolist()


def _scores(store: ha.LongTermMemory, query: str, **options: Any) -> dict[int, float]:
    rows = store.search_vector_bm25(query=query, embedding=HashingEmbedder().embed([query])[0],
                                    limit=10, **options)
    return {row["id"]: row["score"] for row in rows}


def test_the_default_recall_reads_turns_in_their_conversation(ltm: ha.LongTermMemory) -> None:
    from htm_analytics.store.lexical import DATE_BOOST, NEIGHBOUR_WEIGHT, SPEAKER_BOOST

    ids = _conversation(ltm)
    # The neighbour, speaker and date terms, each with the others off (BM25 of each turn
    # alone: the context is tested below).
    question = "What name did Ann give the greyhound?"
    alone = _scores(ltm, question, neighbours=0, speaker_boost=0, date_boost=0, context=0)
    # The answer holds no word of the question: on its own it is not the first of Ann's turns.
    assert max(alone, key=alone.__getitem__) != ids[2]
    with_neighbours = _scores(ltm, question, speaker_boost=0, date_boost=0, context=0)
    # A turn gains NEIGHBOUR_WEIGHT x the best own score of the turn before or after it, in
    # the same session (a week later is not a neighbour).
    for turn, around in ((2, (1, 3)), (4, (5,))):
        expected = alone[ids[turn]] + NEIGHBOUR_WEIGHT * max(alone[ids[i]] for i in around)
        assert with_neighbours[ids[turn]] == pytest.approx(expected)
    def rank(scores: dict[int, float]) -> int:
        return sorted(scores, key=scores.__getitem__, reverse=True).index(ids[2])

    assert rank(with_neighbours) < rank(alone)
    # Ann is named: her memories gain SPEAKER_BOOST, Ben's nothing.
    named = _scores(ltm, question, neighbours=0, date_boost=0, context=0)
    for turn, (robot, _, _) in enumerate(_TURNS):
        gain = SPEAKER_BOOST if robot == "Ann" else 0
        assert named[ids[turn]] == pytest.approx(alone[ids[turn]] + gain)
    # A date the question names: the memories remembered that day gain DATE_BOOST.
    dated_question = "What did Ann say on 8 May, 2023?"
    plain = _scores(ltm, dated_question, neighbours=0, speaker_boost=0, date_boost=0,
                    context=0)
    dated = _scores(ltm, dated_question, neighbours=0, speaker_boost=0, context=0)
    for turn, (_, _, minutes) in enumerate(_TURNS):
        gain = DATE_BOOST if minutes < 60 * 24 else 0
        assert dated[ids[turn]] == pytest.approx(plain[ids[turn]] + gain)
    with pytest.raises(ValidationError) as error:
        _scores(ltm, question, neighbour_gap=5)
    assert error.value.field == "neighbour_gap"


def _bm25(store: ha.LongTermMemory, query: str, **options: Any) -> dict[int, float]:
    rows = store.search_vector_bm25(query=query, embedding=HashingEmbedder().embed([query])[0],
                                    limit=10, neighbours=0, speaker_boost=0, date_boost=0,
                                    **options)
    return {row["id"]: row["bm25"] for row in rows}


def test_bm25_reads_a_turn_with_the_turn_before_it(ltm: ha.LongTermMemory) -> None:
    ids = _conversation(ltm)
    question = "What name did Ann give the greyhound?"
    alone, in_context = _bm25(ltm, question, context=0), _bm25(ltm, question)
    # Ben's cello turn holds no word of the question, the turn before it ("Ann: Pixel...")
    # holds "Ann": read with it, the cello turn matches.
    assert alone[ids[3]] == 0 < in_context[ids[3]]
    # The answer gains "greyhound" from Ben's question before it.
    assert in_context[ids[2]] > alone[ids[2]] > 0
    # Nothing comes before the first turn of a session (the next session is nine days later).
    for first in (0, 4):
        assert in_context[ids[first]] == pytest.approx(alone[ids[first]])
    # Twice the weight: the words before count more, so the cello turn scores higher still.
    assert _bm25(ltm, question, context=1.0)[ids[3]] > in_context[ids[3]]
    with pytest.raises(ValidationError) as error:
        _bm25(ltm, question, context=-0.5)
    assert error.value.field == "context"


def test_a_turn_after_a_lexical_match_is_a_candidate(ltm: ha.LongTermMemory) -> None:
    filler = [f"Ben: weather note number {i} about clouds and rain" for i in range(30)]
    texts = ["Ann: the harbour regatta starts at noon", "Ben: see you there then",
             *filler]
    times = [_SESSION + dt.timedelta(seconds=i) for i in range(len(texts))]
    vectors = HashingEmbedder().embed(texts)
    ids = ltm.bulk_add(texts, robots=["Ann", "Ben", *["Ben"] * 30], embeddings=vectors,
                       remembered_at=times)["node_id"].tolist()
    query = "When is the regatta?"
    # Only the first turn holds "regatta"; the query's vector is near the filler, so the
    # vector candidates are filler and the turn after the regatta is found only as the
    # follower of a lexical candidate (alpha 5: BM25 decides the order).
    near_filler = HashingEmbedder().embed(["clouds and rain"])[0]
    options: dict[str, Any] = {"limit": 3, "depth": 3, "alpha": 5.0, "neighbours": 0,
                               "speaker_boost": 0, "date_boost": 0}
    found = [row["id"] for row in ltm.search_vector_bm25(query=query, embedding=near_filler,
                                                          **options)]
    assert found[:2] == ids[:2]
    alone = [row["id"] for row in ltm.search_vector_bm25(query=query, embedding=near_filler,
                                                          context=0, **options)]
    assert alone[0] == ids[0] and ids[1] not in alone


def test_memories_of_one_instant_are_nobodys_neighbours(ltm: ha.LongTermMemory) -> None:
    _conversation(ltm, same_instant=True)  # one bulk import: no order between the turns
    question = "What name did Ann give the greyhound?"
    assert _scores(ltm, question) == _scores(ltm, question, neighbours=0, context=0)


@given(st.text(max_size=60))
def test_dates_named_in_a_question(text: str) -> None:
    from htm_analytics.store._dates import mentioned_dates

    for first, last in mentioned_dates(text):
        assert first.tzinfo is dt.UTC and first < last
    found = mentioned_dates(f"{text} on 3 June, 2023 or in December 2023 ({text})")
    assert (dt.datetime(2023, 6, 3, tzinfo=dt.UTC), dt.datetime(2023, 6, 4, tzinfo=dt.UTC)) \
        in found
    assert (dt.datetime(2023, 12, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 1, tzinfo=dt.UTC)) \
        in found


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

def _locomo_sample(turns: list[dict[str, Any]], qa: list[dict[str, Any]],
                   sample_id: str = "conv-1") -> dict[str, Any]:
    return {"sample_id": sample_id, "qa": qa, "conversation": {
        "speaker_a": "A", "speaker_b": "B", "session_1": turns,
        "session_1_date_time": "1:56 pm on 8 May, 2023"}}


def _haystack(question_id: str, session_ids: Any, **extra: Any) -> dict[str, Any]:
    return {"question_id": question_id, "question": "alpha?", "question_type": "single",
            "haystack_session_ids": session_ids,
            "haystack_dates": ["2023/05/20 (Sat) 02:21"] * 2,
            "haystack_sessions": [[{"role": "user", "content": "alpha bravo",
                                    "has_answer": True}],
                                  [{"role": "user", "content": "zulu yankee"}]], **extra}


_ALPHA = [{"question": "alpha", "evidence": ["D1:1"], "category": 4}]
_TWICE = [  # (name, content, record): an id given twice gave silently wrong scores
    ("dia.json", [_locomo_sample([{"speaker": "A", "dia_id": "D1:1", "text": "alpha bravo"},
                                  {"speaker": "B", "dia_id": "D1:1", "text": "zulu yankee"}],
                                 _ALPHA)], "conv-1 session_1[1]"),
    ("sessions.json", [_haystack("q1", ["s1", "s1"])], "question q1, session s1"),
    ("samples.json", [_locomo_sample([{"speaker": "A", "dia_id": "D1:1", "text": "alpha"}],
                                     _ALPHA),
                      _locomo_sample([{"speaker": "A", "dia_id": "D1:1", "text": "zulu"}],
                                     _ALPHA)], "sample 1"),
    ("questions.json", [_haystack("q1", ["s1", "s2"]), _haystack("q1", ["s3", "s4"])],
     "question q1"),
]


@pytest.mark.parametrize(("name", "data", "record"), _TWICE)
def test_an_id_given_twice_is_refused(tmp_path: Path, name: str, data: Any,
                                      record: str) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    with pytest.raises(BenchmarkFormatError, match="twice") as caught:
        read_conversations(path)
    assert caught.value.record == record


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


_BROKEN = [  # (name, content, format, record): each raised a builtin exception
    ("five.json", "5", "locomo", "top level"),
    ("null.json", "null", "locomo", "top level"),
    ("five.json", "5", "longmemeval", "top level"),
    ("answers.json", json.dumps([{**_haystack("q1", ["s1", "s2"], answer_session_ids=5),
                                  "haystack_sessions": [[{"role": "user", "content": "a"}]] * 2}]),
     "longmemeval", "question q1"),
    ("ids.json", json.dumps([_haystack("q1", 5)]), "longmemeval", "question q1"),
    ("sessions.json", json.dumps([{**_haystack("q1", None), "haystack_sessions": 5}]),
     "longmemeval", "question q1"),
    ("deep.jsonl", "[" * 100_000 + "]" * 100_000, "jsonl", "line 1"),
    ("digits.json", "[" + "9" * 5000 + "]", None, "top level"),
    ("digits.jsonl", '{"text": ' + "9" * 5000 + "}", "jsonl", "line 1"),
    ("superscript.json", json.dumps([_locomo_sample(
        [{"speaker": "A", "dia_id": "D1:1", "text": "alpha"}],
        [{"question": "alpha", "evidence": ["D1:1"], "category": "\u00b2"}])]), None,
     None),  # a category of its own, not int("\u00b2")
    ("session.json", json.dumps([{"sample_id": "conv-1", "qa": [], "conversation": {
        "session_\u0663": [], "session_\u0663_date_time": "1:56 pm on 8 May, 2023"}}]),
     None, None),  # no session: "\u0663" is no ASCII digit (looked up as session_3)
]


@pytest.mark.parametrize(("name", "content", "format", "record"), _BROKEN)
def test_a_broken_file_is_refused_as_a_typed_error(tmp_path: Path, name: str, content: str,
                                                   format: str | None,
                                                   record: str | None) -> None:
    path = tmp_path / name
    path.write_text(content)
    try:
        read = read_conversations(path, format=format)
    except BenchmarkFormatError as exc:
        assert exc.record == record and exc.path == str(path)
    else:
        assert record is None and len(read) == 1


def test_a_path_that_is_not_one_is_refused() -> None:
    for path in (5, None, b"x.json", "a\x00b.json"):
        with pytest.raises(ValidationError) as caught:
            read_conversations(path)  # type: ignore[arg-type]
        assert caught.value.field in ("path", "source"), path


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


def test_the_command_prints_one_line_for_a_broken_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from htm_analytics.cli._app import main

    path = tmp_path / "five.json"
    path.write_text("5")
    monkeypatch.setattr("sys.argv", ["htm-analytics", "eval", "conversations", str(path),
                                     "--format", "locomo"])
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 1
    error = capsys.readouterr().err
    assert error.startswith("Error: ") and error.count("\n") == 1, error
    assert "five.json, top level" in error


def test_only_abstention_questions_give_empty_frames_with_their_columns(
        server_url: str, tmp_path: Path) -> None:
    path = tmp_path / "adversarial.json"
    path.write_text(json.dumps([_locomo_sample(
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


def test_an_integral_float_category_is_the_category(tmp_path: Path) -> None:
    path = tmp_path / "floats.json"
    path.write_text(json.dumps([_locomo_sample(
        [{"speaker": "A", "dia_id": "D1:1", "text": "alpha"}],
        [{"question": "alpha", "evidence": ["D1:1"], "category": 4.0},
         {"question": "bravo", "category": 5.0}, {"question": "gamma", "category": "5"},
         {"question": "delta", "evidence": ["D1:1"], "category": 4.5},
         {"question": "echo", "evidence": ["D1:1"], "category": True}])]))
    (read,) = read_conversations(path)
    assert [(q.category, q.abstention) for q in read.questions] == [
        ("single-hop", False), ("adversarial", True), ("adversarial", True),
        ("4.5", False), ("True", False)]


def test_a_document_with_a_number_too_large_is_refused(tmp_path: Path) -> None:
    for document in ({"summary": [{"strategy": "a", "category": "b", "questions": 1,
                                   "k": 10**30}]},
                     {"summary": [{"strategy": "a", "category": "b", "questions": 10**30,
                                   "k": 1}]}, "a\x00b.json"):
        with pytest.raises(ValidationError) as caught:
            ha.ConversationEvaluation.from_json(document)  # type: ignore[arg-type]
        assert caught.value.field == "document"
    path = tmp_path / "digits.json"
    path.write_text('{"summary": [' + "9" * 5000 + "]}")
    with pytest.raises(ValidationError):
        ha.ConversationEvaluation.from_json(path)
