"""The shared plumbing of the analysis helpers: their SQL, typed frames, and data sources.

The analysis queries live in ``sql/analytics/`` and are written in the SQL that PostgreSQL and
DuckDB both understand, so the live store and an offline :class:`~htm_analytics.Snapshot`
answer every helper with the same statement: as one frame (``analytics_frame``), or as int64
arrays a range of node ids at a time (``analytics_pages``) for a helper that computes on them.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from ._sql import read_sql
from .errors import ValidationError
from .validation import (
    validate_moment,
    validate_names,
    validate_positive_int,
    validate_tag,
    validate_timeframe,
)

__all__ = ["MemorySource", "memory_source", "NODE_PAGE", "load_analytics_query",
           "analytics_query_names", "analytics_work_mem", "coerce_frame", "node_id_pages",
           "to_duckdb_query", "period_unit", "PERIOD_UNITS", "scope_params", "SCOPE_KEYS",
           "validate_scope", "split_at_infinity", "TIME_INFINITY", "TIME_MINUS_INFINITY"]

_MARKER = re.compile(r"\{(scoped|remember_events)\}")
# `{in_scope:rn.node_id}`: the column's node is in scope. Without a scope the test folds away
# at planning and no node is read (see _scoped_nodes.sql); written once, so that a new scope
# parameter reaches every query.
_IN_SCOPE = re.compile(r"\{in_scope:(\w+\.\w+)\}")
_IN_SCOPE_TEST = ("((%(start)s::timestamptz IS NULL AND %(end)s::timestamptz IS NULL "
                  "AND %(robots)s::text[] IS NULL) OR {} IN (SELECT id FROM scoped_nodes))")
_WORK_MEM = re.compile(r"^-- work_mem: (\d+(?:kB|MB|GB))\b", re.MULTILINE)
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


@runtime_checkable
class MemorySource(Protocol):
    """What the analysis helpers read from: a live store or an offline snapshot."""

    def analytics_frame(self, name: str, params: Mapping[str, Any],
                        dtypes: Mapping[str, Any]) -> pd.DataFrame:
        """Run the named analytics query with bound ``params``; columns typed by ``dtypes``."""
        ...

    def analytics_pages(self, name: str, params: Mapping[str, Any],
                        columns: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        """Run the named analytics query, whose rows are the bigint ``columns`` (the first a
        node id), over one range of node ids at a time (:func:`node_id_pages`, bound as
        ``page_from`` and ``page_to``): an int64 array per column and page, every row of a
        node in the same page, all pages from one snapshot of the data."""
        ...


def memory_source(source: Any) -> MemorySource:
    """``source`` if the analysis helpers can read it (a live store, a snapshot, or an object
    answering ``analytics_frame`` as they do)."""
    if not callable(getattr(source, "analytics_frame", None)):
        raise ValidationError("must be a LongTermMemory or a Snapshot, got "
                              f"{type(source).__name__}", field="source")
    return source


NODE_PAGE = 250_000
"""Nodes per page of :meth:`MemorySource.analytics_pages` (about a million tag links)."""


def node_id_pages(low: Any, high: Any, nodes: Any, page_nodes: int | None = None
                  ) -> Iterator[tuple[int, int]]:
    """``[page_from, page_to)`` ranges covering the node ids ``low`` to ``high`` (None: no
    node), each about ``page_nodes`` (default :data:`NODE_PAGE`) of the ``nodes`` there are
    wide: ids with gaps make wider ranges, never more pages than ``nodes / page_nodes`` plus
    one."""
    if low is None or high is None or not nodes:
        return
    low, high = int(low), int(high)
    page_nodes = NODE_PAGE if page_nodes is None else page_nodes
    width = max(page_nodes, -(-(high - low + 1) * page_nodes // int(nodes)))
    for start in range(low, high + 1, width):
        yield start, min(start + width, high + 1)


@functools.cache
def analytics_query_names() -> frozenset[str]:
    """The names of the shipped analytics queries: the ``sql/analytics/*.sql`` files, not the
    shared fragments (``_*.sql``) they include."""
    folder = importlib.resources.files("htm_analytics").joinpath("sql", "analytics")
    return frozenset(entry.name.removesuffix(".sql") for entry in folder.iterdir()
                     if entry.name.endswith(".sql") and not entry.name.startswith("_"))


def _query_name(name: Any) -> str:
    """``name`` if it names a shipped analytics query (never a path to another file)."""
    if not isinstance(name, str) or name not in analytics_query_names():
        raise ValidationError(f"is no analytics query, got {name!r:.80}; choose from "
                              f"{', '.join(sorted(analytics_query_names()))}", field="name")
    return name


def load_analytics_query(name: str) -> str:
    """The text of ``sql/analytics/<name>.sql`` with its shared fragments included.

    Raises :class:`~htm_analytics.ValidationError` (``name``) unless ``name`` is one of
    :func:`analytics_query_names`."""
    return _load_analytics_query(_query_name(name))


@functools.cache
def _load_analytics_query(name: str) -> str:
    fragments = {"scoped": "_scoped_nodes", "remember_events": "_remember_events"}
    query = _MARKER.sub(
        lambda m: _strip_comments(read_sql("analytics", f"{fragments[m.group(1)]}.sql")).strip(),
        read_sql("analytics", f"{name}.sql"))
    return _IN_SCOPE.sub(lambda m: _IN_SCOPE_TEST.format(m.group(1)), query)


def analytics_work_mem(name: str) -> str | None:
    """The ``work_mem`` that ``sql/analytics/<name>.sql`` asks for in a ``-- work_mem: 256MB``
    comment line (PostgreSQL only: the store sets it for that statement's transaction, never
    below the server's own), or None."""
    match = _WORK_MEM.search(read_sql("analytics", f"{_query_name(name)}.sql"))
    return match.group(1) if match else None


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def to_duckdb_query(query: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Rewrite psycopg's ``%(name)s`` placeholders as DuckDB's ``$name``.

    Only the parameters the statement uses are passed on: DuckDB rejects unused ones.
    """
    used = set(_PLACEHOLDER.findall(query))
    missing = used - set(params)
    if missing:
        raise KeyError(f"query parameters not given: {sorted(missing)}")
    return (_PLACEHOLDER.sub(r"$\1", query).replace("%%", "%"),
            {key: value for key, value in params.items() if key in used})


# PostgreSQL's ``infinity`` and ``-infinity`` read as Python's latest and earliest datetimes
# (store.timestamps), and so do a DuckDB snapshot's (coerce_frame).
TIME_INFINITY = pd.Timestamp("9999-12-31 23:59:59.999999", tz="UTC")
TIME_MINUS_INFINITY = pd.Timestamp("0001-01-01", tz="UTC")


def coerce_frame(frame: pd.DataFrame, dtypes: Mapping[str, Any]) -> pd.DataFrame:
    """Give ``frame`` the documented dtypes, whichever engine produced it.

    Timestamps become UTC-aware whether the engine returned them aware (psycopg) or naive
    in UTC (DuckDB's numpy results); DuckDB's infinities become the extremes psycopg reads
    PostgreSQL's as (see :func:`split_at_infinity`).
    """
    frame = frame.copy()
    for column, dtype in dtypes.items():
        target: Any = dtype  # any pandas dtype, as DataFrame.astype takes
        if isinstance(dtype, str) and dtype.startswith("datetime64") and "UTC" in dtype:
            times = pd.to_datetime(frame[column], utc=True)
            times = times.mask(times > TIME_INFINITY, TIME_INFINITY)
            frame[column] = times.mask(times < TIME_MINUS_INFINITY,
                                       TIME_MINUS_INFINITY).astype(target)
        else:
            frame[column] = frame[column].astype(target)
    return frame


# Period names accepted by the ``freq`` options: SQL date_trunc unit and pandas frequency.
_PERIODS = {
    "h": ("hour", "h"), "D": ("day", "D"), "W": ("week", "W-MON"), "M": ("month", "MS"),
    "Q": ("quarter", "QS"), "Y": ("year", "YS"),
}


PERIOD_UNITS = tuple(unit for unit, _ in _PERIODS.values())
"""The ``date_trunc`` units of the periods the ``freq`` options name."""


def period_unit(freq: Any, *, hourly: bool = True) -> tuple[str, str]:
    """``(date_trunc unit, pandas frequency)`` for ``freq`` ('h', 'D', 'W', 'M', 'Q', 'Y';
    not 'h' unless ``hourly``).

    Weeks start on Monday, as in PostgreSQL and DuckDB ``date_trunc('week', ...)``.
    """
    allowed = [name for name in _PERIODS if hourly or name != "h"]
    if not isinstance(freq, str) or freq not in allowed:
        raise ValidationError(f"must be one of {', '.join(map(repr, allowed))}, got {freq!r}",
                              field="freq")
    return _PERIODS[freq]


def split_at_infinity(frame: pd.DataFrame, column: str = "period"
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(rows at a finite time, rows at infinity or -infinity)`` of ``frame`` by ``column``
    (datetime64, UTC, as :func:`coerce_frame` gives it). No period holds the second, and a
    range of periods reaching them would run for thousands of years."""
    times = frame[column]
    infinite = (times == TIME_INFINITY) | (times == TIME_MINUS_INFINITY)
    return frame[~infinite], frame[infinite]


def scope_params(*, timeframe: Any = None, robots: Any = None, prefix: Any = None,
                 level: Any = None) -> dict[str, Any]:
    """Validated query parameters for the scope options every analysis helper shares.

    ``timeframe`` is a (start, end) pair (inclusive), ``robots`` a robot name or names,
    ``prefix`` a tag whose subtree is kept, ``level`` the number of tag segments to roll up to.
    """
    bounds = validate_timeframe(timeframe)
    if robots is not None:
        robots = validate_names(robots, field="robots")
    if prefix is not None:
        prefix = validate_tag(prefix, field="prefix")
    if level is not None:
        level = validate_positive_int(level, field="level", maximum=100)
    start, end = bounds if bounds else (None, None)
    return {"start": start, "end": end, "robots": robots, "prefix": prefix, "level": level}


SCOPE_KEYS = ("start", "end", "robots", "prefix", "level")
"""The keys of a scope, as :func:`scope_params` makes it."""


def validate_scope(scope: Any, *, field: str = "scope") -> dict[str, Any]:
    """A scope (None, or a mapping of some of :data:`SCOPE_KEYS`, as :func:`scope_params`
    makes it) checked again, every key present: ``start``/``end`` datetimes or dates,
    ``robots`` a name or names, ``prefix`` a tag, ``level`` 1-100; each may be None. An
    unknown key is refused (a misspelt one would widen the scope to everything)."""
    if scope is None:
        return dict.fromkeys(SCOPE_KEYS)
    if not isinstance(scope, Mapping):
        raise ValidationError(f"must be None or a mapping with the keys {', '.join(SCOPE_KEYS)}"
                              f", got {type(scope).__name__}", field=field)
    unknown = [key for key in scope if key not in SCOPE_KEYS]
    if unknown:
        raise ValidationError(f"has unknown keys {', '.join(f'{key!r:.40}' for key in unknown)}"
                              f"; use {', '.join(SCOPE_KEYS)}", field=field)
    checks: dict[str, Callable[..., Any]] = {
        "start": validate_moment, "end": validate_moment, "robots": validate_names,
        "prefix": validate_tag,
        "level": lambda value, field: validate_positive_int(value, field=field, maximum=100)}
    checked = dict.fromkeys(SCOPE_KEYS)
    for key, value in scope.items():
        if value is not None:
            try:
                checked[key] = checks[key](value, field=key)
            except ValidationError as exc:
                raise ValidationError(str(exc), field=field) from None
    return checked
