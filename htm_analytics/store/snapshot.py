"""Offline snapshots of a memory database in DuckDB, answering the analysis helpers without
PostgreSQL."""

from __future__ import annotations

import datetime as dt
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from .._sql import read_sql
from ..errors import DatabaseError, HTMError, ValidationError
from ..frames import (
    TIME_INFINITY,
    TIME_MINUS_INFINITY,
    coerce_frame,
    load_analytics_query,
    node_id_pages,
    to_duckdb_query,
)
from ._errors import one_line
from .catalog import _PACKED_TABLES, MEMORY_TABLES
from .file_paths import examining, path_text, writing
from .memory import LongTermMemory, live_store
from .packed_rows import LATEST_MICROSECONDS
from .read_ahead import read_ahead
from .schema import SCHEMA_VERSION

__all__ = ["export_snapshot", "Snapshot", "write_parquet"]

_TABLES = (*MEMORY_TABLES, "snapshot_info")
_DUCKDB_MEMORY = "256MB"  # DuckDB's buffer while a snapshot is written
_PARQUET_ROW_GROUP = 10_000  # rows a Parquet row group holds (one is built in memory at once)
_NO_VALUES = np.zeros(0, dtype=np.float32)
_TRANSACTION_ROWS = 100_000  # rows DuckDB receives in one transaction while a snapshot is written
_DUCKDB_INFINITY = pd.Timestamp(np.datetime64(LATEST_MICROSECONDS, "us")).tz_localize("UTC")
_DUCKDB_MINUS_INFINITY = pd.Timestamp(np.datetime64(-LATEST_MICROSECONDS, "us")
                                      ).tz_localize("UTC")
_WORK_PREFIX = 100  # characters of the snapshot's name in its work folder's (names have 255)


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(read_sql("snapshot_schema.duckdb.sql"))


