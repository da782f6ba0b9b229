"""Labelled queries for :func:`~htm_analytics.evaluate_retrieval`: read from JSON Lines, a
JSON array, CSV or Parquet, and checked row by row (query texts, relevant ids and grades,
optional vectors) before any search."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..validation import MAX_BIGINT, real_vector

__all__ = ["MAX_GRADE", "read_labelled_queries", "query_texts", "query_vectors",
           "relevance"]

MAX_GRADE = 1000  # of a graded judgement, either way


def _json(value: str, row: int, field: str, expected: str) -> Any:
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # bad JSON, over 4,300 digits, nested too deep
        raise ValidationError(f"row {row}: {expected}, got {value[:80]!r}",
                              field=field) from None


def _whole(value: Any, row: int, what: str, low: int, high: int) -> int:
    """``value`` (an int, integral float or their text; no bool) from ``low`` to ``high``."""
    number: Any = value
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:  # "12.0" is 12, as in JSON
            number = _json(value, row, "relevant", f"{what} must be an integer")
    integral = isinstance(number, (int, np.integer)) or (
        isinstance(number, (float, np.floating)) and float(number).is_integer())
    if isinstance(number, (bool, np.bool_)) or not integral or not low <= number <= high:
        raise ValidationError(f"row {row}: {value!r:.40} is not {what} (an integer from {low} "
                              f"to {high})", field="relevant")
    return int(number)


def relevance(value: Any, row: int) -> dict[str, int]:
    """One query's relevant node ids as ``{id: grade}``: an id, a list of ids, or a mapping."""
    if isinstance(value, str):
        value = _json(value, row, "relevant", "relevant ids must be an id, a JSON list or an "
                      "object of id: grade")
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple, np.ndarray, pd.Series)):
        pairs = [(v, 1) for v in value]
    else:
        pairs = [(value, 1)]
    graded: dict[str, int] = {}
    for node, grade in pairs:
        # Capped: trec_eval wraps grades past a C int, and allocates per grade up to the top.
        graded[str(_whole(node, row, "a node id", 1, MAX_BIGINT))] = \
            _whole(grade, row, "an integer grade", -MAX_GRADE, MAX_GRADE)
    if not any(level > 0 for level in graded.values()):
        raise ValidationError(f"row {row}: no relevant node (grade > 0)", field="relevant")
    return graded


def query_texts(values: Iterable[Any]) -> list[str]:
    """The query texts; a missing one is refused, not searched for as ``"None"``."""
    texts = []
    for row, text in enumerate(values):
        try:
            texts.append(str(text.encode("utf-8").decode("utf-8")))
        except (AttributeError, UnicodeEncodeError):  # not text, or a lone surrogate in it
            raise ValidationError(f"row {row}: must be UTF-8 text, got {text!r:.40}",
                                  field="query") from None
    return texts


def query_vectors(queries: pd.DataFrame) -> list[np.ndarray | None]:
    if "vector" not in queries:
        return [None] * len(queries)
    vectors: list[np.ndarray | None] = []
    for row, value in enumerate(queries["vector"]):
        if isinstance(value, str):
            value = _json(value, row, "vector", "a vector must be a JSON list of numbers") \
                if value.strip() else None
        if value is None or (np.ndim(value) == 0 and pd.isna(value)):
            vectors.append(None)
            continue
        vector = real_vector(value, field=f"vector[{row}]")
        with np.errstate(over="ignore"):  # past float32's range: infinite, refused below
            vector = vector.astype(np.float32)
        if not len(vector) or not np.isfinite(vector).all():
            raise ValidationError(f"row {row}: not a finite 1-d vector (in float32)",
                                  field="vector")
        vectors.append(vector)
    return vectors


