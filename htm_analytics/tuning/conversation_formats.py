"""Conversational memory benchmarks read into one shape: conversations of turns, and questions
whose evidence is a set of those turns.

Three layouts are read (``format=None`` detects which):

- ``"locomo"``: LoCoMo as published in snap-research/locomo: ``data/locomo10.json`` (a list
  of samples, each with ``sample_id``, ``conversation`` and ``qa``), one such sample as an
  object, or the per-sample layout of ``locomo10_v2/<n>.json`` (the conversation's keys and
  ``qa`` in one object; the sample is named ``conv-<n>`` after the file), read from a folder
  of such files or from the published ``data/locomo10.zip`` as it is. Each
  ``session_<n>`` list is a session held at ``session_<n>_date_time``; a turn's image caption
  (``blip_caption``) is kept in its text. Evidence ids are ``D<session>:<turn>``; ids that
  name no turn are dropped. Category 5 (adversarial: the question asks about something that
  was never said) counts as an abstention question; a category written ``"5"`` or ``5.0`` is
  category 5. A ``dia_id`` or ``sample_id`` given twice is refused.
- ``"longmemeval"``: LongMemEval's ``longmemeval_s.json``, ``_m`` or ``_oracle``: each
  question is a conversation of its own (its haystack of sessions, held at
  ``haystack_dates``); evidence is the turns marked ``has_answer``, or every turn of the
  ``answer_session_ids`` when no turn is marked (``has_answer`` is true or false). Question
  ids ending in ``_abs`` are abstention questions. A question id, or a session id of one
  question's ``haystack_session_ids``, given twice is refused.
- ``"jsonl"``: one JSON object per line; a turn has ``text``, a question has ``question``::

      {"conversation": "c1", "session": "s1", "time": "2024-03-01T09:00:00+00:00",
       "speaker": "Ann", "turn_id": "t1", "text": "I moved to Lisbon.", "caption": "a tram"}
      {"conversation": "c1", "question_id": "q1", "question": "Where does Ann live?",
       "evidence": ["t1"], "category": "single-hop", "answer": "Lisbon"}

  ``conversation`` defaults to ``"default"``, ``session`` to ``"1"``, ``time`` to the
  previous turn's time plus a second (the first turn: 2000-01-01 UTC); ``caption``,
  ``category`` (default ``"uncategorized"``; ``"all"`` names the total, so no question may
  have it), ``answer`` and ``question_id`` (default ``q<line>``) are optional; turn and
  question ids must be unique in their conversation. A question with ``"evidence": []`` or
  ``"abstention": true`` (true or false) should find nothing.

Turns of one session are one second apart, in order, from the session's time. Whatever the
scratch database would refuse is refused in reading, naming the record: a speaker (a
robot's name) of more than 255 characters, a time outside 1678 to 2261 in UTC.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ..errors import BenchmarkFormatError, ValidationError
from .conversation_checks import UNCATEGORIZED
from .conversation_checks import checked_category as _category
from .conversation_checks import checked_flag as _flag
from .conversation_checks import checked_moment as _moment
from .conversation_checks import checked_path as _checked_path
from .conversation_checks import checked_speaker as _speaker
from .conversation_checks import checked_text as _text
from .conversation_checks import fail as _fail
from .conversation_checks import given_twice as _twice
from .conversation_checks import read_members as _members
from .conversation_checks import repeated as _repeated
from .conversation_checks import with_caption as _with_caption
from .conversation_types import Conversation, Question, Turn

__all__ = ["Turn", "Question", "Conversation", "BenchmarkFormat", "BENCHMARK_FORMATS",
           "LOCOMO_CATEGORIES", "UNCATEGORIZED", "read_conversations", "detect_format"]

BenchmarkFormat = Literal["locomo", "longmemeval", "jsonl"]
BENCHMARK_FORMATS: tuple[str, ...] = ("locomo", "longmemeval", "jsonl")
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                     5: "adversarial"}
_LOCOMO_ABSTENTION = 5
_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def _question_id(record: str, item: Mapping[str, Any]) -> str:
    """A JSON Lines question's id: its own, or ``q<line>``."""
    return str(item.get("question_id", f"q{record.split()[-1]}"))


