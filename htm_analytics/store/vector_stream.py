"""Stored vectors streamed out in pages through binary ``COPY ... TO STDOUT``.

A ground truth or a comparison of every stored vector reads each vector once; fetched row
by row, most of that time is the client building a Python row and a vector object per
memory. The binary COPY format of ``(id bigint, vector)`` rows has a fixed width for one
dimension, so a page the server sends is read as a NumPy structured array at once. Pages
follow each other by id (keyset), each its own statement, so ``statement_timeout`` applies
to a page, as it does to a cursor's fetches, and never to the work the caller does between
pages; one repeatable-read snapshot makes the pages one consistent picture.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import pq, sql
from psycopg.adapt import Buffer, Loader

from ..errors import DatabaseError

__all__ = ["copy_vector_batches", "copy_ids", "fetch_bigint_columns", "one_snapshot",
           "raw_vectors", "decode_vectors"]

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_TRAILER = b"\xff\xff"
_IDS_PER_PAGE = 1_000_000


def one_snapshot(cur: psycopg.Cursor[Any]) -> None:
    """Make the statements of ``cur``'s transaction read one snapshot (REPEATABLE READ, set
    before its first statement; inside a transaction already under way, that one's)."""
    if cur.connection.info.transaction_status == pq.TransactionStatus.IDLE:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def _vector_fields(dimension: int) -> list[Any]:
    """pgvector's binary value of ``vector(dimension)``: an int16 dimension, an unused int16,
    then big-endian float4s."""
    return [("dimension", ">i2"), ("unused", ">i2"), ("vector", ">f4", (dimension,))]


def _row_type(dimension: int | None) -> np.dtype:
    """One binary COPY row of ``(id bigint, vector(dimension))`` (of ``(id bigint)`` for
    None), big-endian as sent."""
    fields: list[Any] = [("fields", ">i2"), ("id_length", ">i4"), ("id", ">i8")]
    if dimension is not None:
        fields += [("vector_length", ">i4"), *_vector_fields(dimension)]
    return np.dtype(fields)


