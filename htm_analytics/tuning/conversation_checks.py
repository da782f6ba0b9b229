"""Checks of conversational benchmarks, so that what cannot be scored is refused as a typed
error before any scratch database exists: the records of a file (each fault a
:class:`~htm_analytics.errors.BenchmarkFormatError` naming the record), the files behind a
path, conversations given as objects, and the arguments and documents around them."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import BenchmarkFormatError, ValidationError
from ..validation import validate_content, validate_datetime, validate_name
from .conversation_types import Conversation, Question, Turn

__all__ = ["UNCATEGORIZED", "fail", "checked_text", "checked_speaker", "checked_moment",
           "checked_flag", "given_twice", "repeated", "checked_category", "with_caption",
           "checked_path", "read_members", "checked_conversations", "checked_strategies",
           "checked_names", "check_summary", "document_frames"]

UNCATEGORIZED = "uncategorized"  # a question without a category ("all" is the total)


# The records of a file ---------------------------------------------------------------------

def fail(path: Path, record: str, message: str) -> BenchmarkFormatError:
    """The error for a malformed ``record`` of the file ``path``."""
    return BenchmarkFormatError(f"{path.name}, {record}: {message}", path=str(path),
                                record=record)


def checked_text(value: Any, path: Path, record: str, name: str) -> str:
    """Text a memory can hold (a number is its digits)."""
    try:
        return validate_content(value if not isinstance(value, (int, float)) else str(value),
                                field=name)
    except ValidationError as exc:
        raise fail(path, record, str(exc)) from None


def checked_speaker(value: Any, path: Path, record: str) -> str:
    """A speaker: the name of the robot its turns are remembered by (at most 255
    characters)."""
    try:
        return validate_name(value if not isinstance(value, (int, float)) else str(value),
                             field="speaker")
    except ValidationError as exc:
        raise fail(path, record, str(exc)) from None


def checked_moment(moment: dt.datetime, path: Path, record: str) -> dt.datetime:
    """``moment`` if a memory can be remembered at it (1678 to 2261 in UTC)."""
    try:
        validate_datetime(moment, field="time")
    except ValidationError as exc:
        raise fail(path, record, str(exc)) from None
    return moment


def checked_flag(item: Mapping[str, Any], key: str, path: Path, record: str) -> bool:
    """A boolean field, false when missing: a string such as ``"false"`` is refused."""
    value = item.get(key, False)
    if not isinstance(value, bool):
        raise fail(path, record, f"{key} must be true or false, got {value!r}")
    return value


def given_twice(path: Path, record: str, kind: str, value: str,
                first: str) -> BenchmarkFormatError:
    """The error for an id that names two records: the scores would mix them up."""
    return fail(path, record, f"{kind} {value!r} is given twice (first at {first})")


def repeated(values: Iterable[str]) -> list[str]:
    """Up to five of ``values`` that occur more than once."""
    counts = Counter(values)
    return sorted(value for value, n in counts.items() if n > 1)[:5]


def checked_category(value: Any, path: Path, record: str) -> str:
    """A question's category: the summary adds the total of every question as ``"all"``."""
    if value is None:
        return UNCATEGORIZED
    category = str(value)
    if category == "all":
        raise fail(path, record, "category 'all' is the name of the total over every "
                                 "question; give another")
    return category


def with_caption(text: Any, caption: Any) -> Any:
    """A turn's text with its image's caption, when it shared one."""
    if isinstance(caption, str) and caption.strip():
        body = text.strip() if isinstance(text, str) else ""
        return f"{body} [image: {caption.strip()}]".strip()
    return text


# The files behind a path -------------------------------------------------------------------

def checked_path(path: Any) -> Path:
    """``path`` as a Path: a string or path-like (not bytes) without a NUL byte."""
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise ValidationError(f"must be a file name (str or Path), got {type(path).__name__}",
                              field="path")
    if "\x00" in os.fspath(path):
        raise ValidationError("must not contain NUL bytes", field="path")
    return Path(path)


def _natural_key(name: str) -> list[Any]:
    """``2.json`` before ``10.json``: digit runs compare as numbers (by length, then
    digits: no run is too long to compare)."""
    return [(len(part.lstrip("0")), part.lstrip("0"), part) if index % 2 else part
            for index, part in enumerate(re.split(r"([0-9]+)", name))]