def export_snapshot(store: LongTermMemory, path: str | os.PathLike[str], *,
                    overwrite: bool = False) -> Path:
    """Copy the memory tables into a DuckDB file or a folder of Parquet files.

    Every table is read in one PostgreSQL transaction (one snapshot: no link to a memory the
    copy lacks) and streamed in chunks; embeddings are kept at their own dimension as
    ``FLOAT[]``. The snapshot is written beside ``path`` and
    moved into place only when complete, so a failed export leaves nothing half-written.

    Parameters
    ----------
    store : LongTermMemory
        The live memory.
    path : str or path-like
        A file ending in ``.duckdb`` (or ``.db``) for a DuckDB database; anything else is a
        folder that receives one ``<table>.parquet`` per table.
    overwrite : bool
        Replace an existing snapshot at ``path``; otherwise an existing path is an error.
        Only a snapshot is replaced: a DuckDB file with a ``snapshot_info`` table, or a
        folder holding the snapshot's Parquet files and nothing else, or an empty one (never
        the current folder or one above it).

    Returns
    -------
    pathlib.Path
        The snapshot's path, to open with :class:`Snapshot`.

    Raises
    ------
    ValidationError
        Naming ``path``, in one line: a path that exists (without ``overwrite``) or is not a
        snapshot to replace, a name the file system cannot use (too long), a folder that
        cannot be written in, or an error while the snapshot is written (a disk filling up,
        told by the system or by DuckDB).
    """
    store = live_store(store)
    target = Path(path_text(path, field="path"))
    as_database = target.suffix in (".duckdb", ".db")
    with examining(target, field="path"):  # a name too long, a folder none may list
        exists = target.exists()
    if exists and not overwrite:
        raise ValidationError(f"{target} exists; pass overwrite=True to replace it", field="path")
    if exists:
        _check_replaceable(target, as_database)
    with writing(target.parent, field="path"):
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name[:_WORK_PREFIX]}.",
                                     dir=target.parent))
    try:
        _write(store, work, as_database)
        with writing(target, field="path"):
            if as_database:
                _replace(work / "snapshot.duckdb", target)
            else:
                (work / "snapshot.duckdb").unlink(missing_ok=True)
                _replace(work, target)
    except duckdb.Error as exc:  # a disk filling up, as DuckDB tells it
        raise _duckdb_error(exc, f"cannot write the snapshot {target}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _write(store: LongTermMemory, work: Path, as_database: bool) -> None:
    """Write the snapshot into the folder ``work``: ``snapshot.duckdb``, and a Parquet file
    per table unless ``as_database``."""
    # A file even for Parquet, and a bounded buffer: DuckDB writes pages out instead of
    # holding the whole memory (its default limit is most of the machine's RAM).
    database = work / "snapshot.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"SET memory_limit = '{_DUCKDB_MEMORY}'")
        con.execute("SET enable_progress_bar = false")  # DuckDB's own, on stderr
        _create_tables(con)
        # Transactions of many chunks: DuckDB then writes whole row groups once, into the
        # table's blocks, instead of each chunk into its log and again at a checkpoint
        # (several times faster); bounded, because it holds a transaction's rows.
        pending = 0
        con.begin()
        # The next chunks are read while DuckDB writes this one.
        for table, chunk in read_ahead(store.iter_tables_chunks(MEMORY_TABLES)):
            if "embedding" in chunk:
                chunk["embedding"] = _arrow_vectors(chunk["embedding"])
            if table not in _PACKED_TABLES:  # packed links carry DuckDB's infinities already
                _with_duckdb_infinities(chunk)
            con.register("chunk", chunk)
            con.execute(f"INSERT INTO {table} SELECT * FROM chunk")  # our table names
            con.unregister("chunk")
            pending += len(chunk)
            if pending >= _TRANSACTION_ROWS:
                con.commit()
                con.begin()
                pending = 0
        con.commit()
        info = store.server_info
        con.execute("INSERT INTO snapshot_info VALUES (?, ?, ?, ?, ?)",
                    [dt.datetime.now(dt.UTC), store.url, SCHEMA_VERSION,
                     info["server_version"], info["pgvector_version"]])
        if not as_database:
            for table in _TABLES:
                con.table(table).to_parquet(str(work / f"{table}.parquet"),
                                            row_group_size=_PARQUET_ROW_GROUP)


def _with_duckdb_infinities(chunk: pd.DataFrame) -> None:
    """PostgreSQL's infinite timestamps, which the store reads as Python's extreme datetimes
    (store.timestamps), written as DuckDB's infinities, as the packed links keep them.

    Not for the packed links themselves: they tell an infinity from a time at those extremes
    (``9999-12-31 23:59:59.999999``, a finite time there), which must stay finite."""
    for column in chunk.select_dtypes("datetimetz").columns:
        times = chunk[column]
        latest, earliest = times == TIME_INFINITY, times == TIME_MINUS_INFINITY
        if latest.any() or earliest.any():  # rarely: no copy of the column otherwise
            chunk[column] = times.mask(latest, _DUCKDB_INFINITY).mask(
                earliest, _DUCKDB_MINUS_INFINITY)


def _arrow_vectors(vectors: pd.Series) -> pd.Series:
    """``vectors`` (numpy arrays or None) as one Arrow list-of-float32 column.

    DuckDB reads such a column as a whole, three to four times faster than an object column,
    whose arrays it converts one by one.
    """
    present = vectors.notna().to_numpy()
    arrays = [np.asarray(v, dtype=np.float32) if ok else _NO_VALUES
              for v, ok in zip(vectors, present)]
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    values = np.concatenate([_NO_VALUES, *arrays])
    column = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values),
                                           mask=pa.array(~present))
    return pd.Series(pd.arrays.ArrowExtensionArray(column), index=vectors.index,
                     name=vectors.name)


