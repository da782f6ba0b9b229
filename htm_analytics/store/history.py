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
from .snapshot import _unmask

__all__ = ["HISTORY_SCHEMA_VERSION", "HISTORY_TABLES", "append_sample", "read_history"]

HISTORY_SCHEMA_VERSION = 1
# The frames of a sample, and the table each is stored in.
HISTORY_TABLES = ("samples", "sample_tables", "sample_indexes", "sample_robots",
                  "sample_statements")


def _run(con: duckdb.DuckDBPyConnection, statement: str, params: Any = None) -> list[Any]:
    """Run one statement to its end (DuckDB refuses the next one before that)."""
    result = con.execute(statement, params)
    return result.fetchall() if result is not None else []


def _check_version(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    try:
        found = _run(con, "SELECT value FROM history_meta WHERE key = 'schema_version'")
        row = found[0] if found else None
    except duckdb.CatalogException:
        row = None
    if row is None:
        raise HistoryVersionError(f"{path} is not a history written by htm-analytics collect "
                                  "(no history_meta.schema_version)")
    version = int(row[0])
    if version > HISTORY_SCHEMA_VERSION:
        raise HistoryVersionError(
            f"{path} holds history schema version {version}; this release reads up to "
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


def append_sample(path: str | os.PathLike[str], sample: dict[str, pd.DataFrame]) -> int:
    """Append one sample to the history at ``path`` (created when missing); return its id.

    ``sample`` maps each name of :data:`HISTORY_TABLES` to a frame with that table's
    columns but ``sample_id`` (``samples`` has one row). One transaction: a sample is
    stored whole or not at all.
    """
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
        _check_version(con, target)
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
    frame = pd.DataFrame({name: _unmask(values) for name, values in columns.items()})
    for column in frame.columns:
        if column.endswith("_at") or column == "stats_reset":
            frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def read_history(path: str | os.PathLike[str]) -> dict[str, pd.DataFrame]:
    """Every sample of the history at ``path``: one frame per name of
    :data:`HISTORY_TABLES`, ordered by sample. Raises :class:`HistoryVersionError` for a
    file this release cannot read."""
    con, target = _connect(path, create=False)
    try:
        _check_version(con, target)
        return {table: _frame(con, table) for table in HISTORY_TABLES}
    finally:
        con.close()
