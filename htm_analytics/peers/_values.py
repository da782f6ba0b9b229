"""Source values as an import stores them: times, JSON records, tags, vectors, names, keys.

Each function here turns what a source column holds (whatever its writer put there) into
what the store takes, or says why it cannot: a row the store would refuse is rejected with
that reason (and kept as a record), never left to fail its chunk.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..store.sources import SourceInfinity, SourceJsonText
from ..validation import (
    EARLIEST,
    LATEST,
    MAX_EMBEDDING_DIMENSION,
    checked_vector,
    validate_json,
    validate_name,
)

__all__ = [
    "EMPTY_KEY",
    "as_utc",
    "embedding_problem",
    "json_text",
    "jsonable",
    "robot_name",
    "slug_tag",
    "storable_key",
    "storable_record",
    "vector_or_none",
]

_NOT_TAG = re.compile(r"[^a-z0-9]+")
#: How an empty source key (a SEAF tool named ``""``) is recorded: ``import_records`` keys
#: are never empty. A key that starts with it gets one more in front, so no two differ.
EMPTY_KEY = "∅"


def as_utc(value: Any) -> dt.datetime | None:
    """A timestamp from a source column (SQLite text or a datetime) as aware UTC, or None
    when there is no moment the store can remember at: no value, text that is no time,
    PostgreSQL's ``infinity`` and ``-infinity``, and a time outside the years the store
    holds (:data:`~htm_analytics.validation.EARLIEST` to ``LATEST``, 1678 to 2261)."""
    if value is None or value == "" or _infinity(value):
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if not isinstance(value, dt.datetime):
        return None
    try:
        # SQLite's CURRENT_TIMESTAMP and naive columns are UTC.
        when = value.replace(tzinfo=dt.UTC) if value.tzinfo is None \
            else value.astimezone(dt.UTC)
    except (OverflowError, ValueError):  # an offset taking it past year 1 or 9999
        return None
    return when if EARLIEST <= when <= LATEST else None


def _infinity(value: Any) -> str | None:
    """``"infinity"`` or ``"-infinity"`` for a source's infinite timestamps (as
    :func:`~htm_analytics.store.sources.stream_rows` reads them), else None: a real
    ``0001-01-01 00:00`` stays a time."""
    return value.label if isinstance(value, SourceInfinity) else None


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON: timestamps in ISO 8601 (infinities as PostgreSQL writes
    them), UUIDs and decimals as text, vectors as lists of floats, bytes as base64,
    non-finite floats as None. Nested values are walked without recursion: a source's
    ``jsonb`` may nest deeper than Python's recursion limit."""
    holder: list[Any] = [None]
    todo: list[tuple[Any, Any, Any]] = [(holder, 0, value)]
    while todo:
        parent, slot, item = todo.pop()
        parent[slot], children = _plain(item)
        todo.extend(reversed(children))  # in order: of two keys with one text, the last wins
    return holder[0]


def _plain(value: Any) -> tuple[Any, list[tuple[Any, Any, Any]]]:
    """``value`` as plain JSON, a container still empty, with the ``(container, slot,
    value)`` of each of its items to fill in."""
    if isinstance(value, SourceJsonText):  # kept marked: storable_record rejects its row
        return value, []
    if value is None or isinstance(value, (bool, int, str)):
        return (value.replace("\x00", "") if isinstance(value, str) else value), []
    if isinstance(value, float):
        return (value if math.isfinite(value) else None), []
    if isinstance(value, Mapping):
        mapping: dict[str, Any] = {}
        items = []
        for key, item in value.items():
            mapping[str(key)] = None
            items.append((mapping, str(key), item))
        return mapping, items
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return (_infinity(value) or value.isoformat()), []
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value), []
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii"), []
    if isinstance(value, np.generic):
        return _plain(value.item())
    if hasattr(value, "to_numpy"):  # pgvector's Vector
        value = value.to_numpy()
    if isinstance(value, np.ndarray):
        return [_plain(float(x))[0] for x in value.ravel()], []
    if isinstance(value, dt.timedelta):
        return value.total_seconds(), []
    if isinstance(value, (list, tuple, set)):
        sequence: list[Any] = [None] * len(value)
        return sequence, [(sequence, i, item) for i, item in enumerate(value)]
    return str(value), []


_UNREAD_JSON = ("is JSON nested too deep or with too long a number for Python to read "
                "(kept as its text)")


