"""Checks applied at the API boundary, before anything touches the database."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from ..errors import ValidationError
from .vectors import (
    MAX_EMBEDDING_DIMENSION,
    check_norms,
    checked_vector,
    prepare_embedding,
    real_matrix,
    real_vector,
)

__all__ = [
    "validate_flag",
    "validate_settings",
    "MAX_EMBEDDING_DIMENSION",
    "TAG_PATTERN",
    "validate_content",
    "validate_number",
    "validate_token_count",
    "validate_tag",
    "tag_ancestors",
    "validate_positive_int",
    "validate_memory_size",
    "validate_id",
    "validate_ids",
    "validate_timeframe",
    "validate_json",
    "validate_tag_list",
    "validate_datetime",
    "validate_moment",
    "validate_dimension",
    "validate_duration",
    "prepare_embedding",
    "checked_vector",
    "check_norms",
    "MAX_NAME_LENGTH",
    "validate_name",
    "validate_names",
    "validate_embedding_model",
    "real_vector",
    "real_matrix",
    "validate_key",
    "validate_list",
    "validate_frame",
]

MAX_CONTENT_BYTES = 1_000_000
MAX_TAG_LENGTH = 255
MAX_NAME_LENGTH = 255
MAX_BIGINT = 2**63 - 1
MAX_INT = 2**31 - 1
MAX_JSON_DEPTH = 64
# Dates the analyses can bucket and PostgreSQL, Python and pandas all represent.
EARLIEST = dt.datetime(1678, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(2261, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
TAG_PATTERN = re.compile(r"^[a-z0-9-]+(?::[a-z0-9-]+)*$")


def validate_content(content: Any, *, field: str = "content") -> str:
    """Return ``content`` stripped; reject non-strings, blank text, NUL bytes, lone surrogates
    and text over 1,000,000 UTF-8 bytes."""
    if not isinstance(content, str):
        raise ValidationError(f"must be a string, got {type(content).__name__}", field=field)
    stripped = content.strip()
    if not stripped:
        raise ValidationError("must not be empty or whitespace", field=field)
    if "\x00" in stripped:
        raise ValidationError("must not contain NUL bytes (PostgreSQL text cannot hold them)",
                              field=field)
    _check_encodable(stripped, field)
    if len(stripped.encode("utf-8")) > MAX_CONTENT_BYTES:
        raise ValidationError(f"is larger than {MAX_CONTENT_BYTES} bytes", field=field)
    return stripped


def _check_encodable(text: str, field: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"contains a lone surrogate (U+{ord(text[exc.start]):04X} at {exc.start}), which "
            "is not valid UTF-8", field=field) from None


def validate_tag(tag: Any, *, field: str = "tag") -> str:
    """Return ``tag`` if it is lowercase ``a-z0-9-`` segments joined by ``:``."""
    if not isinstance(tag, str):
        raise ValidationError(f"must be a string, got {type(tag).__name__}", field=field)
    if len(tag) > MAX_TAG_LENGTH or not TAG_PATTERN.match(tag):
        raise ValidationError(
            f"{tag!r} is not a valid tag: use lowercase a-z, 0-9 and '-' in segments joined "
            "by ':' (for example 'database:postgresql'), at most 255 characters",
            field=field,
        )
    return tag


def validate_tag_list(tags: Any, *, field: str = "tags") -> list[Any]:
    """A list or tuple of tags (not one string, not a set: tags keep the caller's order)."""
    if not isinstance(tags, (list, tuple)):
        raise ValidationError(f"must be a list of tags, got {type(tags).__name__}", field=field)
    return list(tags)


def tag_ancestors(tag: str) -> list[str]:
    """The tag and each ancestor, root first: ``a:b:c`` gives ``['a', 'a:b', 'a:b:c']``."""
    parts = tag.split(":")
    return [":".join(parts[: i + 1]) for i in range(len(parts))]


def validate_number(value: Any, *, field: str, minimum: float | None = None,
                    maximum: float | None = None, integer: bool = False,
                    exclusive: bool = False) -> Any:
    """Return ``value`` as an ``int`` (``integer=True``) or a ``float``, if it is a real,
    finite number within the bounds; raise :class:`ValidationError` naming ``field``.

    Booleans, strings, NaN and infinities are refused; NumPy scalars are accepted.
    ``exclusive`` makes ``minimum`` a strict bound (``value > minimum``). An integer without
    ``maximum`` is bounded by PostgreSQL's ``bigint``: every such value is bound to SQL.
    """
    kinds: tuple[type, ...] = (int, np.integer) if integer else (int, float, np.integer,
                                                                 np.floating)
    kind = "an integer" if integer else "a number"
    if integer and minimum == 1 and not exclusive:
        kind = "a positive integer"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, kinds) \
            or (not integer and not _finite_float(value)):
        raise ValidationError(f"must be {kind}, got {value!r:.60}", field=field)
    value = cast(float, value)
    if integer and maximum is None:
        maximum = MAX_BIGINT
    if minimum is not None and (value <= minimum if exclusive else value < minimum):
        bound = "" if kind == "a positive integer" else (
            f" > {minimum}" if exclusive else f" >= {minimum}")
        raise ValidationError(f"must be {kind}{bound}, got {value!r}", field=field)
    if maximum is not None and value > maximum:
        raise ValidationError(f"must be at most {maximum}, got {value!r}", field=field)
    return int(value) if integer else float(value)