def _session_turns(path: Path, record: str, session: str, start: dt.datetime,
                   items: Iterable[tuple[str, str, Any]]) -> list[Turn]:
    """The turns of a session held at ``start`` (checked by the caller), one second apart."""
    return [Turn(turn_id=turn_id, session=session, speaker=speaker,
                 text=_text(text, path, f"{record}, turn {turn_id}", "text"),
                 time=_moment(start + dt.timedelta(seconds=position), path,
                              f"{record}, turn {turn_id}"))
            for position, (turn_id, speaker, text) in enumerate(items)]


# LoCoMo ------------------------------------------------------------------------------------

_LOCOMO_TIME_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")
_LOCOMO_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")


def _locomo_time(value: Any, path: Path, record: str) -> dt.datetime:
    for form in _LOCOMO_TIME_FORMATS:
        try:
            moment = dt.datetime.strptime(str(value).strip(), form).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
        return _moment(moment, path, record)
    raise _fail(path, record, f"cannot read the session time {value!r} (e.g. '1:56 pm on 8 "
                              "May, 2023')")


def _session_keys(conversation: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``session_<n>`` keys in number order, each with its number (no leading zeros)."""
    found = [(key, m.group(1).lstrip("0") or "0") for key in conversation
             if isinstance(key, str) and (m := re.fullmatch(r"session_([0-9]+)", key))]
    return sorted(found, key=lambda item: (len(item[1]), item[1], item[0]))


def _locomo_sample(conversation: Mapping[str, Any], qa: Any, name: str,
                   path: Path) -> Conversation:
    turns: list[Turn] = []
    said: dict[str, str] = {}  # each dia_id, and the turn that has it
    for key, number in _session_keys(conversation):
        record = f"{name} {key}"
        items = conversation[key]
        if not isinstance(items, list):
            raise _fail(path, record, "must be a list of turns")
        start = _locomo_time(conversation.get(f"{key}_date_time"), path,
                             f"{record}_date_time")
        rows = []
        for position, turn in enumerate(items):
            where = f"{record}[{position}]"
            if not isinstance(turn, Mapping) or not {"speaker", "dia_id"} <= set(turn):
                raise _fail(path, where, "a turn needs speaker, dia_id, text")
            dia_id = str(turn["dia_id"])
            if dia_id in said:
                raise _twice(path, where, "dia_id", dia_id, said[dia_id])
            said[dia_id] = f"{key}[{position}]"
            rows.append((dia_id, _speaker(turn["speaker"], path, where),
                         _with_caption(turn.get("text"), turn.get("blip_caption"))))
        turns += _session_turns(path, name, number, start, rows)
    known = set(said)
    if not isinstance(qa, list):
        raise _fail(path, f"{name} qa", "must be a list of questions")
    questions, unresolved = [], 0
    for position, item in enumerate(qa):
        record = f"{name} qa[{position}]"
        if not isinstance(item, Mapping) or "question" not in item:
            raise _fail(path, record, "a question needs question, evidence, category")
        category = item.get("category")
        if isinstance(category, str) and re.fullmatch(r"\s*[0-9]{1,9}\s*", category):
            category = int(category)  # "4" is category 4
        elif isinstance(category, float) and category.is_integer() \
                and abs(category) < 1e9:
            category = int(category)  # and so is 4.0
        elif isinstance(category, bool):
            category = str(category)  # not 1 (multi-hop) for true
        abstention = category == _LOCOMO_ABSTENTION
        evidence_values = item.get("evidence", [])
        if not isinstance(evidence_values, list):
            raise _fail(path, record, "evidence must be a list of turn ids")
        evidence = tuple(dict.fromkeys(
            f"D{s}:{t}" for value in evidence_values
            for s, t in _LOCOMO_EVIDENCE.findall(str(value)) if f"D{s}:{t}" in known))
        if not evidence and not abstention:
            unresolved += 1
            continue
        answer = item.get("answer", item.get("adversarial_answer"))
        questions.append(Question(
            question_id=f"{name}/{position}",
            question=_text(item["question"], path, record, "question"),
            category=LOCOMO_CATEGORIES.get(category, str(category))
            if isinstance(category, int) else _category(category, path, record),
            evidence=() if abstention else evidence,
            answer=None if answer is None else str(answer), abstention=abstention))
    return Conversation(name, tuple(turns), tuple(questions), unresolved)


def _read_locomo(data: Any, path: Path) -> list[Conversation]:
    if isinstance(data, Mapping) and "conversation" in data:
        data = [data]
    if not isinstance(data, (list, Mapping)):
        raise _fail(path, "top level", "LoCoMo is a list of samples, or one sample object")
    if isinstance(data, Mapping):  # the per-sample layout: conversation keys at the top
        stem = path.stem
        name = str(data.get("sample_id") or (f"conv-{stem}" if stem.isdigit() else stem))
        return [_locomo_sample(data, data.get("qa"), name, path)]
    conversations = []
    named: dict[str, int] = {}
    for position, sample in enumerate(data):
        if not isinstance(sample, Mapping) or not isinstance(sample.get("conversation"),
                                                             Mapping):
            raise _fail(path, f"sample {position}", "needs a conversation object and qa")
        name = str(sample.get("sample_id", f"sample-{position}"))
        if name in named:
            raise _twice(path, f"sample {position}", "sample_id", name,
                         f"sample {named[name]}")
        named[name] = position
        conversations.append(_locomo_sample(sample["conversation"], sample.get("qa"), name,
                                            path))
    return conversations


# LongMemEval -------------------------------------------------------------------------------

def _longmemeval_time(value: Any, path: Path, record: str) -> dt.datetime:
    text = re.sub(r"\s*\([A-Za-z]+\)\s*", " ", str(value)).strip()
    try:
        moment = dt.datetime.strptime(text, "%Y/%m/%d %H:%M").replace(tzinfo=dt.UTC)
    except ValueError:
        raise _fail(path, record, f"cannot read the date {value!r} (e.g. '2023/05/20 (Sat) "
                                  "02:21')") from None
    return _moment(moment, path, record)


def _read_longmemeval(data: Any, path: Path) -> list[Conversation]:
    conversations = []
    asked: dict[str, int] = {}
    for position, item in enumerate(data):
        record = f"question {item.get('question_id', position)!s}" \
            if isinstance(item, Mapping) else f"item {position}"
        needed = {"question_id", "question", "haystack_sessions", "haystack_dates"}
        if not isinstance(item, Mapping) or not needed <= set(item):
            raise _fail(path, record, f"needs {', '.join(sorted(needed))}")
        question_id = str(item["question_id"])
        if question_id in asked:
            raise _twice(path, record, "question_id", question_id, f"item {asked[question_id]}")
        asked[question_id] = position
        sessions, dates = item["haystack_sessions"], item["haystack_dates"]
        session_ids = item.get("haystack_session_ids")
        if (session_ids is None or session_ids == []) and isinstance(sessions, list):
            session_ids = [str(i) for i in range(len(sessions))]
        if not (isinstance(sessions, list) and isinstance(dates, list)
                and isinstance(session_ids, list)
                and len(sessions) == len(dates) == len(session_ids)):
            raise _fail(path, record, "haystack_sessions, haystack_dates and "
                                      "haystack_session_ids must be lists of one length")
        answer_sessions = item.get("answer_session_ids")
        if not isinstance(answer_sessions, (list, type(None))):
            raise _fail(path, record, "answer_session_ids must be a list of session ids")
        turns: list[Turn] = []
        marked: list[str] = []
        by_session: dict[str, list[str]] = {}
        for session_id, date, session in zip(map(str, session_ids), dates, sessions):
            where = f"{record}, session {session_id}"
            if session_id in by_session:
                raise _fail(path, where, f"haystack_session_ids gives {session_id!r} twice")
            if not isinstance(session, list) or not all(isinstance(t, Mapping)
                                                        for t in session):
                raise _fail(path, where, "must be a list of {role, content} turns")
            rows = [(f"{session_id}:{i + 1}", _speaker(t.get("role", "user"), path, where),
                     t.get("content")) for i, t in enumerate(session)]
            turns += _session_turns(path, record, session_id,
                                    _longmemeval_time(date, path, where), rows)
            by_session[session_id] = [r[0] for r in rows]
            marked += [r[0] for r, t in zip(rows, session) if _flag(t, "has_answer", path,
                                                                     where)]
        abstention = question_id.endswith("_abs")
        evidence = marked or [turn for s in answer_sessions or []
                              for turn in by_session.get(str(s), [])]
        unresolved = int(not evidence and not abstention)
        questions = () if unresolved else (Question(
            question_id=question_id,
            question=_text(item["question"], path, record, "question"),
            category=_category(item.get("question_type"), path, record),
            evidence=() if abstention else tuple(dict.fromkeys(evidence)),
            answer=None if item.get("answer") is None else str(item["answer"]),
            abstention=abstention),)
        conversations.append(Conversation(question_id, tuple(turns), questions, unresolved))
    return conversations


# JSON Lines --------------------------------------------------------------------------------

def _iso_time(value: Any, path: Path, record: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise _fail(path, record, f"time {value!r} is not ISO 8601") from None
    return _moment(moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC), path, record)


def _read_jsonl(lines: Sequence[str], path: Path) -> list[Conversation]:
    turns: dict[str, list[Turn]] = {}
    questions: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    last_time = _EPOCH - dt.timedelta(seconds=1)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        record = f"line {number}"
        try:
            item = json.loads(line)
        except RecursionError:
            raise _fail(path, record, "nested too deeply to be a turn or question") from None
        except json.JSONDecodeError as exc:
            raise _fail(path, record, f"not JSON ({exc.msg})") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise _fail(path, record, f"not JSON ({exc})") from None
        if not isinstance(item, Mapping):
            raise _fail(path, record, "must be a JSON object")
        conversation = str(item.get("conversation", "default"))
        if "question" in item:
            questions.setdefault(conversation, []).append((record, item))
        elif "text" in item or "caption" in item:
            # A time checked to be before 2262: the next second is still a datetime.
            moment = _iso_time(item["time"], path, record) if "time" in item \
                else _moment(last_time + dt.timedelta(seconds=1), path, record)
            last_time = moment
            turns.setdefault(conversation, []).append(Turn(
                turn_id=str(item.get("turn_id", f"t{number}")),
                session=str(item.get("session", "1")),
                speaker=_speaker(item.get("speaker", "user"), path, record),
                text=_text(_with_caption(item.get("text"), item.get("caption")), path, record,
                           "text"),
                time=moment))
        else:
            raise _fail(path, record, "a turn has 'text', a question has 'question'")
    conversations = []
    for name in dict.fromkeys([*turns, *questions]):
        known = {t.turn_id for t in turns.get(name, [])}
        if len(known) < len(turns.get(name, [])):
            twice = _repeated(t.turn_id for t in turns[name])
            raise _fail(path, f"conversation {name!r}", f"turn ids {twice} are given twice")
        ids = [_question_id(record, item) for record, item in questions.get(name, [])]
        if len(set(ids)) < len(ids):
            raise _fail(path, f"conversation {name!r}",
                        f"question ids {_repeated(ids)} are given twice")
        asked = []
        for record, item in questions.get(name, []):
            evidence = item.get("evidence", [])
            if not isinstance(evidence, list):
                raise _fail(path, record, "evidence must be a list of turn ids")
            missing = [str(e) for e in evidence if str(e) not in known]
            if missing:
                raise _fail(path, record, f"evidence {missing} names no turn of conversation "
                                          f"{name!r}")
            asked.append(Question(
                question_id=_question_id(record, item),
                question=_text(item["question"], path, record, "question"),
                category=_category(item.get("category"), path, record),
                evidence=tuple(dict.fromkeys(str(e) for e in evidence)),
                answer=None if item.get("answer") is None else str(item["answer"]),
                abstention=_flag(item, "abstention", path, record) or not evidence))
        if not turns.get(name):
            raise _fail(path, f"conversation {name!r}", "has questions but no turns")
        conversations.append(Conversation(name, tuple(turns[name]), tuple(asked)))
    return conversations


# Detection ---------------------------------------------------------------------------------

def detect_format(data: Any) -> BenchmarkFormat | None:
    """The layout of parsed JSON: ``"locomo"``, ``"longmemeval"`` or None."""
    first = data[0] if isinstance(data, list) and data else data
    if not isinstance(first, Mapping):
        return None
    if "haystack_sessions" in first:
        return "longmemeval"
    if "qa" in first and ("conversation" in first or "speaker_a" in first
                          or any(re.fullmatch(r"session_\d+", k) for k in first)):
        return "locomo"
    return None


def read_conversations(path: str | Path, *, format: str | None = None) -> list[Conversation]:
    """Read a conversational benchmark (see the module's description of the layouts).

    Parameters
    ----------
    path : str or Path
        A benchmark file, a folder of them (LoCoMo's per-sample ``locomo10_v2/``: every
        ``*.json`` and ``*.jsonl`` file, ``2.json`` before ``10.json``), or a ``.zip``
        holding them (LoCoMo's ``data/locomo10.zip`` as published).
    format : {"locomo", "longmemeval", "jsonl"}, optional
        Detected from the content when not given.

    Returns
    -------
    list of Conversation

    Raises
    ------
    BenchmarkFormatError
        The file cannot be read, its layout is unknown, a record is malformed (the
        message and ``record`` name it: a sample, session, question or line; an id given
        twice, a speaker or time no memory can hold), a folder or archive holds no
        benchmark file, or two files (or one) hold conversations of one name.
    ValidationError
        ``path`` is no file name (``field="path"``), or ``format`` is none of the
        layouts.
    """
    path = _checked_path(path)
    if format is not None and (not isinstance(format, str) or format not in BENCHMARK_FORMATS):
        raise ValidationError(f"must be one of {', '.join(BENCHMARK_FORMATS)}, got {format!r}",
                              field="format")
    members = _members(path)
    if not members:
        raise BenchmarkFormatError(f"{path} holds no .json or .jsonl benchmark file",
                                   path=str(path))
    conversations: list[Conversation] = []
    seen: dict[str, Path] = {}
    for member, raw in members:
        for conversation in _parse(raw, member, format):
            name = conversation.conversation_id
            if name in seen:
                raise _fail(member, f"conversation {name!r}",
                            f"is also in {seen[name].name}" if seen[name] != member
                            else "is given twice")
            seen[name] = member
            conversations.append(conversation)
    return conversations


def _parse(raw: str, path: Path, format: str | None) -> list[Conversation]:
    """One file's conversations."""
    if format == "jsonl":
        return _read_jsonl(raw.splitlines(), path)
    try:
        data = json.loads(raw)
    except RecursionError:
        raise _fail(path, "top level", "nested too deeply to be a benchmark") from None
    except json.JSONDecodeError as exc:
        if format is None and exc.msg == "Extra data":  # several JSON values: JSON Lines
            return _read_jsonl(raw.splitlines(), path)
        raise _fail(path, f"line {exc.lineno}", f"not JSON ({exc.msg})") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise _fail(path, "top level", f"not JSON ({exc})") from None
    detected = detect_format(data)
    if format is None and detected is None and isinstance(data, Mapping) \
            and ("question" in data or "text" in data):
        return _read_jsonl(raw.splitlines(), path)  # JSON Lines of a single record
    chosen = format or detected
    if chosen is None or (detected is not None and detected != chosen):
        raise _fail(path, "top level", "not a LoCoMo, LongMemEval or JSON Lines benchmark "
                                       "file" if chosen is None else f"is not {chosen}")
    if chosen == "longmemeval":
        if not isinstance(data, list):
            raise _fail(path, "top level", "LongMemEval is a list of questions")
        return _read_longmemeval(data, path)
    return _read_locomo(data, path)
