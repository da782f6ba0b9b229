"""Pieces shared by the store's modules: column lists, bound timeframes, index builds."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any, Literal

import numpy as np
import psycopg
from psycopg import sql

from ..errors import ValidationError
from ..validation import validate_embedding_model

__all__ = [
    "Statement", "StoredModel", "MAX_LIMIT", "VECTOR_BM25_DEPTH", "TIMEFRAME", "Timeframe",
    "TextMatch",
    "NODE_COLUMN_NAMES", "NODE_COLUMNS",
    "SEARCH_COLUMNS", "LOG_EVENTS", "EVENT_KINDS",
    "content_hash", "bind_timeframe", "to_numpy", "embedding_model_names",
    "lift_statement_timeout", "create_index", "content_too_large",
    "quote_identifier", "quote_literal",
]

MAX_LIMIT = 1000

VECTOR_BM25_DEPTH = 100
"""Vector candidates of ``search_vector_bm25``, the default recall (docs/retrieval.md)."""

Statement = str | bytes | sql.SQL | sql.Composed
"""What a cursor executes: SQL text or a statement composed with :mod:`psycopg.sql`."""

StoredModel = tuple[Any, Any, int, int]
"""``(provider, model, dimension, nodes)`` of the stored vectors (provider None: unnamed)."""

Timeframe = tuple[dt.datetime | dt.date, dt.datetime | dt.date] | None
TextMatch = Literal["all", "any", "websearch"]

NODE_COLUMN_NAMES = ("id", "content", "content_hash", "access_count", "created_at",
                     "updated_at", "last_accessed", "token_count", "in_working_memory",
                     "embedding_dimension")
NODE_COLUMNS = ", ".join(NODE_COLUMN_NAMES)

SEARCH_COLUMNS = "n.id, n.content, n.access_count, n.created_at, n.token_count"

TIMEFRAME = " AND n.created_at BETWEEN %(start)s AND %(end)s"
"""The condition a timeframe adds to a statement on ``nodes n`` (see :func:`bind_timeframe`)."""

EVENT_KINDS = ("remember", "retrieve", "recall", "evict", "delete", "restore", "purge")
"""The kinds of ``memory_events`` rows: its check constraint (sql/010_forget_restore_purge.sql;
before migration 10, without ``restore`` and ``purge``)."""

LOG_EVENTS = """
INSERT INTO memory_events (kind, robot_id, node_id)
SELECT %(kind)s, %(robot_id)s, unnest(%(node_ids)s::bigint[])"""


def content_hash(content: str) -> str:
    """SHA-256 hex digest of ``content`` (UTF-8), the key of content deduplication.

    Raises :class:`~htm_analytics.ValidationError` (``content``) for a non-string or a text
    with a lone surrogate, which has no UTF-8.
    """
    if not isinstance(content, str):
        raise ValidationError(f"must be a string, got {type(content).__name__}", field="content")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"contains a lone surrogate (at {exc.start}), which is not valid "
                              "UTF-8", field="content") from None
    return hashlib.sha256(data).hexdigest()


def bind_timeframe(params: dict[str, Any],
                   frame: tuple[dt.datetime, dt.datetime] | None) -> str:
    """Add the timeframe's bounds to ``params``; return the SQL condition ('' for none)."""
    if frame is None:
        return ""
    params["start"], params["end"] = frame
    return TIMEFRAME


def to_numpy(value: Any) -> np.ndarray:
    """pgvector's loader returns an ndarray (<0.5) or a ``Vector`` (>=0.5): give float32."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def embedding_model_names(value: Any) -> tuple[str | None, str | None]:
    """Validate an ``embedding_model=(provider, model)`` argument."""
    names = validate_embedding_model(value, field="embedding_model")
    return (None, None) if names is None else names


# The session's statement_timeout (query_timeout) becomes the transaction's lock_timeout,
# unless the session already has a shorter one; both settings are read in milliseconds.
_LIFT_STATEMENT_TIMEOUT = """
SELECT set_config('lock_timeout', coalesce(least(nullif(l.setting::bigint, 0),
                                                 nullif(s.setting::bigint, 0))::text, '0'),
                  true),
       set_config('statement_timeout', '0', true)
