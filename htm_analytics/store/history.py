"""The history of a memory's vital signs: samples appended to a DuckDB file, a folder of
Parquet files or the tables of a PostgreSQL schema, read back.

Written by ``htm-analytics collect`` (one sample per run), read by ``history(...)``. Where
it goes is the user's choice and nothing is written to the memory's own tables. Its schema
is versioned (``history_meta.schema_version``, ``sql/history/schema.sql``, docs/history.md):
a new version only adds tables and columns, a writer brings an older history up to its own
version, and a reader refuses a history written by a newer schema rather than misread it
(an older one reads with the added columns NULL).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from .._sql import read_sql
from ..errors import HistoryVersionError, NotAHistoryError, ValidationError
from ._errors import one_line
from .file_paths import examining, path_text, writing
from .history_errors import incomplete, version_number
from .history_folder import (
    HistoryFolder,
    append_folder_sample,
    history_schema,
    local_path,
    read_folder_history,
)
from .history_table import HistoryTable, append_table_sample, read_table_history
from .snapshot import _unmask

__all__ = ["HISTORY_FORMATS", "HISTORY_SCHEMA_VERSION", "HISTORY_TABLES", "HistoryFolder",
           "HistoryTable", "append_sample", "check_version", "history_location",
           "read_history"]

HISTORY_SCHEMA_VERSION = 5
HISTORY_FORMATS = ("duckdb", "parquet")
# The frames of a sample, and the table each is stored in.
HISTORY_TABLES = ("samples", "sample_tables", "sample_indexes", "sample_robots",
                  "sample_statements")


def _run(con: duckdb.DuckDBPyConnection, statement: str, params: Any = None) -> list[Any]:
    """Run one statement to its end (DuckDB refuses the next one before that)."""
    result = con.execute(statement, params)
    return result.fetchall() if result is not None else []


def _version_of(con: duckdb.DuckDBPyConnection, where: Path) -> int | None:
    try:
        found = _run(con, "SELECT value FROM history_meta WHERE key = 'schema_version'")
    except duckdb.CatalogException:
        return None
    return version_number(found[0][0], where) if found else None


def check_version(version: int | None, where: Any) -> None:
    """Refuse a history this release cannot read: none at all
    (:class:`NotAHistoryError`), or a newer schema (:class:`HistoryVersionError`)."""
    if version is None:
        raise NotAHistoryError(f"{where} is not a history written by htm-analytics "
                               "collect (no history_meta.schema_version)")
    if version > HISTORY_SCHEMA_VERSION:
        raise HistoryVersionError(
            f"{where} holds history schema version {version}; this release reads up to "
            f"{HISTORY_SCHEMA_VERSION}: upgrade htm-analytics to read it")


HistoryPath = str | os.PathLike[str] | HistoryFolder | HistoryTable


def history_location(path: HistoryPath, history_format: str | None = None
                     ) -> Path | HistoryFolder | HistoryTable:
    """Where a history is: a DuckDB file, or a Parquet folder (:class:`HistoryFolder`) when
    ``history_format`` is ``"parquet"``, or, without a format, when ``path`` is a folder or
    ends with a path separator (``history/``). A :class:`HistoryTable` or
    :class:`HistoryFolder` is returned as it is."""
    if history_format is not None and history_format not in HISTORY_FORMATS:
        raise ValidationError(f"must be one of {HISTORY_FORMATS}", field="history_format")
    if isinstance(path, (HistoryTable, HistoryFolder)):
        return path
    text = path_text(path)
    try:
        is_dir = text.endswith(("/", os.sep)) or local_path(text).is_dir()
    except OSError as exc:  # a name too long for the file system, a folder none may list
        raise ValidationError(f"cannot use {text}: {exc.strerror or exc}",
                              field="history") from None
    if history_format == "duckdb" and is_dir:
        raise ValidationError(f"{text} is a folder; a DuckDB history is a file",
                              field="history")
    if history_format == "parquet" or (history_format is None and is_dir):
        return HistoryFolder(Path(text))
    return local_path(text)


def _connect(target: Path, *, create: bool) -> duckdb.DuckDBPyConnection:
    with examining(target, field="history"):
        if not create and not target.is_file():
            raise ValidationError(f"no history at {target}; write one with "
                                  "`htm-analytics collect --history PATH`", field="history")
    try:
        with writing(target, field="history", what="the history"):
            if create:
                target.parent.mkdir(parents=True, exist_ok=True)
            return duckdb.connect(str(target), read_only=not create)
    except duckdb.IOException as exc:
        if create:
            raise ValidationError(f"cannot write the history {target}: {one_line(exc)}",
                                  field="history") from None
        raise NotAHistoryError(f"cannot open the history {target}: {one_line(exc)}") from None
    except duckdb.Error as exc:
        raise NotAHistoryError(f"cannot open the history {target}: {one_line(exc)}") from None


def append_sample(path: HistoryPath, sample: dict[str, pd.DataFrame]) -> int:
    """Append one sample to the history at ``path`` (created when missing); return its id.

    ``path`` is a DuckDB file, a Parquet folder (see :func:`history_location`) or a
    :class:`HistoryTable`: tables in a PostgreSQL schema. A history of an older schema
    version is brought up to this one first (its new columns NULL in older samples).

    ``sample`` maps each name of :data:`HISTORY_TABLES` to a frame with that table's
    columns but ``sample_id`` (``samples`` has one row). A sample is stored whole or not at
    all.

    Raises :class:`HistoryVersionError` for a history of a newer version, and
    :class:`NotAHistoryError` (naming ``history``) for a place that is not a history or not
    a whole one (as :func:`read_history` refuses them, before anything is written), or one
    the sample could not be written to.
    """
    location = history_location(path)
    if isinstance(location, HistoryTable):
        return append_table_sample(location, sample, HISTORY_TABLES, HISTORY_SCHEMA_VERSION,
                                   check_version)
    if isinstance(location, HistoryFolder):
        return append_folder_sample(location, sample, HISTORY_TABLES, HISTORY_SCHEMA_VERSION,
                                    check_version)
    target = location
    con = _connect(target, create=True)
    try:
        tables = {row[0] for row in _run(con, "SELECT table_name FROM information_schema.tables")}
        if "history_meta" in tables:
            check_version(_version_of(con, target), target)
            # Refused as reading refuses it: re-made empty, the table's samples would be lost.
            if missing := [table for table in HISTORY_TABLES if table not in tables]:
                raise incomplete(target, missing)
        elif tables:
            raise ValidationError(f"{target} holds tables but no history_meta: not a history "
                                  "file; give a new one", field="history")
        _run(con, "BEGIN TRANSACTION")
        for statement in read_sql("history", "schema.sql").split(";"):
            if statement.strip():
                _run(con, statement)
        _run(con, "DELETE FROM history_meta WHERE key = 'schema_version'")
        _run(con, "INSERT INTO history_meta VALUES ('schema_version', ?)",
             [str(HISTORY_SCHEMA_VERSION)])
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
    except duckdb.Error as exc:  # a history whose tables were changed, a disk full...
        raise NotAHistoryError(f"could not write to the history {target}: "
                               f"{one_line(exc)}") from None
    finally:
        con.close()


def _frames(con: duckdb.DuckDBPyConnection) -> dict[str, pd.DataFrame]:
    return {table: _frame(con, table) for table in HISTORY_TABLES}


def _frame(con: duckdb.DuckDBPyConnection, table: str) -> pd.DataFrame:
    # fetchnumpy, not df(): DuckDB's pandas path warns under pandas 3.
    with con.cursor() as cur:
        columns = cur.execute(f"SELECT * FROM {table} ORDER BY sample_id").fetchnumpy()
    return _utc_times(pd.DataFrame({name: _unmask(values) for name, values in columns.items()}))


def _utc_times(frame: pd.DataFrame) -> pd.DataFrame:
    for column in frame.columns:
        if column.endswith("_at") or column in ("stats_reset", "stats_since"):
            frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def _current_columns() -> dict[str, list[str]]:
    """The columns of each history table in this release's schema."""
    with history_schema() as con:
        return {table: [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]
                for table in HISTORY_TABLES}


