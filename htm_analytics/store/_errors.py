"""Driver errors as the ``HTMError`` tree, by SQLSTATE."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors

from ..errors import (
    DatabaseConnectionError,
    DatabaseError,
    HTMError,
    QueryTimeoutError,
    SchemaError,
)
from .connection import mask_secrets, mask_url

__all__ = ["one_line", "translate_database_error"]


def translate_database_error(exc: psycopg.Error, *, url: str | None = None,
                             query_timeout: float | None = None,
                             source: str | None = None) -> HTMError:
    """Map a psycopg error to the htm_analytics error of its SQLSTATE class.

    Parameters
    ----------
    exc : psycopg.Error
        The driver error.
    url : str, optional
        The connection URL, quoted (its password masked) in connection errors.
    query_timeout : float, optional
        The store's ``query_timeout`` (ms), quoted when a statement ran past it.
    source : str, optional
        The system whose database ``url`` is, when it is not a memory store (a peer's, read
        to be imported or analysed): its hints are not the store's.

    Returns
    -------
    HTMError
        The error to raise ``from exc``.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    message = str(exc).strip() or type(exc).__name__
    if url:
        message, url = mask_secrets(message, url), mask_url(url)
    result: HTMError
    store_limit = None if query_timeout is None else \
        f"the store's query_timeout of {query_timeout / 1000:g} s"
    if isinstance(exc, pg_errors.QueryCanceled):
        limit = store_limit or "the statement timeout"
        result = QueryTimeoutError(
            f"query cancelled after exceeding {limit}: {message} (give statements longer "
            "with LongTermMemory(query_timeout=MILLISECONDS), htm-analytics --query-timeout "
            "SECONDS or HTM_QUERY_TIMEOUT; a check of every memory can take a sample "
            "instead)"
        )
    elif isinstance(exc, pg_errors.LockNotAvailable):
        # lock_timeout: a bulk load or index build waited for another session's lock.
        result = QueryTimeoutError(
            f"gave up waiting after {store_limit or 'the lock timeout'} for a lock another "
            f"session holds: {message} "
            "(nothing was written; look for long or idle-in-transaction sessions in "
            "pg_stat_activity, or give the wait longer with "
            "LongTermMemory(query_timeout=MILLISECONDS))"
        )
    elif isinstance(exc, (pg_errors.UndefinedTable, pg_errors.UndefinedFunction,
                          pg_errors.UndefinedObject, pg_errors.UndefinedColumn)):
        result = SchemaError(
            f"{message} (is it {source}'s database?)" if source else
            f"{message} (is the schema installed? run `htm-analytics init-db`)"
        )
    elif isinstance(exc, psycopg.OperationalError) and (
        sqlstate is None or sqlstate.startswith(("08", "57P"))
    ):
        where = f" to {url}" if url else ""
        result = DatabaseConnectionError(
            f"could not talk{where}: {message}. Check that the server is running and the URL "
            "is right" + ("." if source else ", or unset HTM_DBURL, HTM_DATABASE__URL and "
                          "DATABASE_URL to use the embedded server.")
        )
    elif "conflict with recovery" in message:
        # A hot standby cancels reads whose snapshot the primary's cleanup is about to
        # remove, after max_standby_streaming_delay (30 s by default).
        result = DatabaseError(
            f"{message} (the standby cancelled this read to replay the primary's changes: for "
            "long analyses on a standby set hot_standby_feedback = on there, or raise its "
            "max_standby_streaming_delay)")
    else:
        result = DatabaseError(message)
    if isinstance(result, DatabaseError):
        result.sqlstate = sqlstate
    return result


def one_line(exc: BaseException) -> str:
    """A driver's message without the lines after its first (DuckDB and PostgreSQL quote
    the statement there, ``LINE 1: ...``): the CLI prints one line."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0].strip()
