"""Rows of fixed-width columns read as packed bytes, a page of ids per statement.

Read through a cursor, the tag and robot links of a million memories (5.5 million rows) cost
the client a Python row and an object per value; most of the export's time for those tables.
Here the server packs each row into one ``bytea`` of the columns' binary send forms (a
parallel ``string_agg`` per page of ids) and the client reads a page as one NumPy structured
array. NULLs travel as a bit per column in a leading ``int4``, so every row has one width.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from ..errors import DatabaseError
from ..frames import node_id_pages

__all__ = ["LATEST_MICROSECONDS", "PACKED_KINDS", "packed_pages"]

# kind: (send function, SQL type cast to, NumPy field as sent)
PACKED_KINDS = {"bigint": ("int8send", "bigint", ">i8"),
                "integer": ("int4send", "integer", ">i4"),
                "timestamptz": ("timestamptz_send", "timestamptz", ">i8")}
_UNIX_FROM_2000 = 946_684_800_000_000  # PostgreSQL counts microseconds from 2000-01-01
# PostgreSQL's and DuckDB's +infinity; DuckDB's -infinity is its negation.
LATEST_MICROSECONDS = int(np.iinfo(np.int64).max)
_NOT_A_TIME = np.iinfo(np.int64).min  # PostgreSQL's -infinity; NumPy's NaT


def packed_pages(cur: psycopg.Cursor[Any], relation: sql.Composable,
                 columns: Mapping[str, str], *, page_rows: int = 262_144
                 ) -> Iterator[pd.DataFrame]:
    """The rows of ``relation`` (a table or a parenthesized query, with a bigint ``id`` never
    NULL and at most 31 columns): ``columns`` of it (name: a kind of :data:`PACKED_KINDS`),
    as DataFrames of about ``page_rows`` ids each, by ascending id.

    bigint columns are ``int64`` (``Int64`` when a page has a NULL), integer ones ``int32``
    (``Int32``), timestamptz ones ``datetime64[us, UTC]`` (NaT for NULL; ``infinity`` as
    the largest time, which DuckDB reads as its own ``infinity``). Each page is one
    statement, so ``statement_timeout`` applies to a page; call
    :func:`~htm_analytics.store.vector_stream.one_snapshot` first for pages of one picture.
    """
    names = list(columns)
    row = np.dtype([("nulls", ">i4"), *((name, PACKED_KINDS[columns[name]][2])
                                        for name in names)])
    nulls = sql.SQL(" | ").join(
        sql.SQL("(({} IS NULL)::integer << {})").format(sql.Identifier(name), sql.Literal(bit))
        for bit, name in enumerate(names))
    values = sql.SQL(" || ").join(
        sql.SQL("coalesce({}({}::{}), {})").format(
            sql.SQL(PACKED_KINDS[columns[name]][0]), sql.Identifier(name),
            sql.SQL(PACKED_KINDS[columns[name]][1]),
            sql.Literal(bytes(np.dtype(PACKED_KINDS[columns[name]][2]).itemsize)))
        for name in names)
    page = sql.SQL("SELECT count(*) AS n, string_agg(int4send({}) || {}, ''::bytea) "
                   "FROM {} AS r WHERE r.id >= %(page_from)s AND r.id < %(page_to)s").format(
        nulls, values, relation)
    with cur.connection.cursor(binary=True, row_factory=tuple_row) as binary:
        bounds = binary.execute(sql.SQL("SELECT min(r.id), max(r.id), count(*) FROM {} AS r")
                                .format(relation)).fetchone()
        assert bounds is not None
        low, high, count = bounds
        for page_from, page_to in node_id_pages(low, high, count, page_rows):
            found = binary.execute(page, {"page_from": page_from, "page_to": page_to}).fetchone()
            assert found is not None
            n, packed = found
            data = bytes(packed or b"")
            if len(data) != n * row.itemsize:
                raise DatabaseError(f"a packed row is not {row.itemsize} bytes")
            if n:
                yield _frame(np.frombuffer(data, dtype=row), columns)


def _frame(rows: np.ndarray, columns: Mapping[str, str]) -> pd.DataFrame:
    """A page's structured rows as a DataFrame by ascending id, each column typed."""
    rows = rows[np.argsort(rows["id"], kind="stable")]
    frame: dict[str, Any] = {}
    for bit, (name, kind) in enumerate(columns.items()):
        missing = (rows["nulls"] >> bit & 1).astype(bool)
        values = rows[name].astype(np.dtype(PACKED_KINDS[kind][2]).newbyteorder("="))
        if kind == "timestamptz":
            unix = values + _UNIX_FROM_2000
            # infinity, or past year 294,000
            unix[values >= LATEST_MICROSECONDS - _UNIX_FROM_2000] = LATEST_MICROSECONDS
            unix[values == _NOT_A_TIME] = -LATEST_MICROSECONDS  # -infinity: DuckDB's
            unix[missing] = _NOT_A_TIME
            frame[name] = pd.Series(unix.view("M8[us]")).dt.tz_localize("UTC")
        elif missing.any():
            frame[name] = pd.arrays.IntegerArray(values, missing)
        else:
            frame[name] = values
    return pd.DataFrame(frame)