def read_members(path: Path) -> list[tuple[Path, str]]:
    """The benchmark texts behind ``path``: a file, a folder of ``*.json`` / ``*.jsonl``
    files (LoCoMo's per-sample ``locomo10_v2/``), or a ``.zip`` of them (LoCoMo's
    ``data/locomo10.zip``), in natural order; each with the path its records are named by."""
    try:
        if path.is_dir():
            files = sorted((f for f in path.iterdir() if f.suffix in (".json", ".jsonl")
                            and f.is_file()), key=lambda f: _natural_key(f.name))
            return [(f, f.read_text(encoding="utf-8")) for f in files]
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                names = sorted((n for n in archive.namelist()
                                if n.endswith((".json", ".jsonl"))
                                and not n.startswith("__MACOSX/")),
                               key=lambda n: _natural_key(Path(n).name))
                return [(path / name, archive.read(name).decode("utf-8")) for name in names]
        return [(path, path.read_text(encoding="utf-8"))]
    except (OSError, UnicodeDecodeError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError,
            zlib.error, NotImplementedError, RuntimeError) as exc:
        # An archive member compressed in a way zipfile cannot read (NotImplementedError),
        # encrypted (RuntimeError) or cut short (EOFError, zlib.error) too.
        raise BenchmarkFormatError(f"cannot read {path}: {exc}", path=str(path)) from exc


# Conversations given as objects ------------------------------------------------------------

def _refuse(where: str, message: str) -> ValidationError:
    return ValidationError(f"{where}: {message}", field="source")


def checked_conversations(source: Any, *, speaker_prefix: bool) -> list[Conversation]:
    """``source`` (conversations, as a list) if every turn can be remembered and every
    question scored as :func:`~htm_analytics.evaluate_conversations` remembers and scores
    them: conversation ids given once, turn and question ids once in their conversation,
    speakers that can name a robot, times and texts a memory can hold (``"<speaker>:
    <text>"`` with ``speaker_prefix``), evidence naming turns.

    Raises
    ------
    ValidationError
        ``field="source"``, naming the conversation and its turn or question.
    """
    if isinstance(source, (str, bytes, Mapping)) or not isinstance(source, Iterable):
        raise ValidationError(f"must be a path or a sequence of Conversation, got "
                              f"{type(source).__name__}", field="source")
    given = list(source)
    seen: set[str] = set()
    for position, conversation in enumerate(given):
        if not isinstance(conversation, Conversation):
            raise _refuse(f"item {position}", "must be a path or a sequence of Conversation, "
                          f"got {type(conversation).__name__}")
        name = conversation.conversation_id
        where = f"conversation {name!r}"
        if not isinstance(name, str) or name in seen:
            raise _refuse(where, "is given twice" if name in seen else "its id is no string")
        seen.add(name)
        turns, questions = list(conversation.turns), list(conversation.questions)
        if not all(isinstance(t, Turn) and isinstance(t.turn_id, str) for t in turns):
            raise _refuse(where, "turns must be Turn with a string turn_id")
        if not all(isinstance(q, Question) and isinstance(q.question_id, str)
                   for q in questions):
            raise _refuse(where, "questions must be Question with a string question_id")
        for kind, ids in (("turn", [t.turn_id for t in turns]),
                          ("question", [q.question_id for q in questions])):
            if len(set(ids)) < len(ids):
                raise _refuse(where, f"{kind} ids {repeated(ids)} are given twice")
        for turn in turns:
            _check_turn(turn, f"{where}, turn {turn.turn_id!r}", speaker_prefix)
        known = {t.turn_id for t in turns}
        for question in questions:
            _check_question(question, f"{where}, question {question.question_id!r}", known)
    return given


def _check_turn(turn: Any, where: str, speaker_prefix: bool) -> None:
    try:
        speaker = validate_name(turn.speaker, field="speaker")
        text = validate_content(turn.text, field="text")
        validate_datetime(turn.time, field="time")
        if speaker_prefix:
            validate_content(f"{speaker}: {text}", field="text with its speaker")
    except ValidationError as exc:
        raise _refuse(where, str(exc)) from None


def _check_question(question: Any, where: str, known: set[str]) -> None:
    try:
        validate_content(question.question, field="question")
    except ValidationError as exc:
        raise _refuse(where, str(exc)) from None
    if not isinstance(question.category, str) or question.category == "all":
        raise _refuse(where, "category must be a string other than 'all' (the total)")
    if not isinstance(question.abstention, bool):
        raise _refuse(where, "abstention must be True or False")
    evidence = question.evidence
    if not isinstance(evidence, (tuple, list)) or not all(isinstance(e, str)
                                                          for e in evidence):
        raise _refuse(where, "evidence must be a tuple of turn ids")
    missing = [e for e in evidence if e not in known]
    if missing:
        raise _refuse(where, f"evidence {missing[:5]} names no turn of its conversation")
    if not evidence and not question.abstention:
        raise _refuse(where, "has no evidence: give it some, or abstention=True")


