"""Conversation benchmarks read: the three layouts (LoCoMo, LongMemEval, JSON lines) from
small files written for the suite, and every malformed or broken file, or result document,
refused as a typed error naming its record, before any database."""

from __future__ import annotations

import datetime as dt
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conversation_helpers import DATA, locomo_sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import htm_analytics as ha
from htm_analytics.errors import BenchmarkFormatError, ValidationError
from htm_analytics.tuning.conversation_formats import read_conversations

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


# Refused as a typed error, before any database --------------------------------------------

def _haystack(question_id: str, session_ids: Any, **extra: Any) -> dict[str, Any]:
    return {"question_id": question_id, "question": "alpha?", "question_type": "single",
            "haystack_session_ids": session_ids,
            "haystack_dates": ["2023/05/20 (Sat) 02:21"] * 2,
            "haystack_sessions": [[{"role": "user", "content": "alpha bravo",
                                    "has_answer": True}],
                                  [{"role": "user", "content": "zulu yankee"}]], **extra}


_ALPHA = [{"question": "alpha", "evidence": ["D1:1"], "category": 4}]
_TWICE = [  # (name, content, record): an id given twice gave silently wrong scores
    ("dia.json", [locomo_sample([{"speaker": "A", "dia_id": "D1:1", "text": "alpha bravo"},
                                  {"speaker": "B", "dia_id": "D1:1", "text": "zulu yankee"}],
                                 _ALPHA)], "conv-1 session_1[1]"),
    ("sessions.json", [_haystack("q1", ["s1", "s1"])], "question q1, session s1"),
    ("samples.json", [locomo_sample([{"speaker": "A", "dia_id": "D1:1", "text": "alpha"}],
                                     _ALPHA),
                      locomo_sample([{"speaker": "A", "dia_id": "D1:1", "text": "zulu"}],
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
    ("superscript.json", json.dumps([locomo_sample(
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


def test_an_integral_float_category_is_the_category(tmp_path: Path) -> None:
    path = tmp_path / "floats.json"
    path.write_text(json.dumps([locomo_sample(
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
