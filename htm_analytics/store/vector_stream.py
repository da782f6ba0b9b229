"""Stored vectors streamed out in batches through one binary ``COPY ... TO STDOUT``.

A ground truth or a comparison of every stored vector reads each vector once; fetched row
by row, most of that time is the client building a Python row and a vector object per
memory. The binary COPY format of ``(id bigint, vector)`` rows has a fixed width for one
dimension, so each chunk the server sends is read as a NumPy structured array at once:
memory stays one batch, whatever the table's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ..errors import DatabaseError

__all__ = ["copy_vector_batches", "copy_ids"]

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_TRAILER = b"\xff\xff"


def _row_type(dimension: int | None) -> np.dtype:
    """One binary COPY row of ``(id bigint, vector(dimension))`` (of ``(id bigint)`` for
    None), big-endian as sent."""
    fields: list[Any] = [("fields", ">i2"), ("id_length", ">i4"), ("id", ">i8")]
    if dimension is not None:
        fields += [("vector_length", ">i4"), ("dimension", ">i2"), ("unused", ">i2"),
                   ("vector", ">f4", (dimension,))]
    return np.dtype(fields)


def copy_ids(cur: psycopg.Cursor[Any], query: sql.Composable, params: Any) -> np.ndarray:
    """The int64 ids ``query`` selects (one bigint column, never NULL), in its order, read
    from one binary COPY: 14 bytes a row on the wire, no Python object per row."""
    parts = [rows["id"] for rows in _copy_rows(cur, query, params, None, 1_000_000)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def copy_vector_batches(cur: psycopg.Cursor[Any], query: sql.Composable, params: Any,
                        dimension: int, batch_rows: int
                        ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(ids, vectors)`` of ``query`` (which selects a bigint id and a ``dimension``-d
    vector, never NULL), in batches of ``batch_rows`` rows: int64 ``(n,)`` and float32
    ``(n, dimension)``, in the query's order. ``params`` are bound on the client (COPY takes
    no server-side parameters), as psycopg quotes them."""
    for rows in _copy_rows(cur, query, params, dimension, batch_rows):
        yield rows["id"].astype(np.int64), rows["vector"].astype(np.float32)


def _copy_rows(cur: psycopg.Cursor[Any], query: sql.Composable, params: Any,
               dimension: int | None, batch_rows: int) -> Iterator[np.ndarray]:
    """The rows of ``query`` as structured arrays of :func:`_row_type`, ``batch_rows`` at a
    time, each checked to have that shape."""
    row = _row_type(dimension)
    batch_bytes = batch_rows * row.itemsize
    statement = sql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(query)
    pending = bytearray()
    header_read = False
    with cur.copy(statement, params) as stream:
        for chunk in stream:
            pending += chunk
            if not header_read:
                if len(pending) < 19:
                    continue
                if bytes(pending[:11]) != _SIGNATURE:
                    raise DatabaseError("unexpected COPY stream from the server")
                header = 19 + int.from_bytes(pending[15:19], "big")
                if len(pending) < header:
                    continue
                del pending[:header]
                header_read = True
            while len(pending) >= batch_bytes:
                yield _checked(np.frombuffer(bytes(pending[:batch_bytes]), dtype=row),
                               dimension)
                del pending[:batch_bytes]
    # what is left: the last rows, then the two-byte trailer
    if bytes(pending[-2:]) != _TRAILER or (len(pending) - 2) % row.itemsize:
        raise DatabaseError("the COPY stream ended in the middle of a row")
    if len(pending) > 2:
        yield _checked(np.frombuffer(bytes(pending[:-2]), dtype=row), dimension)


def _checked(rows: np.ndarray, dimension: int | None) -> np.ndarray:
    """``rows``, after checking that each has the fields and lengths of :func:`_row_type`."""
    shaped = np.all(rows["fields"] == (1 if dimension is None else 2)) \
        and np.all(rows["id_length"] == 8)
    if dimension is not None:
        shaped = shaped and np.all(rows["vector_length"] == 4 + 4 * dimension) \
            and np.all(rows["dimension"] == dimension)
    if not shaped:
        what = "bigint" if dimension is None else f"bigint, vector({dimension})"
        raise DatabaseError(f"a streamed row is not ({what})")
    return rows