FROM pg_settings l, pg_settings s
WHERE l.name = 'lock_timeout' AND s.name = 'statement_timeout'"""


def lift_statement_timeout(cur: psycopg.Cursor[Any]) -> None:
    """Lift ``query_timeout`` for the rest of ``cur``'s transaction, except for lock waits.

    Bulk loads and index builds are maintenance, not queries: their work may take longer
    than ``query_timeout``. Waiting for another session's lock (an open transaction holding
    ``nodes``) is not their work, and without a bound a load would wait for ever behind it:
    such a wait still ends after ``query_timeout`` (SQLSTATE 55P03, a ``QueryTimeoutError``).
    """
    cur.execute(_LIFT_STATEMENT_TIMEOUT)


def create_index(cur: psycopg.Cursor[Any], statement: Statement) -> None:
    """Run one CREATE INDEX with as many parallel workers as the server allows.

    PostgreSQL sizes build workers by the table's heap, but padded vectors live in TOAST, so
    the heap of ``nodes`` looks small and HNSW builds get no worker below ~15k rows and fewer
    than allowed below ~45k (pgvector#397). Lifting ``min_parallel_table_scan_size`` for
    this transaction leaves the choice to ``max_parallel_maintenance_workers``. A parallel
    HNSW build keeps its graph in shared memory of ``maintenance_work_mem`` bytes; where the
    server cannot have that (a small ``/dev/shm``, as in Docker) the build is repeated
    serially instead of failing.
    """
    cur.execute("SELECT set_config('min_parallel_table_scan_size', '0', true)")
    try:
        with cur.connection.transaction():  # a savepoint: a failed build leaves the rest
            cur.execute(statement)
    except (psycopg.errors.DiskFull, psycopg.errors.OutOfMemory):
        cur.execute("SELECT set_config('max_parallel_maintenance_workers', '0', true)")
        cur.execute(statement)


def _has_control(text: str) -> bool:
    return any(ord(ch) < 32 or ch == "\x7f" for ch in text)


def quote_identifier(*parts: str) -> str:
    """A quoted, schema-qualified name, for statements handed to the user to read and run,
    on one line.

    A name may hold a line break: quoted as it is, ``;`` and a line break in it would read
    as the end of a statement (a table named ``"x;<line break>DROP TABLE nodes;"`` would
    split a suggested ``VACUUM`` in two, the second a ``DROP``). A name with a control
    character is written ``U&"..."``, that character escaped.
    """
    def one(part: str) -> str:
        if not _has_control(part):
            return sql.Identifier(part).as_string(None)
        body = "".join("\\\\" if ch == "\\" else '""' if ch == '"' else
                       f"\\{ord(ch):04X}" if _has_control(ch) else ch for ch in part)
        return f'U&"{body}"'
    return ".".join(one(part) for part in parts)


def quote_literal(value: Any) -> str:
    """A value as an SQL literal, for statements handed to the user to read and run, on one
    line likewise (a string with a control character as ``E'...'``, escaped)."""
    if isinstance(value, str) and _has_control(value):
        body = "".join("\\\\" if ch == "\\" else "''" if ch == "'" else
                       f"\\u{ord(ch):04X}" if _has_control(ch) else ch for ch in value)
        return f"E'{body}'"
    return sql.Literal(value).as_string(None).strip()  # a backslash gives " E'...'"


def content_too_large(exc: psycopg.Error, field: str) -> ValidationError:
    """The server's "string is too long for tsvector" as the rejection of the content.

    The seed schema's full-text index holds at most 1 MiB of lexemes; text whose letters grow
    when lowercased (Ⱥ is 2 bytes, ⱥ is 3) can pass the 1,000,000-byte limit and still not
    fit. The transaction is rolled back, so nothing is written.
    """
    return ValidationError(f"cannot be indexed for full-text search: {exc}", field=field)