def _finite_float(value: Any) -> bool:
    """Whether ``value`` is a finite float: an int past float's range (10**400) is not."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def validate_positive_int(value: Any, *, field: str, maximum: int | None = None) -> int:
    """:func:`validate_number` for an integer from 1 to ``maximum`` (default ``bigint``)."""
    return int(validate_number(value, field=field, minimum=1, maximum=maximum, integer=True))


_MEMORY_UNITS = {"kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}



def validate_flag(value: Any, *, field: str) -> bool:
    """A bool (numpy's too): a truthy string or number is no answer to a yes-or-no option."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"must be True or False, got {value!r:.40}", field=field)
    return bool(value)


def validate_settings(value: Any, *, field: str, maximum: int, minimum: int = 1) -> list[int]:
    """One positive integer or a non-empty sequence of them, from ``minimum`` to
    ``maximum``, as a list (a sweep of settings); a lone float, bool or string is refused
    by name."""
    if isinstance(value, (int, float, complex, np.number, np.bool_)):
        values: list[Any] = [value]
    elif isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValidationError(f"must be a positive integer or a sequence of them, got "
                              f"{type(value).__name__}", field=field)
    else:
        values = list(value.ravel()) if isinstance(value, np.ndarray) else list(value)
    if not values:
        raise ValidationError("must hold at least one setting: an empty sweep measures "
                              "nothing", field=field)
    settings = [validate_positive_int(v, field=field, maximum=maximum) for v in values]
    below = [v for v in settings if v < minimum]
    if below:
        raise ValidationError(f"must be from {minimum} to {maximum}, got {below[0]}",
                              field=field)
    return settings


def validate_memory_size(value: Any, *, field: str) -> int:
    """A PostgreSQL memory setting written with its unit (``"512MB"``, ``"8GB"``: ``kB``,
    ``MB``, ``GB`` or ``TB``, as the server spells them), from 1MB to the server's maximum;
    returned in kB."""
    match = re.fullmatch(r"\s*([0-9]{1,13})\s*(kB|MB|GB|TB)\s*", value) \
        if isinstance(value, str) else None
    if match is None:
        raise ValidationError(f"must be a size such as '512MB' or '8GB', got {value!r}",
                              field=field)
    kilobytes = int(match[1]) * _MEMORY_UNITS[match[2]]
    if not 1024 <= kilobytes <= MAX_INT:
        raise ValidationError(f"must be from 1MB to {MAX_INT}kB, got {value!r}", field=field)
    return kilobytes


def validate_token_count(value: Any, *, field: str = "token_count") -> int:
    """A token count: an integer from 0 to 2**31 - 1 (the ``token_count`` column's range)."""
    return int(validate_number(value, field=field, minimum=0, maximum=MAX_INT, integer=True))


def validate_dimension(value: Any, *, field: str = "dimension") -> int:
    """A vector's number of dimensions: an integer from 1 to :data:`MAX_EMBEDDING_DIMENSION`
    (what the reference schema's padded column holds)."""
    return validate_positive_int(value, field=field, maximum=MAX_EMBEDDING_DIMENSION)


def validate_id(value: Any, *, field: str) -> int:
    """A database id: a positive integer that fits PostgreSQL ``bigint``."""
    return validate_positive_int(value, field=field, maximum=MAX_BIGINT)


def validate_ids(values: Any, *, field: str) -> list[int]:
    """A list of ids (any iterable of positive integers; a single int is rejected)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValidationError("must be a list of node ids", field=field)
    return [validate_id(v, field=field) for v in values]


def _as_utc(value: Any, field: str, *, end: bool = False) -> dt.datetime:
    """``value`` as an aware UTC datetime; a date is its first moment, or its last when it
    ends a range (``end``), so that a range ending on a day holds that whole day."""
    if value is None or type(value).__name__ == "NaTType":
        raise ValidationError("must be a datetime or date, got a missing value", field=field)
    if isinstance(value, dt.datetime) and hasattr(value, "to_pydatetime"):  # pandas.Timestamp
        # Timestamps keep microseconds, as PostgreSQL does: no warning for the nanoseconds.
        value = value.to_pydatetime(warn=False)
    try:
        if isinstance(value, dt.datetime):
            return (value.astimezone(dt.UTC) if value.tzinfo
                    else value.replace(tzinfo=dt.UTC))
        if isinstance(value, dt.date):
            return dt.datetime.combine(value, dt.time.max if end else dt.time.min,
                                       tzinfo=dt.UTC)
    except (OverflowError, ValueError) as exc:  # a UTC offset past year 1 or 9999
        raise ValidationError(f"{value!r} is out of range in UTC ({exc})", field=field) from None
    raise ValidationError(
        f"must be a datetime or date, got {type(value).__name__}", field=field
    )


def validate_moment(value: Any, *, field: str) -> dt.datetime:
    """A datetime, a date (its first moment) or a ``pandas.Timestamp`` as an aware UTC
    datetime (naive ones are taken as UTC), in any year Python holds: a bound compared with
    stored times, which :func:`validate_datetime` would keep within pandas' years."""
    return _as_utc(value, field)


def validate_datetime(value: Any, *, field: str) -> dt.datetime:
    """An aware UTC datetime (naive ones are taken as UTC) between the years 1678 and 2261.

    The range is what pandas' nanosecond timestamps can hold, so every stored time can be
    analysed; a datetime, a date or a ``pandas.Timestamp`` is accepted.
    """
    when = validate_moment(value, field=field)
    if not EARLIEST <= when <= LATEST:
        raise ValidationError(f"{when.isoformat()} is outside {EARLIEST.year} to "
                              f"{LATEST.year}", field=field)
    return when


def validate_duration(value: Any, *, field: str,
                      maximum: dt.timedelta = dt.timedelta(days=3650)) -> dt.timedelta:
    """Return ``value`` if it is a :class:`datetime.timedelta` from zero to ``maximum``;
    raise :class:`ValidationError` naming ``field``."""
    if not isinstance(value, dt.timedelta):
        raise ValidationError(f"must be a datetime.timedelta, got {value!r}", field=field)
    if not dt.timedelta(0) <= value <= maximum:
        raise ValidationError(f"must be from 0 to {maximum}, got {value}", field=field)
    return value


def validate_json(value: Any, *, field: str) -> Any:
    """Return ``value`` if it is JSON PostgreSQL ``jsonb`` can store, unchanged.

    JSON means None, bools, ints of up to 300 digits, finite floats, strings without NUL or
    lone surrogates, lists or tuples, and dicts with string keys, nested at most 64 deep
    (which also rules out self-references). Everything else (sets, bytes, datetimes, numpy
    scalars, Decimals) is rejected rather than converted, so what is stored is what was given.
    """

    def check(item: Any, depth: int, where: str) -> None:
        if depth > MAX_JSON_DEPTH:
            raise ValidationError(f"is nested deeper than {MAX_JSON_DEPTH} levels (or refers "
                                  "to itself)", field=field)
        if item is None or isinstance(item, bool):
            return
        if isinstance(item, str):
            if "\x00" in item:
                raise ValidationError(f"{where}: strings must not contain NUL (\\u0000)",
                                      field=field)
            _check_encodable(item, field)
            return
        if type(item) is int:
            if abs(item) > 10**300:
                raise ValidationError(f"{where}: integer too large", field=field)
            return
        if type(item) is float:
            if item != item or item in (float("inf"), float("-inf")):
                raise ValidationError(f"{where}: NaN and infinity are not JSON", field=field)
            return
        if type(item) in (list, tuple):
            for i, element in enumerate(item):
                check(element, depth + 1, f"{where}[{i}]")
            return
        if type(item) is dict:
            for key, element in item.items():
                if not isinstance(key, str):
                    raise ValidationError(f"{where}: keys must be strings, got "
                                          f"{type(key).__name__}", field=field)
                check(key, depth + 1, where)
                check(element, depth + 1, f"{where}[{key!r}]")
            return
        raise ValidationError(f"{where}: {type(item).__name__} is not JSON (use str, int, "
                              "float, bool, None, list or dict)", field=field)

    check(value, 0, "value")
    return value


def validate_timeframe(
    timeframe: Any, *, field: str = "timeframe"
) -> tuple[dt.datetime, dt.datetime] | None:
    """Return ``(start, end)`` as aware datetimes (naive ones are taken as UTC), or None.

    Accepts None or a ``(start, end)`` pair of datetimes/dates with ``start <= end``. Both ends
    are inclusive, as SQL ``BETWEEN`` is; a date ending the range includes that whole day.
    """
    if timeframe is None:
        return None
    if isinstance(timeframe, (str, bytes)) or not isinstance(timeframe, Sequence) \
            or len(timeframe) != 2:
        raise ValidationError(
            "must be None or a (start, end) pair of datetimes", field=field
        )
    start, end = _as_utc(timeframe[0], field), _as_utc(timeframe[1], field, end=True)
    if start > end:
        raise ValidationError(f"start {start.isoformat()} is after end {end.isoformat()}",
                              field=field)
    return start, end


# --- names and keys ------------------------------------------------------------------------

def validate_list(values: Any, *, field: str) -> list[Any]:
    """``values`` as a list: a list, tuple, pandas Series or 1-d numpy array, not a string
    (whose characters would be taken one by one), a mapping or a set (no order)."""
    if hasattr(values, "tolist") and getattr(values, "ndim", 1) == 1:
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        raise ValidationError(f"must be a list, got {type(values).__name__}", field=field)
    return list(values)


def validate_key(value: Any, *, field: str) -> str:
    """A key from another system, kept exactly as given (not stripped): a non-empty string
    without NUL or lone surrogates."""
    if not isinstance(value, str):
        raise ValidationError(f"must be a string, got {type(value).__name__}", field=field)
    if not value:
        raise ValidationError("must not be empty", field=field)
    if "\x00" in value:
        raise ValidationError("must not contain NUL bytes", field=field)
    _check_encodable(value, field)
    return value


def validate_name(value: Any, *, field: str, max_length: int = MAX_NAME_LENGTH) -> str:
    """A name (a robot's, an embedding provider's or model's): text as
    :func:`validate_content` accepts it (no NUL, no lone surrogate, not blank), stripped, at
    most ``max_length`` characters."""
    name = validate_content(value, field=field)
    if len(name) > max_length:
        raise ValidationError(f"must be at most {max_length} characters, got {len(name)}",
                              field=field)
    return name


def validate_names(value: Any, *, field: str) -> list[str]:
    """A name, or a non-empty list of names (:func:`validate_name`), as a list."""
    if not isinstance(value, (str, list, tuple)) or not value or \
            not all(isinstance(name, str) for name in value):
        raise ValidationError("must be a name or a non-empty list of names", field=field)
    return [validate_name(name, field=field) for name in ([value] if isinstance(value, str)
                                                           else value)]


def validate_embedding_model(value: Any, *,
                             field: str = "embedding_model") -> tuple[str, str] | None:
    """None, or a ``(provider, model)`` pair of names (:func:`validate_name`), stripped."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValidationError("must be a (provider, model) pair of names, got "
                              f"{type(value).__name__}", field=field)
    return validate_name(value[0], field=field), validate_name(value[1], field=field)


def validate_frame(frame: Any, columns: Any, *, field: str) -> Any:
    """``frame`` if it is a pandas DataFrame with every one of ``columns``."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise ValidationError(f"must be a pandas DataFrame, got {type(frame).__name__}",
                              field=field)
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValidationError(f"has no column {', '.join(map(repr, missing))}", field=field)
    return frame
