"""Timestamps of ``infinity`` and ``-infinity`` read as the latest and earliest datetimes.

PostgreSQL's ``timestamp`` and ``timestamptz`` hold both infinities (a writer may use them as
"never" or "unknown"); Python's ``datetime`` holds neither, and psycopg refuses to read them.
One such value anywhere would stop every read that touches its column: the report, the
snapshot, a search returning the memory. They are read as ``datetime.max`` and
``datetime.min`` instead (in UTC for ``timestamptz``), as psycopg's documentation suggests:
the order is kept, and pandas keeps both at microsecond resolution.

Those loaders run in Python, about 2 microseconds a value: the reads of a timestamp per
memory (snapshots, staleness) take theirs as microseconds instead (:func:`microseconds_sql`,
:func:`times_from_microseconds`), decoded at once with NumPy.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

import numpy as np
import pandas as pd
from psycopg.adapt import AdaptersMap, Buffer
from psycopg.types.datetime import (
    TimestampBinaryLoader,
    TimestampLoader,
    TimestamptzBinaryLoader,
    TimestamptzLoader,
)

__all__ = ["register_infinite_timestamps", "microseconds_sql", "times_from_microseconds"]

_BINARY_LATEST, _BINARY_EARLIEST = struct.pack("!q", 2**63 - 1), struct.pack("!q", -2**63)
_LATEST_UTC = dt.datetime.max.replace(tzinfo=dt.UTC)
_EARLIEST_UTC = dt.datetime.min.replace(tzinfo=dt.UTC)


class _TextTimestamp(TimestampLoader):
    def load(self, data: Buffer) -> dt.datetime:
        if len(data) < 10:  # no finite timestamp is this short
            return dt.datetime.min if bytes(data).startswith(b"-") else dt.datetime.max
        return super().load(data)


class _BinaryTimestamp(TimestampBinaryLoader):
    def load(self, data: Buffer) -> dt.datetime:
        if data == _BINARY_LATEST:
            return dt.datetime.max
        if data == _BINARY_EARLIEST:
            return dt.datetime.min
        return super().load(data)


class _TextTimestamptz(TimestamptzLoader):
    def load(self, data: Buffer) -> dt.datetime:
        if len(data) < 10:
            return _EARLIEST_UTC if bytes(data).startswith(b"-") else _LATEST_UTC
        return super().load(data)


class _BinaryTimestamptz(TimestamptzBinaryLoader):
    def load(self, data: Buffer) -> dt.datetime:
        if data == _BINARY_LATEST:
            return _LATEST_UTC
        if data == _BINARY_EARLIEST:
            return _EARLIEST_UTC
        return super().load(data)


def register_infinite_timestamps(context: Any) -> None:
    """Read infinite timestamps on ``context`` (a connection or cursor) as the extremes.

    Parameters
    ----------
    context : psycopg.Connection or psycopg.Cursor
        Where the loaders apply: every cursor of a connection, or one cursor.
    """
    adapters: AdaptersMap = context.adapters
    adapters.register_loader("timestamp", _TextTimestamp)
    adapters.register_loader("timestamp", _BinaryTimestamp)
    adapters.register_loader("timestamptz", _TextTimestamptz)
    adapters.register_loader("timestamptz", _BinaryTimestamptz)


def microseconds_sql(column: str) -> str:
    """SQL giving the ``timestamptz`` ``column`` as ``bigint`` microseconds since 1970 (UTC):
    ``infinity`` and ``-infinity`` as DuckDB's (plus and minus ``2**63 - 1``), NULL as
    NumPy's NaT (``-2**63``). ``column`` is the toolkit's own SQL: a column or expression."""
    return (f"CASE WHEN {column} IS NULL THEN '-9223372036854775808'::bigint "
            f"WHEN {column} = 'infinity' THEN 9223372036854775807 "
            f"WHEN {column} = '-infinity' THEN -9223372036854775807 "
            f"ELSE (extract(epoch FROM {column}) * 1000000)::bigint END")


def times_from_microseconds(values: Any) -> pd.Series:
    """``datetime64[us, UTC]`` from :func:`microseconds_sql`'s values; the infinities stay
    DuckDB's (beyond Python's datetimes: ``frames.coerce_frame`` brings them to its
    extremes)."""
    micros = np.asarray(values, dtype=np.int64)
    return pd.Series(micros.view("M8[us]"), index=getattr(values, "index", None),
                     name=getattr(values, "name", None)).dt.tz_localize("UTC")
