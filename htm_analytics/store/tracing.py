"""Every statement the store runs, traceable: a ``tracer`` callback and a debug log.

``LongTermMemory(tracer=print)`` (as sqlite-utils' ``Database(tracer=...)``) calls the tracer
with each statement's SQL text, its parameters and the seconds it took. Independently, the
logger ``htm_analytics.sql`` gets one DEBUG record per statement with its duration and the
parameters *masked* (their types and sizes, never their values), so a notebook user can see
what a helper ran without memory contents or vectors landing in a log file::

    import logging
    logging.basicConfig()
    logging.getLogger("htm_analytics.sql").setLevel(logging.DEBUG)

The statements of the toolkit's own analyses carry :data:`STATEMENT_MARKER` after their first
word (a leading comment would not do: ``pg_stat_statements`` keeps a statement's text from
its first token), and its named cursors' names begin with :data:`CURSOR_PREFIX`, so that the
advisor can tell them from the application's statements. The memory operations an agent runs
(remember, search, tag, forget) are left unmarked: they are the application's.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["Tracer", "SQL_LOGGER", "STATEMENT_MARKER", "CURSOR_PREFIX", "mask_parameters",
           "marked_statement", "tracing_cursor_classes"]

Tracer = Callable[[str, Any, float], object]
"""``tracer(sql_text, params, seconds)``: called after each statement (also when it failed)."""

SQL_LOGGER = logging.getLogger("htm_analytics.sql")

STATEMENT_MARKER = "/* htm_analytics */"
"""The comment in each statement of the toolkit's own analyses, as pg_stat_statements keeps it."""

CURSOR_PREFIX = "htm_analytics_"
"""The start of its named cursors' names (pg_stat_statements keeps ``FETCH ... FROM name``)."""

# Leading white space and comments, then the first word, after which the marker goes.
_FIRST_WORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*[A-Za-z_]+", re.DOTALL)


def marked_statement(text: str) -> str:
    """``text`` with :data:`STATEMENT_MARKER` after its first word (unchanged without one)."""
    match = _FIRST_WORD.match(text)
    if match is None:
        return text
    return f"{text[:match.end()]} {STATEMENT_MARKER}{text[match.end():]}"


def _describe(value: Any) -> str:
    """A value's type and size, never its content."""
    if value is None or isinstance(value, bool):
        return repr(value)
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"<{type(value).__name__} {'x'.join(str(s) for s in shape)}>"
    if isinstance(value, (str, bytes)):
        return f"<{type(value).__name__} {len(value)}>"
    if isinstance(value, (list, tuple)):
        return f"<{type(value).__name__} of {len(value)}>"
    return f"<{type(value).__name__}>"


def mask_parameters(params: Any) -> Any:
    """Parameters with every value replaced by its type and size (for logs)."""
    if params is None:
        return None
    if isinstance(params, Mapping):
        return {key: _describe(value) for key, value in params.items()}
    if isinstance(params, Sequence) and not isinstance(params, (str, bytes)):
        return [_describe(value) for value in params]
    return _describe(params)


def _statement_text(query: Any, context: Any) -> str:
    if isinstance(query, sql.Composable):
        return query.as_string(context)
    if isinstance(query, bytes):
        return query.decode("utf-8", "replace")
    return str(query)


def _report(tracer: Tracer | None, cursor: Any, query: Any, params: Any,
            seconds: float) -> None:
    log = SQL_LOGGER.isEnabledFor(logging.DEBUG)
    if tracer is None and not log:
        return
    text = _statement_text(query, cursor)
    if log:
        SQL_LOGGER.debug("%.2f ms: %s; params=%s", seconds * 1000, " ".join(text.split()),
                         mask_parameters(params))
    if tracer is not None:
        tracer(text, params, seconds)


class _TracedExecute:
    """``execute`` reported to the tracer and the log (for client and server cursors), its
    statement marked as the toolkit's own while ``marked``."""

    tracer: Tracer | None = None
    marked = False

    def _marked(self, query: Any) -> Any:
        if not self.marked or not isinstance(query, (str, sql.Composable)):
            return query
        return marked_statement(_statement_text(query, self))

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        query = self._marked(query)
        started = time.perf_counter()
        try:
            return super().execute(query, params, **kwargs)  # type: ignore[misc]
        finally:
            _report(self.tracer, self, query, params, time.perf_counter() - started)


class _TracingCursor(_TracedExecute, psycopg.Cursor[Any]):
    """A cursor reporting each ``execute``, ``executemany`` and ``copy`` it runs.

    In pipeline mode a statement is only queued by ``execute``, so its reported time is the
    queueing, not the server's work.
    """

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        query = self._marked(query)
        started = time.perf_counter()
        try:
            super().executemany(query, params_seq, **kwargs)
        finally:
            _report(self.tracer, self, query, "<many>", time.perf_counter() - started)

    @contextmanager
    def copy(self, statement: Any, params: Any = None, **kwargs: Any) -> Iterator[Any]:
        statement = self._marked(statement)
        started = time.perf_counter()
        try:
            with super().copy(statement, params, **kwargs) as copy:
                yield copy
        finally:
            _report(self.tracer, self, statement, params, time.perf_counter() - started)


class _TracingServerCursor(_TracedExecute, psycopg.ServerCursor[Any]):
    """A named (server-side) cursor reporting its query once, when it is declared: its rows
    come later, a batch per ``fetchmany``, so the time reported is the declaration's.

    Its name begins with :data:`CURSOR_PREFIX` while ``marked``: psycopg fetches and closes
    it by name."""

    def __init__(self, connection: Any, name: str, *args: Any, **kwargs: Any) -> None:
        if self.marked and not name.startswith(CURSOR_PREFIX):
            name = CURSOR_PREFIX + name
        super().__init__(connection, name, *args, **kwargs)


def tracing_cursor_classes(tracer: Tracer | None, *, marked: bool) -> tuple[
        type[psycopg.Cursor[Any]], type[psycopg.ServerCursor[Any]]]:
    """The cursor classes of a store's connections, reporting to ``tracer``: its cursors'
    (``connection.cursor_factory``) and its named cursors' (``server_cursor_factory``),
    marking their statements when ``marked`` (a cursor's own ``marked`` may differ)."""
    bound = {"tracer": staticmethod(tracer) if tracer else None, "marked": marked}
    return (type("TracingCursor", (_TracingCursor,), bound),
            type("TracingServerCursor", (_TracingServerCursor,), bound))