def copy_ids(cur: psycopg.Cursor[Any], query: sql.Composable, params: Any) -> np.ndarray:
    """The int64 ids ``query`` selects (one bigint column named ``id``, never NULL), in
    ascending order: 14 bytes a row on the wire, no Python object per row."""
    parts = [rows["id"] for rows in _pages(cur, query, params, None, _IDS_PER_PAGE)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def copy_vector_batches(cur: psycopg.Cursor[Any], query: sql.Composable, params: Any,
                        dimension: int, batch_rows: int
                        ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(ids, vectors)`` of ``query`` (which selects a bigint ``id`` and a ``dimension``-d
    vector, never NULL), ``batch_rows`` rows a page, by ascending id: int64 ``(n,)`` and
    float32 ``(n, dimension)``. ``params`` are bound on the client (COPY takes no
    server-side parameters), as psycopg quotes them. Call :func:`one_snapshot` first for
    pages of one picture."""
    for rows in _pages(cur, query, params, dimension, batch_rows):
        yield rows["id"].astype(np.int64), rows["vector"].astype(np.float32)


def _pages(cur: psycopg.Cursor[Any], query: sql.Composable, params: Any,
           dimension: int | None, page_rows: int) -> Iterator[np.ndarray]:
    """The rows of ``query`` as structured arrays of :func:`_row_type`, ``page_rows`` at a
    time, one COPY each, after the last id of the page before."""
    page = sql.SQL("COPY (SELECT * FROM ({}) page WHERE page.id > %(htm_after)s "
                   "ORDER BY page.id LIMIT {}) TO STDOUT (FORMAT BINARY)").format(
        query, sql.Literal(page_rows))
    after = -(2**63)
    while True:
        rows = _copied(cur, page, {**(params or {}), "htm_after": after}, dimension)
        if len(rows):
            yield rows
        if len(rows) < page_rows:
            return
        after = int(rows["id"][-1])


def _copy_body(cur: psycopg.Cursor[Any], statement: sql.Composed, params: Any,
               row: np.dtype) -> np.ndarray:
    """The rows of one binary COPY as a structured array of ``row`` (fields as sent)."""
    with cur.copy(statement, params) as stream:
        data = b"".join(bytes(chunk) for chunk in stream)
    if data[:11] != _SIGNATURE:
        raise DatabaseError("unexpected COPY stream from the server")
    body = data[19 + int.from_bytes(data[15:19], "big"):]
    if body[-2:] != _TRAILER or (len(body) - 2) % row.itemsize:
        raise DatabaseError("the COPY stream ended in the middle of a row")
    return np.frombuffer(body[:-2], dtype=row)


def fetch_bigint_columns(cur: psycopg.Cursor[Any], query: sql.Composable, params: Any,
                         columns: Sequence[str]) -> dict[str, np.ndarray]:
    """The rows of ``query``, whose columns are ``columns``, each a bigint never NULL: an
    int64 array per column, rows in no particular order.

    The server packs the rows into a few ``bytea`` values of big-endian int8s, one per 4,096
    values of the first column. A binary COPY sends each row as its own message, and for rows
    of two bigints the client's work per message was most of the time (4.7 s against 1.0 s
    for 4.5 million rows here). A row with a NULL is refused, never dropped silently.
    """
    packed = sql.SQL(" || ").join(
        sql.SQL("int8send({})").format(sql.Identifier(column)) for column in columns)
    statement = sql.SQL("SELECT count(*) AS n, string_agg({}, ''::bytea) AS packed "
                        "FROM ({}) AS r GROUP BY {} >> 12").format(
        packed, query, sql.Identifier(columns[0]))
    with cur.connection.cursor(binary=True) as binary:
        groups = binary.execute(statement, params).fetchall()
    data = b"".join(bytes(packed or b"") for _, packed in groups)
    width = 8 * len(columns)
    if len(data) != width * sum(n for n, _ in groups):
        raise DatabaseError(f"a fetched row is not ({', '.join(['bigint'] * len(columns))})")
    values = np.frombuffer(data, dtype=">i8").reshape(-1, len(columns)).astype(np.int64)
    return {column: values[:, n] for n, column in enumerate(columns)}


def _copied(cur: psycopg.Cursor[Any], statement: sql.Composed, params: Any,
            dimension: int | None) -> np.ndarray:
    """The rows of one binary COPY, checked to have the fields and lengths of
    :func:`_row_type`."""
    rows = _copy_body(cur, statement, params, _row_type(dimension))
    shaped = np.all(rows["fields"] == (1 if dimension is None else 2)) \
        and np.all(rows["id_length"] == 8)
    if dimension is not None:
        shaped = shaped and np.all(rows["vector_length"] == 4 + 4 * dimension) \
            and np.all(rows["dimension"] == dimension)
    if not shaped:
        what = "bigint" if dimension is None else f"bigint, vector({dimension})"
        raise DatabaseError(f"a streamed row is not ({what})")
    return rows


class _RawVectorLoader(Loader):
    """A pgvector value as the bytes the server sent, for :func:`decode_vectors`."""

    format = pq.Format.BINARY

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


def raw_vectors(cur: psycopg.Cursor[Any]) -> None:
    """Make ``cur`` (binary) return ``vector`` values as their bytes: decoding a page of them
    at once with :func:`decode_vectors` spares an object per row."""
    cur.adapters.register_loader("vector", _RawVectorLoader)


def decode_vectors(values: Sequence[bytes | None]) -> list[np.ndarray | None]:
    """float32 arrays from pgvector's binary values (:func:`_vector_fields`), one NumPy
    conversion per distinct length; None stays None."""
    decoded: list[np.ndarray | None] = [None] * len(values)
    rows_by_length: dict[int, list[int]] = {}
    for row, value in enumerate(values):
        if value is not None:
            rows_by_length.setdefault(len(value), []).append(row)
    for length, rows in rows_by_length.items():
        layout = np.dtype(_vector_fields((length - 4) // 4))
        read = np.frombuffer(b"".join(values[row] for row in rows),  # type: ignore[misc]
                             dtype=layout)
        for row, vector in zip(rows, read["vector"].astype(np.float32)):
            decoded[row] = vector
    return decoded