def _complete(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The frames of an older schema version with this version's columns added, NULL."""
    for table, columns in _current_columns().items():
        frame = frames[table]
        for column in columns:
            if column not in frame:
                frame[column] = pd.Series([None] * len(frame), index=frame.index, dtype=object)
    return frames


def read_history(path: HistoryPath) -> dict[str, pd.DataFrame]:
    """Every sample of the history at ``path`` (a DuckDB file, a Parquet folder or a
    :class:`HistoryTable`): one frame per name of :data:`HISTORY_TABLES`, ordered by
    sample, with this release's columns (NULL where an older version had none). Raises
    :class:`HistoryVersionError` for a history of a newer version, and
    :class:`NotAHistoryError` (a :class:`HistoryVersionError` and a :class:`ValidationError`
    naming ``history``) for a place that is not a history, or not a whole one."""
    location = history_location(path)
    if isinstance(location, HistoryTable):
        frames = read_table_history(location, HISTORY_TABLES, check_version)
        for frame in frames.values():
            _utc_times(frame)
        return _complete(frames)
    if isinstance(location, HistoryFolder):
        return read_folder_history(location, HISTORY_TABLES, check_version, _frames)
    con = _connect(location, create=False)
    try:
        check_version(_version_of(con, location), location)
        tables = {row[0] for row in _run(con, "SELECT table_name FROM information_schema.tables")}
        if missing := [table for table in HISTORY_TABLES if table not in tables]:
            raise incomplete(location, missing)
        return _complete(_frames(con))
    except duckdb.Error as exc:
        raise NotAHistoryError(f"cannot read the history {location}: {one_line(exc)}") from None
    finally:
        con.close()
