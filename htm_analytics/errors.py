"""Typed errors raised by htm_analytics.

Every error derives from :class:`HTMError`. Driver errors are wrapped by SQLSTATE in
:func:`translate_database_error`, so callers never need to import psycopg to handle them.
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors

__all__ = [
    "HTMError",
    "ValidationError",
    "BenchmarkFormatError",
    "NotFoundError",
    "DatabaseError",
    "ConcurrencyError",
    "DatabaseConnectionError",
    "QueryTimeoutError",
    "SchemaError",
    "EmbeddingError",
    "translate_database_error",
]


class HTMError(Exception):
    """Base class of every error raised by htm_analytics."""


class ValidationError(HTMError, ValueError):
    """Bad input, rejected before anything was written.

    Attributes
    ----------
    field : str or None
        The argument or field that was rejected.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class BenchmarkFormatError(ValidationError):
    """A benchmark file (LoCoMo, LongMemEval, JSON Lines of turns and questions) that cannot
    be read; nothing was written.

    Attributes
    ----------
    path : str
        The file.
    record : str or None
        The record at fault: a sample, session, question or line.
    """

    def __init__(self, message: str, *, path: str, record: str | None = None) -> None:
        self.path = path
        self.record = record
        super().__init__(message, field="source")


class NotFoundError(HTMError, LookupError):
    """A node, robot or other record does not exist."""


class DatabaseError(HTMError):
    """The database refused or failed an operation."""

    sqlstate: str | None = None


class ConcurrencyError(DatabaseError):
    """A concurrent change (another session deleting the same node) kept an operation from
    completing after it was retried; nothing was written, and calling again may succeed."""


class DatabaseConnectionError(DatabaseError, ConnectionError):
    """The database could not be reached."""


class QueryTimeoutError(DatabaseError, TimeoutError):
    """A statement ran past ``query_timeout`` (PostgreSQL ``statement_timeout``)."""


class SchemaError(DatabaseError):
    """The database lacks an extension, table or migration that the store needs."""


class EmbeddingError(HTMError):
    """An embedding provider failed, or its vectors do not fit the stored vectors."""


for _cls in (
    HTMError,
    ValidationError,
    NotFoundError,
    DatabaseError,
    ConcurrencyError,
    DatabaseConnectionError,
    QueryTimeoutError,
    SchemaError,
    EmbeddingError,
):
    _cls.__module__ = "htm_analytics"


def translate_database_error(exc: psycopg.Error, *, url: str | None = None) -> HTMError:
    """Map a psycopg error to the htm_analytics error of its SQLSTATE class.

    Parameters
    ----------
    exc : psycopg.Error
        The driver error.
    url : str, optional
        The masked connection URL, quoted in connection errors.

    Returns
    -------
    HTMError
        The error to raise ``from exc``.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    message = str(exc).strip() or type(exc).__name__
    result: HTMError
    if isinstance(exc, pg_errors.QueryCanceled):
        result = QueryTimeoutError(
            f"query cancelled after exceeding the statement timeout: {message}"
        )
    elif isinstance(exc, (pg_errors.UndefinedTable, pg_errors.UndefinedFunction,
                          pg_errors.UndefinedObject, pg_errors.UndefinedColumn)):
        result = SchemaError(
            f"{message} (is the schema installed? run `htm-analytics init-db`)"
        )
    elif isinstance(exc, psycopg.OperationalError) and (
        sqlstate is None or sqlstate.startswith(("08", "57P"))
    ):
        where = f" to {url}" if url else ""
        result = DatabaseConnectionError(
            f"could not talk{where}: {message}. Check that the server is running and the URL "
            "is right, or unset HTM_DBURL, HTM_DATABASE__URL and DATABASE_URL to use the "
            "embedded server."
        )
    else:
        result = DatabaseError(message)
    if isinstance(result, DatabaseError):
        result.sqlstate = sqlstate
    return result
