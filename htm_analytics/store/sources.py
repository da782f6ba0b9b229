"""Read-only access to the peer systems' own databases: SQLite files and PostgreSQL URLs.

Nothing here writes to a source: SQLite files are opened with ``mode=ro`` and PostgreSQL
sessions are read-only transactions. Rows are streamed in chunks so that a million-row table
never sits in memory at once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads

from .._sql import read_sql
from ..errors import DatabaseError, ValidationError
from ..frames import coerce_frame
from ._errors import translate_database_error
from .memory import LongTermMemory
from .timestamps import register_infinite_timestamps

__all__ = [
    "SourceInfinity",
    "SourceJsonText",
    "load_peer_query",
    "table_query",
    "postgres_source",
    "read_frame",
    "sqlite_source",
    "stream_rows",
    "table_columns",
    "table_exists",
]


def load_peer_query(name: str) -> str:
    """The text of ``sql/peers/<name>.sql``."""
    return read_sql("peers", f"{name}.sql")


def table_query(table: str, order_by: str) -> sql.Composed:
    """``SELECT * FROM table ORDER BY order_by``, both names quoted (a source's own)."""
    return sql.SQL("SELECT * FROM {} ORDER BY {}").format(sql.Identifier(table),
                                                         sql.Identifier(order_by))


@contextmanager
def sqlite_source(path: str | os.PathLike[str] | sqlite3.Connection, *,
                  field: str = "sqlite_path"
                  ) -> Iterator[sqlite3.Connection]:
    """A read-only connection to an existing SQLite file (rows as :class:`sqlite3.Row`).

    ``path`` may also be a connection the caller opened: it is used as it is, and left open.
    """
    if isinstance(path, sqlite3.Connection):
        yield path
        return
    if not isinstance(path, (str, os.PathLike)):
        raise ValidationError(f"must be a path, got {type(path).__name__}", field=field)
    try:
        resolved = Path(path).expanduser().resolve()
        uri, found = f"{resolved.as_uri()}?mode=ro", resolved.is_file()
    except (ValueError, UnicodeError, OSError) as exc:  # a NUL, a lone surrogate
        raise ValidationError(f"is not a path this system can name ({exc})",
                              field=field) from None
    if not found:
        raise ValidationError(f"no SQLite file at {resolved}", field=field)
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise DatabaseError(f"cannot open {resolved} read-only: {exc}") from exc
    conn.row_factory = sqlite3.Row
    # TEXT that is not UTF-8 (SQLite stores what it is given) is read, escaped, not fatal.
    conn.text_factory = lambda data: data.decode("utf-8", "backslashreplace")
    try:
        yield conn
    except sqlite3.Error as exc:
        raise DatabaseError(f"reading {resolved} failed: {exc}") from exc
    finally:
        conn.close()


@contextmanager
def postgres_source(source: str | LongTermMemory, *, field: str = "url",
                    system: str | None = None) -> Iterator[psycopg.Connection[Any]]:
    """One read-only, repeatable-read transaction on a PostgreSQL source (``system``'s
    database, named in its errors, when it is no memory store).

    ``source`` is a URL or a :class:`LongTermMemory` whose database holds the tables; every
    table read in the block sees the same snapshot.
    """
    if isinstance(source, LongTermMemory):
        with source.read_only_connection() as conn:
            yield conn
        return
    if not isinstance(source, str) or not source.strip():
        raise ValidationError("must be a PostgreSQL URL or a LongTermMemory", field=field)
    try:
        with psycopg.connect(source, connect_timeout=10) as conn:
            conn.read_only = True
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            # Periods and timestamps are computed in UTC, as everywhere in this package.
            conn.execute("SELECT set_config('TimeZone', 'UTC', true)")
            register_infinite_timestamps(conn)  # a bitemporal "open" end is often infinity
            if conn.execute("SELECT 1 FROM pg_type WHERE typname = 'vector'").fetchone():
                register_vector(conn)
            yield conn
            conn.rollback()
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=source, source=system) from None  # URL inside


def table_columns(conn: sqlite3.Connection | psycopg.Connection[Any], table: str) -> set[str]:
    """The names of the columns of a source table (none when there is no such table)."""
    if isinstance(conn, sqlite3.Connection):
        return {str(row[1]) for row in conn.execute(
            "SELECT * FROM pragma_table_info(?)", (table,))}
    return {row[0] for row in conn.execute(
        """SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)
           AND attnum > 0 AND NOT attisdropped""", (table,))}


class SourceInfinity(dt.datetime):
    """PostgreSQL's ``infinity`` or ``-infinity`` as an import reads a source's rows.

    The latest or the earliest datetime, as the store's own reads give them (so it sorts
    and compares the same), but marked: a real ``0001-01-01 00:00`` is not ``-infinity``.
    """

    @property
    def label(self) -> str:
        """``"infinity"`` or ``"-infinity"``, as PostgreSQL writes it."""
        return "infinity" if self.year == dt.MAXYEAR else "-infinity"


