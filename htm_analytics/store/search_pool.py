"""Search connections: a pool whose sessions are set up for HNSW searches.

A vector search needs ``hnsw.ef_search`` and ``enable_seqscan = off`` (the planner
under-costs scans of TOASTed vectors). Setting them per search costs a transaction and a
statement around every query; setting them on the session of a shared connection would leak
them into whatever that connection runs next. So searches get connections of their own: a
second pool, opened at the first search, whose connections run in autocommit with these
settings at the session level and are used for nothing but searches.

Each connection remembers the ``ef_search`` its session has. A search at that depth is one
prepared statement, as raw SQL on a dedicated connection would be; a search at another depth
changes the session's setting first, in pipeline mode, and the next search at that depth
runs alone again. Sessions start at :data:`SESSION_EF_SEARCH`, the depth of the
default recall (``search_vector_bm25``); a plain vector search runs at
:data:`DEFAULT_EF_SEARCH` (or its ``limit``). The iterative scan of a filtered search is set
for one transaction only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from ..errors import DatabaseConnectionError, DatabaseError
from ._common import VECTOR_BM25_DEPTH

__all__ = ["DEFAULT_EF_SEARCH", "IDLE_CHECK_SECONDS", "SESSION_EF_SEARCH", "SearchConnections",
           "idle_check_hooks", "returning"]

DEFAULT_EF_SEARCH = 40
"""``hnsw.ef_search`` of a plain vector search (pgvector's default); a larger ``limit`` raises
it to ``limit``."""

SESSION_EF_SEARCH = VECTOR_BM25_DEPTH
"""``hnsw.ef_search`` a search connection's session starts with: the candidate depth of the
default recall (``search_vector_bm25``), which then runs as one statement."""

IDLE_CHECK_SECONDS = 0.05
"""A pooled connection idle longer than this is checked (one empty round trip) before use. A
server restart takes longer than this (a fast shutdown and a start), so a connection that
was idle across one is always checked, and every call made after the server is back gets a
live connection; connections reused sooner, as under load, go without the extra round trip.
A call that fails on a dead connection anyway (it was in flight) makes the pool check all
its idle connections."""

_ITERATIVE_SCAN = "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"
_SET_EF_SEARCH = "SELECT set_config('hnsw.ef_search', %s, false)"
_SESSION_SETTINGS = ("SELECT set_config('hnsw.ef_search', %s, false),"
                     "       set_config('enable_seqscan', 'off', false)")


def idle_check_hooks() -> tuple[Callable[[psycopg.Connection[Any]], None],
                                Callable[[psycopg.Connection[Any]], None]]:
    """``(check, note)``: ``check`` is a :class:`psycopg_pool.ConnectionPool` ``check``
    callback that tests a connection at checkout only if it has been idle longer than
    :data:`IDLE_CHECK_SECONDS`; ``note(conn)`` is called by the code that used a connection,
    as it gives it back. (The pool's own ``reset`` hook would do, but returning through it
    takes a worker thread, and the pool grows while the connection waits there.)"""
    returned: dict[int, float] = {}

    def note(conn: psycopg.Connection[Any]) -> None:
        returned[id(conn)] = time.monotonic()

    def check(conn: psycopg.Connection[Any]) -> None:
        since = returned.pop(id(conn), None)
        if since is None or time.monotonic() - since > IDLE_CHECK_SECONDS:
            psycopg_pool.ConnectionPool.check_connection(conn)

    return check, note


@contextmanager
def returning(conn: psycopg.Connection[Any],
              note: Callable[[psycopg.Connection[Any]], None]) -> Iterator[None]:
    """Call ``note(conn)`` when the block ends, however it ends."""
    try:
        yield
    finally:
        note(conn)


def _nothing(conn: psycopg.Connection[Any]) -> None:
    """The note of a pool not opened yet."""


class SearchConnections:
    """The connections searches run on (see the module's documentation).

    Parameters
    ----------
    url : str
        The connection string.
    configure : callable
        The store's own set-up of a new connection (cursor class, timeouts, vectors).
    max_size : int
        Most connections.
    """

    def __init__(self, url: str, configure: Callable[[psycopg.Connection[Any]], None],
                 max_size: int) -> None:
        self._url = url
        self._configure = configure
        self._max_size = max_size
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._note_returned: Callable[[psycopg.Connection[Any]], None] = _nothing
        self._opening = threading.Lock()
        self._closed = False
        # the ef_search each connection's session has, by connection
        self._ef_search: dict[int, int] = {}

    def _configure_connection(self, conn: psycopg.Connection[Any]) -> None:
        self._configure(conn)
        conn.execute(_SESSION_SETTINGS, (str(SESSION_EF_SEARCH),))
        self._ef_search[id(conn)] = SESSION_EF_SEARCH

    def _open(self) -> psycopg_pool.ConnectionPool:
        with self._opening:
            if self._closed:
                raise DatabaseError("this LongTermMemory is closed")
            if self._pool is None:
                check, self._note_returned = idle_check_hooks()
                pool = psycopg_pool.ConnectionPool(
                    self._url, min_size=1, max_size=self._max_size,
                    kwargs={"autocommit": True}, configure=self._configure_connection,
                    check=check, open=False, name="htm_analytics_search")
                try:
                    pool.open(wait=True, timeout=30)
                except psycopg_pool.PoolTimeout as exc:
                    pool.close()
                    raise DatabaseConnectionError(
                        f"could not open a search connection: {exc}") from exc
                self._pool = pool
            return self._pool

    @contextmanager
    def cursor(self, *, ef_search: int | None = DEFAULT_EF_SEARCH, filtered: bool = False
               ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor on a search connection whose session has ``ef_search`` (None: any); for
        a filtered search, in a transaction with the iterative scan on.

        A change of the session's ``ef_search`` is sent with what the caller runs, in
        pipeline mode.
        """
        pool = self._pool or self._open()
        with pool.connection() as conn, returning(conn, self._note_returned):
            change = ef_search if self._ef_search.get(id(conn)) != ef_search else None
            with conn.pipeline() if change is not None else nullcontext(), \
                    conn.cursor(row_factory=dict_row) as cur:
                if change is not None:
                    # Forgotten first: if the change fails, the next use sets it again.
                    self._ef_search.pop(id(conn), None)
                    cur.execute(_SET_EF_SEARCH, (str(change),), prepare=True)
                    self._ef_search[id(conn)] = change
                if not filtered:
                    yield cur
                    return
                with conn.transaction():
                    cur.execute(_ITERATIVE_SCAN, prepare=True)
                    yield cur

    def check(self) -> None:
        """Test every idle connection, replacing the dead ones (after a connection error)."""
        if self._pool is not None:
            self._pool.check()

    def resize(self, size: int) -> None:
        """Let the pool hold ``size`` connections (it follows the store's main pool)."""
        self._max_size = size
        if self._pool is not None and size > self._pool.max_size:
            self._pool.resize(self._pool.min_size, size)

    def close(self) -> None:
        with self._opening:
            self._closed = True
            if self._pool is not None:
                self._pool.close()
