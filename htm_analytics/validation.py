"""Checks applied at the API boundary, before anything touches the database."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .errors import ValidationError

__all__ = [
    "MAX_EMBEDDING_DIMENSION",
    "TAG_PATTERN",
    "validate_content",
    "validate_tag",
    "tag_ancestors",
    "validate_positive_int",
    "validate_id",
    "validate_ids",
    "validate_timeframe",
    "prepare_embedding",
]

MAX_EMBEDDING_DIMENSION = 2000
MAX_CONTENT_BYTES = 1_000_000
MAX_TAG_LENGTH = 255
TAG_PATTERN = re.compile(r"^[a-z0-9-]+(?::[a-z0-9-]+)*$")


def validate_content(content: Any, *, field: str = "content") -> str:
    """Return ``content`` stripped; reject non-strings, blank text, NUL bytes and >1 MB."""
    if not isinstance(content, str):
        raise ValidationError(f"must be a string, got {type(content).__name__}", field=field)
    stripped = content.strip()
    if not stripped:
        raise ValidationError("must not be empty or whitespace", field=field)
    if "\x00" in stripped:
        raise ValidationError("must not contain NUL bytes (PostgreSQL text cannot hold them)",
                              field=field)
    if len(stripped.encode("utf-8", "surrogatepass")) > MAX_CONTENT_BYTES:
        raise ValidationError(f"is larger than {MAX_CONTENT_BYTES} bytes", field=field)
    return stripped


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


def tag_ancestors(tag: str) -> list[str]:
    """The tag and each ancestor, root first: ``a:b:c`` gives ``['a', 'a:b', 'a:b:c']``."""
    parts = tag.split(":")
    return [":".join(parts[: i + 1]) for i in range(len(parts))]


def validate_positive_int(value: Any, *, field: str, maximum: int | None = None) -> int:
    """Return ``value`` if it is an int (not a bool) with ``1 <= value <= maximum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValidationError(f"must be a positive integer, got {value!r}", field=field)
    if value < 1:
        raise ValidationError(f"must be a positive integer, got {value!r}", field=field)
    if maximum is not None and value > maximum:
        raise ValidationError(f"must be at most {maximum}, got {value!r}", field=field)
    return int(value)


def validate_id(value: Any, *, field: str) -> int:
    """A database id: a positive integer that fits PostgreSQL ``bigint``."""
    return validate_positive_int(value, field=field, maximum=2**63 - 1)


def validate_ids(values: Any, *, field: str) -> list[int]:
    """A list of ids (any iterable of positive integers; a single int is rejected)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValidationError("must be a list of node ids", field=field)
    return [validate_id(v, field=field) for v in values]


def _as_utc(value: Any, field: str) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time.min, tzinfo=dt.UTC)
    if hasattr(value, "to_pydatetime"):  # pandas.Timestamp
        return _as_utc(value.to_pydatetime(), field)
    raise ValidationError(
        f"timeframe bounds must be datetimes or dates, got {type(value).__name__}", field=field
    )


def validate_timeframe(
    timeframe: Any, *, field: str = "timeframe"
) -> tuple[dt.datetime, dt.datetime] | None:
    """Return ``(start, end)`` as aware datetimes (naive ones are taken as UTC), or None.

    Accepts None or a ``(start, end)`` pair of datetimes/dates with ``start <= end``. Both ends
    are inclusive, as SQL ``BETWEEN`` is.
    """
    if timeframe is None:
        return None
    if isinstance(timeframe, (str, bytes)) or not isinstance(timeframe, Sequence) \
            or len(timeframe) != 2:
        raise ValidationError(
            "must be None or a (start, end) pair of datetimes", field=field
        )
    start, end = (_as_utc(v, field) for v in timeframe)
    if start > end:
        raise ValidationError(f"start {start.isoformat()} is after end {end.isoformat()}",
                              field=field)
    return start, end


def prepare_embedding(embedding: Any, *, field: str = "embedding",
                      pad_to: int = MAX_EMBEDDING_DIMENSION) -> tuple[np.ndarray, int]:
    """Validate a vector and zero-pad it to ``pad_to`` dimensions.

    Zero padding leaves cosine similarity unchanged, which is why the reference schema can
    keep vectors of every model in one ``vector(2000)`` column.

    Parameters
    ----------
    embedding : sequence of float, numpy array or pgvector ``Vector``
        The vector, 1 to 2000 finite numbers, not all zero.

    Returns
    -------
    padded : numpy.ndarray
        float32 array of length ``pad_to``.
    dimension : int
        The original number of dimensions.
    """
    if hasattr(embedding, "to_numpy"):
        embedding = embedding.to_numpy()
    if isinstance(embedding, (str, bytes)) or embedding is None:
        raise ValidationError("must be a sequence of numbers", field=field)
    try:
        array = np.asarray(embedding, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"must be a sequence of numbers ({exc})", field=field) from exc
    if array.ndim != 1:
        raise ValidationError(f"must be one-dimensional, got shape {array.shape}", field=field)
    dimension = int(array.shape[0])
    if dimension == 0:
        raise ValidationError("must not be empty", field=field)
    if dimension > MAX_EMBEDDING_DIMENSION:
        raise ValidationError(
            f"has {dimension} dimensions; at most {MAX_EMBEDDING_DIMENSION} fit the "
            "vector(2000) column", field=field)
    if not np.isfinite(array).all():
        raise ValidationError("contains NaN or infinite values", field=field)
    if not array.any():
        raise ValidationError("is all zeros, so its cosine similarity is undefined", field=field)
    if np.abs(array).max() > np.finfo(np.float32).max:
        raise ValidationError("has values too large for float32", field=field)
    padded = np.zeros(pad_to, dtype=np.float32)
    padded[:dimension] = array
    return padded, dimension

