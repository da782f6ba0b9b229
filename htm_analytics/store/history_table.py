"""The history of ``htm-analytics collect`` kept in tables of a PostgreSQL schema the user
names, instead of a DuckDB file: the same tables (``sql/history/schema.sql``), the same
version check. Only this schema is written; the memory's tables are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import psycopg
from psycopg import sql

from .._sql import read_sql
from ..errors import HTMError, ValidationError
from ..validation import validate_key
from ._errors import translate_database_error
from .connection import check_connection_string, mask_url, resolve_database_url
from .history_errors import incomplete, version_number

__all__ = ["HistoryTable", "append_table_sample", "read_table_history"]


@dataclass(frozen=True)
class HistoryTable:
    """A history kept in the tables of ``schema`` in the database at ``url``."""

    url: str
    schema: str

    def __post_init__(self) -> None:
        if not isinstance(self.schema, str) or not self.schema.strip():
            raise ValidationError("must name a schema", field="history_schema")
        # A NUL ends the name PostgreSQL sees ("public\0x" is public): refused, as lone
        # surrogates are, by validate_key.
        validate_key(self.schema, field="history_schema")
        if len(self.schema.encode()) > 63:  # PostgreSQL would cut it, silently
            raise ValidationError("must be at most 63 bytes, PostgreSQL's longest name",
                                  field="history_schema")
        if self.schema == "public" or self.schema == "information_schema" \
                or self.schema.startswith("pg_"):
            raise ValidationError(f"{self.schema} is not a schema of its own: the history's "
                                  "tables (samples, ...) would sit among others; name a new "
                                  "one, such as htm_history", field="history_schema")
        if not isinstance(self.url, str) or not self.url.strip():
            raise ValidationError("must be a PostgreSQL URL", field="history_db")
        validate_key(self.url, field="history_db")
        check_connection_string(self.url, field="history_db")  # parsed; nothing is started

    def __str__(self) -> str:
        return f"schema {self.schema} of {mask_url(resolve_database_url(self.url))}"


def _plain(value: Any) -> Any:
    """A value psycopg adapts: None for missing, Python scalars for numpy ones."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _in_schema(conn: psycopg.Connection[Any], target: HistoryTable) -> None:
    conn.execute(sql.SQL("SET LOCAL search_path = {}").format(sql.Identifier(target.schema)))


def append_table_sample(target: HistoryTable, sample: dict[str, pd.DataFrame],
                        tables: tuple[str, ...], version: int,
                        check_version: Any) -> int:
    """Append ``sample`` in one transaction; return its ``sample_id``."""
    url = resolve_database_url(target.url)
    try:
        with psycopg.connect(url) as conn, conn.transaction():
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                sql.Identifier(target.schema)))
            _in_schema(conn, target)
            stored = _version(conn, target)
            if stored is not None:  # refuse a newer or incomplete history before any change
                check_version(stored, target)
                if missing := [table for table in tables if not _exists(conn, table)]:
                    raise incomplete(target, missing)  # as reading refuses it
            for statement in read_sql("history", "schema.sql").split(";"):
                if statement.strip():
                    conn.execute(statement.encode())
            conn.execute("LOCK TABLE samples IN EXCLUSIVE MODE")  # one writer numbers samples
            if (now := _version(conn, target)) is not None:  # as another writer may have left it
                check_version(now, target)
            conn.execute("INSERT INTO history_meta VALUES ('schema_version', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                         (str(version),))
            row = conn.execute("SELECT coalesce(max(sample_id), 0) + 1 FROM samples").fetchone()
            sample_id = int(row[0]) if row else 1
            for table in tables:
                frame = sample[table]
                if frame.empty:
                    continue
                columns = ["sample_id", *map(str, frame.columns)]
                insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                    sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)),
                    sql.SQL(", ").join(sql.Placeholder() * len(columns)))
                with conn.cursor() as cur:
                    cur.executemany(insert, [
                        [sample_id, *map(_plain, values)]
                        for values in frame.itertuples(index=False, name=None)])
            return sample_id
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=url) from None


def _exists(conn: psycopg.Connection[Any], table: str) -> bool:
    """Whether ``table`` is in the history's schema (the search path)."""
    found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()
    return bool(found and found[0])


def _version(conn: psycopg.Connection[Any], target: HistoryTable) -> int | None:
    if not _exists(conn, "history_meta"):
        return None
    row = conn.execute("SELECT value FROM history_meta WHERE key = 'schema_version'"
                       ).fetchone()
    return version_number(row[0], target) if row else None


def read_table_history(target: HistoryTable, tables: tuple[str, ...],
                       check_version: Any) -> dict[str, pd.DataFrame]:
    """Every sample of the history in ``target``, one frame per table."""
    url = resolve_database_url(target.url)
    try:
        with psycopg.connect(url) as conn, conn.transaction():
            _in_schema(conn, target)
            check_version(_version(conn, target), target)
            if missing := [table for table in tables if not _exists(conn, table)]:
                raise incomplete(target, missing)
            frames = {}
            for table in tables:
                with conn.cursor() as cur:
                    cur.execute(sql.SQL("SELECT * FROM {} ORDER BY sample_id").format(
                        sql.Identifier(table)))
                    names = [column.name for column in cur.description or []]
                    frames[table] = pd.DataFrame(cur.fetchall(), columns=names)
            return frames
    except HTMError:
        raise
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=url) from None
