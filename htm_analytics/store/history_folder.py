"""The history of ``htm-analytics collect`` as a folder of Parquet files, instead of a DuckDB
file: the same tables (``sql/history/schema.sql``) and the same version check.

Layout: ``history_meta.parquet`` (``key``, ``value``: the schema version) and one folder per
sample, ``sample_000001/``, holding one ``<table>.parquet`` per table of
:data:`~htm_analytics.store.history.HISTORY_TABLES` (empty tables included). A sample's
folder is reserved by creating it (two concurrent collects never get the same number), each
file is written beside its name and renamed into place, and ``samples.parquet`` comes last:
readers take only the samples whose ``samples.parquet`` exists, so a sample is read whole or
not at all. Files written by an older schema version have fewer columns; they are read into
the current tables by name, the missing columns NULL.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from .._sql import read_sql
from ..errors import NotAHistoryError, ValidationError
from ._errors import one_line
from .file_paths import examining, path_text, writing
from .history_errors import incomplete, version_number

__all__ = ["HistoryFolder", "META_FILE", "append_folder_sample", "history_schema",
           "read_folder_history"]

META_FILE = "history_meta.parquet"
_SAMPLE_FOLDER = re.compile(r"^sample_(\d+)$")


@dataclass(frozen=True)
class HistoryFolder:
    """A history kept as Parquet files in the folder ``path`` (created by the first
    collect)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", local_path(path_text(self.path)))

    def __str__(self) -> str:
        return f"{self.path}{os.sep}"


def local_path(text: str) -> Path:
    """``text`` as a path, ``~`` expanded; :class:`ValidationError` naming ``history`` where
    it names the home folder of no user."""
    try:
        return Path(text).expanduser()
    except RuntimeError as exc:  # ~nobody/...
        raise ValidationError(f"cannot use {text}: {exc}", field="history") from None