def storable_record(record: dict[str, Any]) -> str | None:
    """Make a source row's record one ``import_records`` keeps, in place, and say why it
    was not: each column the store's JSON refuses (nested deeper than
    :data:`~htm_analytics.validation.MAX_JSON_DEPTH` levels, counting the record, or an
    integer of more than 300 digits) becomes its JSON text, so nothing is lost, and the
    first such column's reason (naming it) is returned, as for a column the source's JSON
    reader could not read (:class:`~htm_analytics.store.sources.SourceJsonText`, already
    text). None when the record was whole."""
    unread = [column for column, value in record.items() if isinstance(value, SourceJsonText)]
    for column in unread:
        record[column] = str(record[column])
    reason = f"{unread[0]}: {_UNREAD_JSON}" if unread else None
    try:
        validate_json(record, field="record")
    except ValidationError:
        pass
    else:
        return reason
    for column, value in list(record.items()):
        try:
            validate_json({column: value}, field=column)  # as deep as the record holds it
        except ValidationError as exc:
            record[column] = json_text(value)
            reason = reason or str(exc)
    return reason


def json_text(value: Any) -> str:
    """The JSON text of a :func:`jsonable` value, written without recursion (it may nest
    deeper than Python's recursion limit), in :func:`json.dumps`' layout; non-ASCII
    characters are escaped only when the text would not be valid UTF-8 (a lone
    surrogate), so that it is always storable."""
    text = _written(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _written(value, ensure_ascii=True)
    return text


def _written(value: Any, *, ensure_ascii: bool) -> str:
    parts: list[str] = []
    todo: list[tuple[bool, Any]] = [(False, value)]  # (is a piece of text, what)
    while todo:
        is_text, item = todo.pop()
        if is_text:
            parts.append(item)
            continue
        pieces: list[tuple[bool, Any]] = []
        if isinstance(item, Mapping):
            for key, element in item.items():
                pieces += [(True, ", " if pieces else ""),
                           (True, json.dumps(str(key), ensure_ascii=ensure_ascii) + ": "),
                           (False, element)]
            todo += [(True, "}"), *reversed(pieces), (True, "{")]
        elif isinstance(item, (list, tuple)):
            for element in item:
                pieces += [(True, ", " if pieces else ""), (False, element)]
            todo += [(True, "]"), *reversed(pieces), (True, "[")]
        else:
            parts.append(json.dumps(item, ensure_ascii=ensure_ascii))
    return "".join(parts)


def slug_tag(*segments: Any) -> str | None:
    """A valid tag from free text segments: ``("person", "Carlos Díaz")`` gives
    ``person:carlos-d-az``; None when a segment has no letter or digit left."""
    parts = []
    for segment in segments:
        part = _NOT_TAG.sub("-", str(segment).lower()).strip("-")
        if not part:
            return None
        parts.append(part[:60])
    return ":".join(parts)


def vector_or_none(value: Any, *, field: str = "embedding") -> np.ndarray | None:
    """A stored vector (pgvector's, a list, or its text ``[1,2,3]``) as float32, or None
    when absent; a :class:`~htm_analytics.ValidationError` naming ``field`` when the value
    is no vector."""
    if value is None:
        return None
    try:
        if hasattr(value, "to_numpy"):
            value = value.to_numpy()
        if isinstance(value, str):
            value = [float(x) for x in value.strip().strip("[]").split(",") if x.strip()]
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(f"is not a vector ({exc})", field=field) from None


def embedding_problem(value: Any, *, field: str = "embedding") -> tuple[np.ndarray | None,
                                                                       str | None]:
    """``value`` as a vector the store takes, or why it is none (a reason naming
    ``field``)."""
    try:
        vector = vector_or_none(value, field=field)
    except ValidationError as exc:
        return None, str(exc)
    if vector is None:
        return None, None
    if vector.ndim != 1 or not 0 < vector.size <= MAX_EMBEDDING_DIMENSION:
        return None, f"{field}: dimension not in 1..{MAX_EMBEDDING_DIMENSION}"
    if not np.isfinite(vector).all():
        return None, f"{field}: not finite"
    if not np.abs(vector).max() > 0:
        return None, f"{field}: all zeros"
    try:
        return checked_vector(vector, field=field), None  # norms as pgvector sums them
    except ValidationError as exc:
        return None, str(exc)


def robot_name(value: Any, *, field: str) -> str:
    """A source's agent or session id as a robot name: numbers and UUIDs as their text (as
    every system's ids are compared), then :func:`~htm_analytics.validation.validate_name`
    (a :class:`~htm_analytics.ValidationError` naming the source column ``field``)."""
    if isinstance(value, (int, float, uuid.UUID, decimal.Decimal)):
        value = str(value)
    return validate_name(value, field=field)


def storable_key(key: str) -> str:
    """A source key as ``import_records`` keeps it: as it is, but that an empty one is
    :data:`EMPTY_KEY` (and one starting with it gets another in front)."""
    return EMPTY_KEY + key if not key or key.startswith(EMPTY_KEY) else key
