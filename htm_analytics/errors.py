"""Typed errors raised by htm_analytics.

Every error derives from :class:`HTMError`. The store wraps driver errors by SQLSTATE
(:func:`htm_analytics.store.translate_database_error`), so callers never need to import
psycopg to handle them.
"""

from __future__ import annotations

__all__ = [
    "HTMError",
    "ValidationError",
    "BenchmarkFormatError",
    "NotFoundError",
    "HistoryVersionError",
    "NotAHistoryError",
    "DatabaseError",
    "ConcurrencyError",
    "DatabaseConnectionError",
    "QueryTimeoutError",
    "SchemaError",
    "NoSoftDeleteError",
    "EmbeddingError",
    "EmbeddingMismatchError",
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


class NoSoftDeleteError(SchemaError):
    """The schema has no soft delete (no ``nodes.deleted_at``: the seed-era HTM schema and
    this toolkit's own): forgetting deletes permanently, and nothing can be restored or
    purged."""


class EmbeddingError(HTMError):
    """An embedding provider failed, or its vectors do not fit the stored vectors."""


class EmbeddingMismatchError(EmbeddingError, ValidationError):
    """A vector, or an embedding service's model, that cannot be compared with the stored
    vectors (another dimension or model): bad input, so a :class:`ValidationError` naming the
    argument, and an :class:`EmbeddingError` as such mismatches always were."""


for _cls in (
    HTMError,
    ValidationError,
    NotFoundError,
    DatabaseError,
    ConcurrencyError,
    DatabaseConnectionError,
    QueryTimeoutError,
    SchemaError,
    NoSoftDeleteError,
    EmbeddingError,
    EmbeddingMismatchError,
):
    _cls.__module__ = "htm_analytics"


class HistoryVersionError(HTMError):
    """A history file of a version this release cannot read (written by a newer one), or no
    history file at all."""


class NotAHistoryError(HistoryVersionError, ValidationError):
    """What was given as a history is not one this release can read: no history at all, a
    file or folder that cannot be opened or read as one, a history missing one of its
    tables, or one whose ``schema_version`` is not a version. A
    :class:`HistoryVersionError`, as these always were, and a :class:`ValidationError`
    naming the field ``history``, as the places ``collect`` cannot write are."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="history")


for _history_error in (HistoryVersionError, NotAHistoryError):
    _history_error.__module__ = "htm_analytics"