@contextmanager
def history_schema() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB with the history's tables, as the current schema version has
    them."""
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        for statement in read_sql("history", "schema.sql").split(";"):
            if statement.strip():
                con.execute(statement)
        yield con


def _sample_folders(folder: Path) -> dict[int, Path]:
    """Every sample folder, committed or not, by sample id."""
    found = {}
    for entry in folder.iterdir():
        match = _SAMPLE_FOLDER.match(entry.name)
        if match and entry.is_dir():
            found[int(match.group(1))] = entry
    return found


def _of_a_history(entry: Path) -> bool:
    """Whether ``entry`` is one a history folder holds (another collect may be writing its
    first files)."""
    return entry.name in (META_FILE, f".{META_FILE}.partial") or bool(
        _SAMPLE_FOLDER.match(entry.name))


def _version(folder: Path) -> int | None:
    meta = folder / META_FILE
    if not meta.is_file():
        return None
    try:
        with duckdb.connect() as con:
            row = con.execute("SELECT value FROM read_parquet(?) WHERE key = 'schema_version'",
                              [str(meta)]).fetchone()
    except duckdb.Error as exc:
        raise NotAHistoryError(f"cannot read {meta}: {one_line(exc)}") from None
    return version_number(row[0], f"{folder}{os.sep}") if row else None


def _write_table(con: duckdb.DuckDBPyConnection, table: str, target: Path) -> None:
    """The rows of ``table`` to ``target``, written beside it and renamed into place."""
    partial = target.with_name(f".{target.name}.partial")
    con.table(table).to_parquet(str(partial))
    os.replace(partial, target)


def append_folder_sample(target: HistoryFolder, sample: dict[str, pd.DataFrame],
                         tables: tuple[str, ...], version: int,
                         check_version: Callable[[int | None, Any], None]) -> int:
    """Write ``sample`` as a new sample folder of ``target``; return its ``sample_id``.

    Raises
    ------
    ValidationError
        The folder cannot be created or written, or holds files but no history.
    NotAHistoryError
        The folder's history cannot be read (its version is no version, a committed
        sample lost files) or written to (naming ``history``, as a ValidationError).
    HistoryVersionError
        The folder holds a history of a newer schema version.
    """
    folder = target.path
    try:
        with writing(folder, field="history", what="the history folder"):
            return _append(target, folder, sample, tables, version, check_version)
    except duckdb.Error as exc:
        raise NotAHistoryError(f"could not write to the history {folder}: "
                               f"{one_line(exc)}") from None


def _append(target: HistoryFolder, folder: Path, sample: dict[str, pd.DataFrame],
            tables: tuple[str, ...], version: int,
            check_version: Callable[[int | None, Any], None]) -> int:
    if folder.exists() and not folder.is_dir():
        raise ValidationError(f"{folder} is a file; give a folder for a Parquet history",
                              field="history")
    folder.mkdir(parents=True, exist_ok=True)
    stored = _version(folder)
    if stored is None and not all(map(_of_a_history, folder.iterdir())):
        raise ValidationError(f"{folder} holds files but no {META_FILE}: not a history "
                              "folder; give a new or empty one", field="history")
    if stored is not None:
        check_version(stored, target)
        if lost := _lost_files(folder, tables):  # refused as reading refuses it
            raise incomplete(target, lost)
    with history_schema() as con:
        if stored != version:
            con.execute("INSERT INTO history_meta VALUES ('schema_version', ?)",
                        [str(version)])
            _write_table(con, "history_meta", folder / META_FILE)
        return _write_sample(con, folder, sample, tables)


def _write_sample(con: duckdb.DuckDBPyConnection, folder: Path,
                  sample: dict[str, pd.DataFrame], tables: tuple[str, ...]) -> int:
    sample_id = max(_sample_folders(folder), default=0) + 1
    while True:  # reserve the number: mkdir fails when another collect took it
        home = folder / f"sample_{sample_id:06d}"
        try:
            home.mkdir()
            break
        except FileExistsError:
            sample_id += 1
    try:
        for table in tables:
            frame = sample[table].copy()
            frame.insert(0, "sample_id", sample_id)
            con.register("incoming", frame)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
            con.unregister("incoming")
        for table in (*(t for t in tables if t != "samples"), "samples"):  # samples commits
            _write_table(con, table, home / f"{table}.parquet")
    except BaseException:
        shutil.rmtree(home, ignore_errors=True)
        raise
    return sample_id


def _committed_files(folder: Path, tables: tuple[str, ...]) -> dict[str, list[Path]]:
    """Per table, its file in each committed sample (one whose ``samples.parquet`` is
    there), whether it is there or not."""
    committed = sorted(sample_id for sample_id, home in _sample_folders(folder).items()
                       if (home / "samples.parquet").is_file())
    return {table: [folder / f"sample_{i:06d}" / f"{table}.parquet" for i in committed]
            for table in tables}


def _lost_files(folder: Path, tables: tuple[str, ...],
                files: dict[str, list[Path]] | None = None) -> list[str]:
    """The files of committed samples that are not there (relative to ``folder``)."""
    files = _committed_files(folder, tables) if files is None else files
    return [str(file.relative_to(folder)) for paths in files.values() for file in paths
            if not file.is_file()]


def read_folder_history(target: HistoryFolder, tables: tuple[str, ...],
                        check_version: Callable[[int | None, Any], None],
                        frames: Callable[[duckdb.DuckDBPyConnection], dict[str, pd.DataFrame]]
                        ) -> dict[str, pd.DataFrame]:
    """Every committed sample of the folder, loaded into the current tables; ``frames(con)``
    reads them out."""
    folder = target.path
    with examining(folder, field="history"):
        if not folder.is_dir():
            raise ValidationError(f"no history folder at {folder}; write one with "
                                  f"`htm-analytics collect --history {folder}{os.sep}`",
                                  field="history")
        check_version(_version(folder), target)
        files = _committed_files(folder, tables)
        if lost := _lost_files(folder, tables, files):
            raise incomplete(target, lost)
    try:
        with history_schema() as con:
            for table, paths in files.items():
                if paths:
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM "
                                "read_parquet(?, union_by_name = true)", [list(map(str, paths))])
            return frames(con)
    except duckdb.Error as exc:
        raise NotAHistoryError(f"cannot read the history {folder}: {one_line(exc)}") from None
