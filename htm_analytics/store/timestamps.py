"""Timestamps of ``infinity`` and ``-infinity`` read as the latest and earliest datetimes.

PostgreSQL's ``timestamp`` and ``timestamptz`` hold both infinities (a writer may use them as
"never" or "unknown"); Python's ``datetime`` holds neither, and psycopg refuses to read them.
One such value anywhere would stop every read that touches its column: the report, the
snapshot, a search returning the memory. They are read as ``datetime.max`` and
``datetime.min`` instead (in UTC for ``timestamptz``), as psycopg's documentation suggests:
the order is kept, and pandas keeps both at microsecond resolution.

Every other value goes to psycopg's own loader (compiled where psycopg is): a finite
timestamp reads exactly as before, for about a microsecond more a value
(``benchmarks/bench_timestamps.py``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format

__all__ = ["register_infinite_timestamps"]

_LATEST_UTC = dt.datetime.max.replace(tzinfo=dt.UTC)
_EARLIEST_UTC = dt.datetime.min.replace(tzinfo=dt.UTC)
# The binary infinities: the largest and smallest 8-byte microsecond counts, big-endian.
_BINARY_LATEST, _BINARY_EARLIEST = b"\x7f" + b"\xff" * 7, b"\x80" + b"\x00" * 7


class _InfiniteTimestamps(Loader):
    """psycopg's own loader of the type and format, but for the two infinities."""

    latest: dt.datetime
    earliest: dt.datetime

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        finite = psycopg.adapters.get_loader(oid, self.format)
        assert finite is not None  # psycopg loads both types in both formats
        self._finite = finite(oid, context).load


class _Text(_InfiniteTimestamps):
    format = Format.TEXT

    def load(self, data: Buffer) -> Any:
        if len(data) < 10:  # no finite timestamp is this short
            return self.earliest if data[0] == 45 else self.latest  # 45: "-"
        return self._finite(data)


class _Binary(_InfiniteTimestamps):
    format = Format.BINARY

    def load(self, data: Buffer) -> Any:
        if data == _BINARY_LATEST:
            return self.latest
        if data == _BINARY_EARLIEST:
            return self.earliest
        return self._finite(data)


def _loaders(latest: dt.datetime, earliest: dt.datetime) -> list[type[Loader]]:
    return [type(f"_Infinite{kind.__name__}", (kind,), {"latest": latest, "earliest": earliest})
            for kind in (_Text, _Binary)]


_TIMESTAMP = _loaders(dt.datetime.max, dt.datetime.min)
_TIMESTAMPTZ = _loaders(_LATEST_UTC, _EARLIEST_UTC)


def register_infinite_timestamps(context: Any) -> None:
    """Read infinite timestamps on ``context`` (a connection or cursor) as the extremes.

    Parameters
    ----------
    context : psycopg.Connection or psycopg.Cursor
        Where the loaders apply: every cursor of a connection, or one cursor.
    """
    for loader in _TIMESTAMP:
        context.adapters.register_loader("timestamp", loader)
    for loader in _TIMESTAMPTZ:
        context.adapters.register_loader("timestamptz", loader)
