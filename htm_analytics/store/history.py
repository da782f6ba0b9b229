"""The history of a memory's vital signs: samples appended to a DuckDB file, read back.

Written by ``htm-analytics collect`` (one sample per run), read by ``history(...)``. The
file is the user's choice and nothing is written to the memory's database. Its schema is
versioned (``history_meta.schema_version``, ``sql/history/schema.sql``, docs/history.md): a
reader refuses a file written by a newer schema rather than misread it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from .._sql import read_sql
from ..errors import HistoryVersionError, ValidationError
from .history_table import HistoryTable, append_table_sample, read_table_history
from .snapshot import _unmask

__all__ = ["HISTORY_SCHEMA_VERSION", "HISTORY_TABLES", "HistoryTable", "append_sample",
           "check_version", "read_history"]

HISTORY_SCHEMA_VERSION = 1
# The frames of a sample, and the table each is stored in.
HISTORY_TABLES = ("samples", "sample_tables", "sample_indexes", "sample_robots",
                  "sample_statements")


def _run(con: duckdb.DuckDBPyConnection, statement: str, params: Any = None) -> list[Any]:
    """Run one statement to its end (DuckDB refuses the next one before that)."""
    result = con.execute(statement, params)
    return result.fetchall() if result is not None else []


def _version_of(con: duckdb.DuckDBPyConnection) -> int | None:
    try:
        found = _run(con, "SELECT value FROM history_meta WHERE key = 'schema_version'")
    except duckdb.CatalogException:
        return None
    return int(found[0][0]) if found else None


def check_version(version: int | None, where: Any) -> None:
    """Refuse a history this release cannot read: none at all, or a newer schema."""
    if version is None:
        raise HistoryVersionError(f"{where} is not a history written by htm-analytics "
                                  "collect (no history_meta.schema_version)")
    if version > HISTORY_SCHEMA_VERSION:
        raise HistoryVersionError(
            f"{where} holds history schema version {version}; this release reads up to "
            f"{HISTORY_SCHEMA_VERSION}: upgrade htm-analytics to read it")


def _connect(path: str | os.PathLike[str], *, create: bool) -> tuple[Any, Path]:
    target = Path(path).expanduser()
    if target.is_dir():
        raise ValidationError(f"{target} is a folder; give a file such as history.duckdb",
                              field="history")
    if not create and not target.is_file():
        raise ValidationError(f"no history at {target}; write one with "
                              "`htm-analytics collect --history PATH`", field="history")
    try:
        con = duckdb.connect(str(target), read_only=not create)
    except duckdb.Error as exc:
        raise HistoryVersionError(f"cannot open the history {target}: {exc}") from None
    return con, target


def append_sample(path: str | os.PathLike[str] | HistoryTable,
                  sample: dict[str, pd.DataFrame]) -> int:
    """Append one sample to the history at ``path`` (created when missing); return its id.

    ``path`` is a DuckDB file, or a :class:`HistoryTable`: tables in a PostgreSQL schema.

    ``sample`` maps each name of :data:`HISTORY_TABLES` to a frame with that table's
    columns but ``sample_id`` (``samples`` has one row). One transaction: a sample is
    stored whole or not at all.
    """
    if isinstance(path, HistoryTable):
        return append_table_sample(path, sample, HISTORY_TABLES, HISTORY_SCHEMA_VERSION,
                                   check_version)
    con, target = _connect(path, create=True)
    try:
        fresh = _run(con, "SELECT count(*) FROM information_schema.tables "
                          "WHERE table_name = 'history_meta'") == [(0,)]
        if fresh:
            for statement in read_sql("history", "schema.sql").split(";"):
                if statement.strip():
                    _run(con, statement)
            _run(con, "INSERT INTO history_meta VALUES ('schema_version', ?)",
                 [str(HISTORY_SCHEMA_VERSION)])
        check_version(_version_of(con), target)
        _run(con, "BEGIN TRANSACTION")
        sample_id = int(_run(con, "SELECT coalesce(max(sample_id), 0) + 1 FROM samples")[0][0])
        for table in HISTORY_TABLES:
            frame = sample[table].copy()
            if frame.empty:
                continue
            frame.insert(0, "sample_id", sample_id)
            con.register("incoming", frame)
            _run(con, f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
            con.unregister("incoming")
        _run(con, "COMMIT")
        return sample_id
    except duckdb.Error as exc:
        raise HistoryVersionError(f"could not write to the history {target}: {exc}") from None
    finally:
        con.close()


def _frame(con: duckdb.DuckDBPyConnection, table: str) -> pd.DataFrame:
    # fetchnumpy, not df(): DuckDB's pandas path warns under pandas 3.
    with con.cursor() as cur:
        columns = cur.execute(f"SELECT * FROM {table} ORDER BY sample_id").fetchnumpy()
    return _utc_times(pd.DataFrame({name: _unmask(values) for name, values in columns.items()}))


def _utc_times(frame: pd.DataFrame) -> pd.DataFrame:
    for column in frame.columns:
        if column.endswith("_at") or column == "stats_reset":
            frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def read_history(path: str | os.PathLike[str] | HistoryTable) -> dict[str, pd.DataFrame]:
    """Every sample of the history at ``path``: one frame per name of
    :data:`HISTORY_TABLES`, ordered by sample. Raises :class:`HistoryVersionError` for a
    file this release cannot read."""
    if isinstance(path, HistoryTable):
        frames = read_table_history(path, HISTORY_TABLES, check_version)
        for frame in frames.values():
            _utc_times(frame)
        return frames
    con, target = _connect(path, create=False)
    try:
        check_version(_version_of(con), target)
        return {table: _frame(con, table) for table in HISTORY_TABLES}
    finally:
        con.close()