# Arguments and documents -------------------------------------------------------------------

def checked_strategies(strategies: Any, known: Sequence[str]) -> list[str]:
    """One strategy or a non-empty sequence of them, each one of ``known``."""
    listed = [strategies] if isinstance(strategies, str) else strategies
    if not isinstance(listed, (list, tuple)) or not all(isinstance(s, str) for s in listed):
        raise ValidationError(f"must be a strategy or a list of them; use {tuple(known)}",
                              field="strategies")
    chosen = list(dict.fromkeys(listed))
    unknown = set(chosen) - set(known)
    if unknown or not chosen:
        raise ValidationError(f"unknown strategies {sorted(unknown)}; use {tuple(known)}",
                              field="strategies")
    return chosen


def checked_names(names: Any, *, field: str) -> list[str]:
    """A name or a sequence of names (strings), as a list."""
    listed = [names] if isinstance(names, str) else names
    if not isinstance(listed, (list, tuple)) or not all(isinstance(n, str) for n in listed):
        raise ValidationError("must be a conversation id or a list of them", field=field)
    return list(listed)


def document_frames(document: Any, names: Sequence[str]
                    ) -> tuple[dict[str, pd.DataFrame], bool]:
    """The frames ``names`` and ``interrupted`` of the JSON document of
    :func:`~htm_analytics.evaluate_conversations` (a mapping, or a file holding it), checked
    as :meth:`~htm_analytics.ConversationEvaluation.from_json` documents."""
    if isinstance(document, (str, Path)):
        try:
            document = json.loads(Path(document).read_text(encoding="utf-8"))
        except RecursionError:
            raise ValidationError(f"cannot read {document}: nested too deeply",
                                  field="document") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            # ValueError: not JSON, an integer of too many digits, a NUL in the name
            raise ValidationError(f"cannot read {document}: {exc}",
                                  field="document") from exc
    if not isinstance(document, Mapping) or not isinstance(document.get("summary"), list):
        raise ValidationError("must be the JSON document of evaluate_conversations "
                              "(htm-analytics eval conversations --json): no 'summary' "
                              "list", field="document")
    frames = {}
    for name in names:
        records = document.get(name) or []
        if not isinstance(records, list) or not all(isinstance(r, Mapping)
                                                    for r in records):
            raise ValidationError(f"{name!r} must be a list of records", field="document")
        frames[name] = pd.DataFrame.from_records(records)
    summary = frames["summary"]
    missing = {"strategy", "category", "questions", "k"} - set(summary.columns)
    if len(summary) and missing:
        raise ValidationError(f"the summary has no column {sorted(missing)}",
                              field="document")
    try:
        if len(summary):
            frames["summary"] = summary.astype({"strategy": "string", "category": "string",
                                                "questions": "int64", "k": "int64"})
    except (TypeError, ValueError, OverflowError) as exc:  # k: 10**30 is no int64
        raise ValidationError(f"the summary's columns have the wrong types: {exc}",
                              field="document") from exc
    check_summary(frames["summary"])
    return frames, bool(document.get("interrupted", False))


_SHARES = re.compile(r"^(recall_any|recall_all|ndcg|mrr)_at_\d+$")


def check_summary(summary: pd.DataFrame) -> None:
    """A summary read back must be one: shares in [0, 1], latencies of at least 0 (a
    missing value is NaN), one row per strategy and category."""
    for column in summary.columns:
        share = bool(_SHARES.match(str(column)))
        if not (share or str(column).startswith("latency_")):
            continue
        values = pd.to_numeric(summary[column], errors="coerce")
        wrong = values.isna() & summary[column].notna() | (values < 0) | (share & (values > 1))
        if wrong.any():
            raise ValidationError(
                f"the summary's {column} holds {summary[column][wrong].iloc[0]!r}: "
                + ("a share from 0 to 1" if share else "milliseconds, 0 or more")
                + " was expected", field="document")
    if len(summary) and summary.duplicated(["strategy", "category"]).any():
        raise ValidationError("the summary has two rows of one strategy and category",
                              field="document")