def _read_json(path: Path) -> pd.DataFrame:
    """JSON Lines (an object a line), or one JSON array of objects."""
    # utf-8-sig: a byte order mark (as Windows editors write) is no part of the first line.
    text = path.read_text(encoding="utf-8-sig")
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except (ValueError, RecursionError) as exc:
            where = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
            raise ValidationError(f"{path} is not a JSON array{where}: "
                                  f"{getattr(exc, 'msg', exc)}", field="path") from None
        for number, item in enumerate(items):
            if not isinstance(item, dict):
                raise ValidationError(f"{path} item {number} is not a JSON object",
                                      field="path")
        return pd.DataFrame(items, dtype=object)
    records = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ValidationError(f"{path} line {number} is not JSON: "
                                  f"{getattr(exc, 'msg', exc)}", field="path") from None
        if not isinstance(record, dict):
            raise ValidationError(f"{path} line {number} is not a JSON object", field="path")
        records.append(record)
    return pd.DataFrame(records, dtype=object)  # object: no pyarrow strings to choke on


def _read_parquet(path: Path) -> pd.DataFrame:
    """A Parquet file's rows, as objects: a ``map`` column of grades (which pandas reads as
    a list of (key, value) pairs) as a mapping."""
    frame = pd.read_parquet(path).astype(object)
    if "relevant" in frame:
        frame["relevant"] = pd.Series([
            dict(value) if isinstance(value, list) and value
            and all(isinstance(pair, tuple) and len(pair) == 2 for pair in value) else value
            for value in frame["relevant"]], index=frame.index, dtype=object)
    return frame


def read_labelled_queries(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read labelled queries for :func:`evaluate_retrieval` from JSON, CSV or Parquet.

    Each record has ``query`` (text), ``relevant`` (a node id, a list of node ids, or an
    object of node id to integer grade) and optionally ``vector`` (a list of floats). In CSV,
    ``relevant`` and ``vector`` hold the same values as JSON text (``12``, ``[12, 40]``,
    ``{"12": 2, "40": 1}``, ``[0.1, 0.2]``); in Parquet, an integer, a list of integers, a
    ``map`` of id to grade or the same JSON text, and a list of floats. Files ending in
    ``.csv`` are CSV, in ``.parquet`` Parquet; others are JSON Lines (an object a line,
    blank lines skipped) or one JSON array of objects. Text files are UTF-8, with or
    without a byte order mark.

    Returns
    -------
    pandas.DataFrame
        ``query`` (string), ``relevant`` (object) and, when present, ``vector`` (object).

    Raises
    ------
    ValidationError
        A file that cannot be read or parsed, or holds no queries (``field="path"``); a query
        that is not text (``field="query"``).
    """
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise ValidationError(f"must be a file name, got {path!r:.60}", field="path")
    path = Path(path)
    try:
        if path.suffix.lower() == ".csv":
            with warnings.catch_warnings():
                # index_col=False: a first row longer than the header is not taken as an index
                # (which would shift every value); pandas warns instead, made an error here.
                warnings.simplefilter("error", pd.errors.ParserWarning)
                frame = pd.read_csv(path, keep_default_na=False, index_col=False, dtype=dict.
                                    fromkeys(("query", "relevant", "vector"), "string"))
        elif path.suffix.lower() == ".parquet":
            frame = _read_parquet(path)
        else:
            frame = _read_json(path)
    except ValidationError:  # a ValueError too, already worded
        raise
    except pd.errors.EmptyDataError:  # not even a header
        frame = pd.DataFrame()
    except pd.errors.ParserWarning:
        raise ValidationError(f"cannot read {path}: a row has more fields than the header",
                              field="path") from None
    except (OSError, ValueError) as exc:  # ValueError: UnicodeDecodeError, pandas' errors
        raise ValidationError(f"cannot read {path}: {' '.join(str(exc).split())}",
                              field="path") from exc
    if not len(frame):
        raise ValidationError(f"{path} holds no queries", field="path")
    if missing := {"query", "relevant"} - set(frame):
        raise ValidationError(f"{path} has no {sorted(missing)} column", field="path")
    frame["query"] = pd.Series(query_texts(frame["query"]), index=frame.index, dtype="string")
    return frame


