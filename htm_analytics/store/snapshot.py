"""Offline snapshots of a memory database in DuckDB, answering the analysis helpers without
PostgreSQL."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from .._sql import read_sql
from ..errors import ValidationError
from ..frames import (
    TIME_INFINITY,
    TIME_MINUS_INFINITY,
    coerce_frame,
    load_analytics_query,
    node_id_pages,
    to_duckdb_query,
)
from .catalog import MEMORY_TABLES
from .file_paths import path_text, writing
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
    """
    store = live_store(store)
    target = Path(path_text(path, field="path"))
    as_database = target.suffix in (".duckdb", ".db")
    if target.exists() and not overwrite:
        raise ValidationError(f"{target} exists; pass overwrite=True to replace it", field="path")
    if target.exists():
        _check_replaceable(target, as_database)
    with writing(target.parent, field="path"):
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
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
        with writing(target, field="path"):
            if as_database:
                _replace(database, target)
            else:
                database.unlink(missing_ok=True)
                _replace(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _with_duckdb_infinities(chunk: pd.DataFrame) -> None:
    """PostgreSQL's infinite timestamps, which the store reads as Python's extreme datetimes
    (store.timestamps), written as DuckDB's infinities, as the packed links keep them."""
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
        if not target.is_file():
            raise refuse("is not a file")
        try:
            with duckdb.connect(str(target), read_only=True) as con:
                con.execute("SELECT count(*) FROM snapshot_info").fetchone()
        except duckdb.Error:
            raise refuse("is not a snapshot (no snapshot_info table)") from None
        return
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

    Examples
    --------
    >>> export_snapshot(store, "memory.duckdb")                        # doctest: +SKIP
    >>> with Snapshot("memory.duckdb") as snap:                        # doctest: +SKIP
    ...     tag_cooccurrence(snap)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path_text(path, field="path"))
        if self.path.is_dir():
            missing = [t for t in _TABLES if not (self.path / f"{t}.parquet").exists()]
            if missing:
                raise ValidationError(f"{self.path} is not a snapshot: no {missing[0]}.parquet",
                                      field="path")
            self._con = duckdb.connect(":memory:")
            for table in _TABLES:
                self._con.read_parquet(str(self.path / f"{table}.parquet")).create_view(table)
        elif self.path.is_file():
            try:
                self._con = duckdb.connect(str(self.path), read_only=True)
            except duckdb.Error as exc:
                raise ValidationError(f"{self.path} is not a DuckDB snapshot: {exc}",
                                      field="path") from exc
        else:
            raise ValidationError(f"no snapshot at {self.path}", field="path")
        self._con.execute("SET TimeZone = 'UTC'")

    def analytics_frame(self, name: str, params: Mapping[str, Any],
                        dtypes: Mapping[str, Any]) -> pd.DataFrame:
        """Run the analytics query ``name`` on the snapshot; see :mod:`htm_analytics.frames`."""
        query, bound = to_duckdb_query(load_analytics_query(name), params)
        return self._frame(query, bound, dtypes)

    def analytics_pages(self, name: str, params: Mapping[str, Any],
                        columns: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        """Run the analytics query ``name`` over one range of node ids at a time; see
        :meth:`htm_analytics.frames.MemorySource.analytics_pages`."""
        with self._con.cursor() as cur:
            low, high, nodes = cur.execute(load_analytics_query("node_id_range")).fetchall()[0]
            for page_from, page_to in node_id_pages(low, high, nodes):
                query, bound = to_duckdb_query(load_analytics_query(name), {
                    **params, "page_from": page_from, "page_to": page_to})
                found = cur.execute(query, bound).fetchnumpy()
                yield {column: np.asarray(found[column], dtype=np.int64) for column in columns}

    def _frame(self, query: str, params: Any, dtypes: Mapping[str, Any]) -> pd.DataFrame:
        # fetchnumpy, not df(): DuckDB's pandas path warns under pandas 3.
        with self._con.cursor() as cur:
            columns = cur.execute(query, params).fetchnumpy()
        frame = pd.DataFrame({name: _unmask(values) for name, values in columns.items()})
        return coerce_frame(frame, dtypes)

    @property
    def info(self) -> dict[str, Any]:
        """When and from which (password-masked) database the snapshot was exported."""
        frame = self._frame("SELECT * FROM snapshot_info", None,
                            {"exported_at": "datetime64[us, UTC]"})
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