def write_parquet(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a DataFrame to a Parquet file through DuckDB."""
    with duckdb.connect() as con:
        con.register("frame", frame)
        con.table("frame").to_parquet(str(path))


def _check_replaceable(target: Path, as_database: bool) -> None:
    """Refuse (naming ``path``) to replace what is not a snapshot of this kind."""
    def refuse(why: str) -> ValidationError:
        return ValidationError(f"{target} {why}; only a snapshot is replaced: give a new "
                               "path, or remove it yourself", field="path")

    if as_database:
        with examining(target, field="path"):
            is_file = target.is_file()
        if not is_file:
            raise refuse("is not a file")
        try:
            with duckdb.connect(str(target), read_only=True) as con:
                con.execute("SELECT count(*) FROM snapshot_info").fetchone()
        except duckdb.Error:
            raise refuse("is not a snapshot (no snapshot_info table)") from None
        return
    with examining(target, field="path"):
        if not target.is_dir():
            raise refuse("is not a folder")
        here = Path.cwd().resolve()
        if target.resolve() in (here, *here.parents):
            raise refuse("is the current folder or holds it")
        names = {entry.name for entry in target.iterdir()}
    expected = {f"{table}.parquet" for table in _TABLES}
    if names and ("snapshot_info.parquet" not in names or not names <= expected):
        raise refuse("holds files that are not a snapshot's" if names - expected else
                     "is not a snapshot (no snapshot_info.parquet)")


def _replace(source: Path, target: Path) -> None:
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    os.replace(source, target)


class Snapshot:
    """A memory snapshot opened read-only: the analysis helpers accept it in place of a store.

    Parameters
    ----------
    path : str or path-like
        A result of :func:`export_snapshot`: a ``.duckdb`` file or a folder of Parquet files.

    Raises
    ------
    ValidationError
        Naming ``path``, in one line, when it is opened: nothing there, a name the file
        system cannot use, a file DuckDB cannot open, or what is not a whole snapshot (a
        table or Parquet file missing or unreadable, a column missing or of another type
        than the snapshot schema's, a ``snapshot_info`` without its row). A DuckDB error
        while the snapshot is read later (a file damaged since) is a ``ValidationError``
        naming ``path`` too, and a closed snapshot's a :class:`DatabaseError`.

    Examples
    --------
    >>> export_snapshot(store, "memory.duckdb")                        # doctest: +SKIP
    >>> with Snapshot("memory.duckdb") as snap:                        # doctest: +SKIP
    ...     tag_cooccurrence(snap)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path_text(path, field="path"))
        with examining(self.path, field="path"):  # a name too long, a folder none may list
            is_dir, is_file = self.path.is_dir(), self.path.is_file()
        if not (is_dir or is_file):
            raise ValidationError(f"no snapshot at {self.path}", field="path")
        self._con = _open_folder(self.path) if is_dir else _open_file(self.path)
        try:
            self._con.execute("SET TimeZone = 'UTC'")
            _check_tables(self._con, self.path, in_folder=is_dir)
        except duckdb.Error as exc:
            self._con.close()
            raise ValidationError(f"cannot read the snapshot {self.path}: {one_line(exc)}",
                                  field="path") from None
        except BaseException:
            self._con.close()
            raise

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Turn a DuckDB error while the snapshot is read (a file damaged or removed since
        it was opened, the snapshot closed) into an :class:`HTMError`."""
        try:
            yield
        except duckdb.ConnectionException:
            raise DatabaseError(f"the snapshot {self.path} is closed; open it again with "
                                "Snapshot(path)") from None
        except duckdb.Error as exc:
            raise _duckdb_error(exc, f"cannot read the snapshot {self.path}") from None

    def analytics_frame(self, name: str, params: Mapping[str, Any],
                        dtypes: Mapping[str, Any]) -> pd.DataFrame:
        """Run the analytics query ``name`` on the snapshot; see :mod:`htm_analytics.frames`.
        Raises ``ValidationError`` (``name``) unless ``name`` is one of
        :func:`~htm_analytics.frames.analytics_query_names`."""
        query, bound = to_duckdb_query(load_analytics_query(name), params)
        return self._frame(query, bound, dtypes)

    def analytics_pages(self, name: str, params: Mapping[str, Any],
                        columns: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        """Run the analytics query ``name`` over one range of node ids at a time; see
        :meth:`htm_analytics.frames.MemorySource.analytics_pages`."""
        with self._reading(), self._con.cursor() as cur:
            low, high, nodes = cur.execute(load_analytics_query("node_id_range")).fetchall()[0]
            for page_from, page_to in node_id_pages(low, high, nodes):
                query, bound = to_duckdb_query(load_analytics_query(name), {
                    **params, "page_from": page_from, "page_to": page_to})
                found = cur.execute(query, bound).fetchnumpy()
                yield {column: np.asarray(found[column], dtype=np.int64) for column in columns}

    def _frame(self, query: str, params: Any, dtypes: Mapping[str, Any]) -> pd.DataFrame:
        # fetchnumpy, not df(): DuckDB's pandas path warns under pandas 3.
        with self._reading(), self._con.cursor() as cur:
            columns = cur.execute(query, params).fetchnumpy()
        frame = pd.DataFrame({name: _unmask(values) for name, values in columns.items()})
        return coerce_frame(frame, dtypes)

    @property
    def info(self) -> dict[str, Any]:
        """When and from which (password-masked) database the snapshot was exported."""
        frame = self._frame("SELECT * FROM snapshot_info", None,
                            {"exported_at": "datetime64[us, UTC]"})
        if frame.empty:  # checked when opened: a file replaced since
            raise ValidationError(f"cannot read the snapshot {self.path}: snapshot_info has "
                                  "no row", field="path")
        return {str(key): value for key, value in frame.iloc[0].items()}

    def table_counts(self) -> pd.DataFrame:
        """Rows in each memory table: ``table`` (string), ``rows`` (int64), as the store's."""
        union = " UNION ALL ".join(
            f"SELECT '{t}' AS \"table\", count(*) AS rows, {i} AS position FROM {t}"
            for i, t in enumerate(MEMORY_TABLES))
        return self._frame(f"SELECT \"table\", rows FROM ({union}) ORDER BY position", None,
                           {"table": "string", "rows": "int64"})

    def close(self) -> None:
        """Close the DuckDB connection."""
        self._con.close()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Snapshot({str(self.path)!r})"


def _duckdb_error(exc: duckdb.Error, doing: str) -> HTMError:
    """DuckDB's error ``exc`` while ``doing`` (a snapshot read or written), in one line: a
    :class:`DatabaseError` where DuckDB ran out of memory or was interrupted, else a
    :class:`ValidationError` naming ``path`` (a file damaged, a disk full)."""
    if isinstance(exc, (duckdb.OutOfMemoryException, duckdb.InterruptException)):
        return DatabaseError(f"{doing}: {one_line(exc)}")
    return ValidationError(f"{doing}: {one_line(exc)}", field="path")


def _open_file(path: Path) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:  # not a DuckDB file, a newer one, one another process locks
        raise ValidationError(f"cannot open the snapshot {path}: {one_line(exc)}",
                              field="path") from None


def _open_folder(path: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB of views on the Parquet files of the snapshot folder ``path``."""
    with examining(path, field="path"):
        missing = [f"{t}.parquet" for t in _TABLES if not (path / f"{t}.parquet").is_file()]
    if missing:
        raise ValidationError(f"{path} is not a snapshot: it has no {', '.join(missing)}",
                              field="path")
    con = duckdb.connect(":memory:")
    for table in _TABLES:
        try:
            con.read_parquet(str(path / f"{table}.parquet")).create_view(table)
        except duckdb.Error as exc:  # not a Parquet file, or a damaged one
            con.close()
            raise ValidationError(f"{path} is not a whole snapshot: {table}.parquet cannot "
                                  f"be read: {one_line(exc)}", field="path") from None
    return con


@functools.cache
def _schema() -> dict[str, dict[str, str]]:
    """Each snapshot table's columns and their DuckDB types, as the snapshot schema has
    them."""
    with duckdb.connect() as con:
        _create_tables(con)
        return {table: {row[0]: row[1] for row in con.execute(f"DESCRIBE {table}").fetchall()}
                for table in _TABLES}


def _check_tables(con: duckdb.DuckDBPyConnection, path: Path, *, in_folder: bool) -> None:
    """Refuse (naming ``path``) a snapshot without one of its tables, a table without one
    of its columns or with a column of another type, or a ``snapshot_info`` without its
    row."""
    def name(table: str) -> str:
        return f"{table}.parquet" if in_folder else table

    missing, wrong = [], []
    for table, expected in _schema().items():
        try:
            found = {row[0]: row[1] for row in con.execute(f"DESCRIBE {table}").fetchall()}
        except duckdb.CatalogException:
            missing.append(table)
            continue
        if absent := [column for column in expected if column not in found]:
            wrong.append(f"{name(table)} has no column{'s' if len(absent) > 1 else ''} "
                         f"{', '.join(absent)}")
        wrong.extend(f"column {column} of {name(table)} is {found[column]}, not {kind}"
                     for column, kind in expected.items()
                     if column in found and found[column] != kind)
    if "snapshot_info" in missing:
        raise ValidationError(f"{path} is not a snapshot written by htm-analytics: it has no "
                              f"{', '.join(missing)} table{'s' if len(missing) > 1 else ''}",
                              field="path")
    if missing:
        raise ValidationError(f"{path} is an incomplete snapshot: it has no "
                              f"{', '.join(missing)} table{'s' if len(missing) > 1 else ''}",
                              field="path")
    if wrong:
        raise ValidationError(f"{path} is not a snapshot this release can read: "
                              f"{'; '.join(wrong)}", field="path")
    rows = con.execute("SELECT count(*) FROM snapshot_info").fetchall()[0][0]
    if not rows:
        raise ValidationError(f"{path} is not a whole snapshot: {name('snapshot_info')} has "
                              "no row", field="path")


def _unmask(values: Any) -> Any:
    """DuckDB returns a column with NULLs as a masked array: give pandas ``None`` there."""
    if not isinstance(values, np.ma.MaskedArray):
        return values
    if values.dtype.kind == "M":  # as objects, an infinity would become a bare integer
        times = values.data.copy()
        times[np.ma.getmaskarray(values)] = np.datetime64("NaT")
        return times
    data = values.data.astype(object)
    data[np.ma.getmaskarray(values)] = None
    return data