class _SourceTimestamps(Loader):
    """Text timestamps of a source as an import reads them: the infinities as
    :class:`SourceInfinity`, and a time Python cannot hold (before year 1, after 9999) as
    PostgreSQL's own text, so that the row is still read and kept whole."""

    format = Format.TEXT
    latest: dt.datetime
    earliest: dt.datetime

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        finite = psycopg.adapters.get_loader(oid, self.format)
        assert finite is not None  # psycopg loads both types as text
        self._finite = finite(oid, context).load

    def load(self, data: Buffer) -> Any:
        if len(data) < 10:  # no finite timestamp is this short
            return self.earliest if data[0] == 45 else self.latest  # 45: "-"
        try:
            return self._finite(data)
        except psycopg.DataError:  # "timestamp too small (before year 1)", BC, year 10000
            return bytes(data).decode("utf-8", "replace")


_SOURCE_LOADERS = {
    name: type(f"_Source{name.title()}", (_SourceTimestamps,), {
        "latest": SourceInfinity(dt.MAXYEAR, 12, 31, 23, 59, 59, 999_999, tzinfo=zone),
        "earliest": SourceInfinity(dt.MINYEAR, 1, 1, tzinfo=zone)})
    for name, zone in (("timestamp", None), ("timestamptz", dt.UTC))}


class SourceJsonText(str):
    """A source's ``json`` or ``jsonb`` value that Python's JSON reader cannot read (nested
    past its recursion limit, or an integer of more than 4,300 digits), as its text: the row
    is still read, and an import rejects it naming the column."""


def _json_or_text(data: str | bytes) -> Any:
    """A ``json``/``jsonb`` value as Python's, or as :class:`SourceJsonText`."""
    try:
        return json.loads(data)
    except (RecursionError, ValueError):
        return SourceJsonText(data if isinstance(data, str) else data.decode("utf-8"))


def table_exists(conn: sqlite3.Connection | psycopg.Connection[Any], table: str) -> bool:
    """Whether the source has this table (PostgreSQL: on the search path)."""
    if isinstance(conn, sqlite3.Connection):
        return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                            (table,)).fetchone() is not None
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]  # type: ignore[index]


def stream_rows(conn: sqlite3.Connection | psycopg.Connection[Any], query: Any,
                chunk_rows: int) -> Iterator[list[dict[str, Any]]]:
    """Yield the rows of ``query`` as lists of dicts, ``chunk_rows`` at a time.

    PostgreSQL rows come through a server-side cursor, SQLite rows through ``fetchmany``:
    either way at most one chunk is held in memory.
    """
    if isinstance(conn, sqlite3.Connection):
        cursor = conn.execute(query)
        while rows := cursor.fetchmany(chunk_rows):
            yield [dict(row) for row in rows]
        return
    with conn.cursor(name="htm_analytics_import", row_factory=dict_row) as cur:
        for name, loader in _SOURCE_LOADERS.items():
            cur.adapters.register_loader(name, loader)
        set_json_loads(_json_or_text, cur)
        cur.itersize = chunk_rows
        cur.execute(query)
        while rows := cur.fetchmany(chunk_rows):
            yield rows


def count_rows(conn: sqlite3.Connection | psycopg.Connection[Any], table: str) -> int:
    """Rows in a source table (for the progress bar)."""
    if isinstance(conn, sqlite3.Connection):
        return int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
    return int(conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
        sql.Identifier(table))).fetchone()[0])  # type: ignore[index]


def read_frame(source: Any, name: str, params: Mapping[str, Any] | None = None,
               dtypes: Mapping[str, Any] | None = None, *, field: str = "url",
               system: str | None = None) -> pd.DataFrame:
    """Run ``sql/peers/<name>.sql`` on a source and return its rows as a typed DataFrame.

    ``source`` is an open :class:`sqlite3.Connection` (the query then uses ``:name``
    parameters), a PostgreSQL URL or a :class:`LongTermMemory`.
    """
    query = load_peer_query(name)
    if isinstance(source, sqlite3.Connection):
        cursor = source.execute(query, dict(params or {}))
        frame = pd.DataFrame([tuple(r) for r in cursor.fetchall()],
                             columns=[c[0] for c in cursor.description])
    else:
        with postgres_source(source, field=field, system=system) as conn, \
                conn.cursor() as cur:
            cur.execute(query, dict(params or {}))
            frame = pd.DataFrame(cur.fetchall(),
                                 columns=[c.name for c in cur.description or []])
    return coerce_frame(frame, dtypes) if dtypes else frame
