"""Search connections: a pool whose sessions are set up for HNSW searches.

A vector search needs ``hnsw.ef_search`` and ``enable_seqscan = off`` (the planner
under-costs scans of TOASTed vectors). Setting them per search costs a transaction and a
statement around every query; setting them on the session of a shared connection would leak
them into whatever that connection runs next. So searches get connections of their own: a
second pool, opened at the first search, whose connections run in autocommit with these
settings at the session level and are used for nothing but searches.

The connections are kept by this module, not by a general-purpose pool: a search takes the
most recently returned idle connection (a lock, a list pop and a clock read) and opens a new
one in the calling thread when none is idle and fewer than ``max_size`` are open, or waits
for one to come back. A connection is checked before use only when it has been idle longer
than :data:`IDLE_CHECK_SECONDS`, or after a connection error anywhere in the store; one that
comes back broken, or not idle (an error inside a transaction), is closed, not reused.

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
from psycopg import pq, sql
from psycopg.adapt import AdaptersMap
from psycopg.rows import dict_row

from ..errors import DatabaseError
from ._common import VECTOR_BM25_DEPTH

__all__ = ["DEFAULT_EF_SEARCH", "IDLE_CHECK_SECONDS", "SESSION_EF_SEARCH", "SearchConnections",
           "idle_check_hooks", "returning"]

WAIT_SECONDS = 30.0
"""Longest a search waits for a connection when ``max_size`` are in use (as the pool's
``timeout``)."""

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
                     "       set_config('enable_seqscan', 'off', false),"
                     "       set_config('jit', 'off', false)")  # as the store's (_base)


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


class _Session:
    """A search connection, the ``ef_search`` its session has, and when it came back."""

    __slots__ = ("conn", "ef_search", "returned_at")

    def __init__(self, conn: psycopg.Connection[Any], ef_search: int | None) -> None:
        self.conn = conn
        self.ef_search = ef_search
        self.returned_at = time.monotonic()


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
    context : psycopg.adapt.AdaptersMap, optional
        The adapters new connections start from.
    """

    def __init__(self, url: str, configure: Callable[[psycopg.Connection[Any]], None],
                 max_size: int, context: AdaptersMap | None = None) -> None:
        self._url = url
        self._context = context
        self._configure = configure
        self._max_size = max_size
        self._idle: list[_Session] = []  # the most recently returned last
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)
        self._open = 0  # connections open or being opened, idle or in use
        self._closed = False
        self._wait_seconds = 0.0

    # -- taking and giving back -----------------------------------------------------------

    def _take(self) -> _Session:
        with self._lock:
            if self._closed:
                raise DatabaseError("this LongTermMemory is closed")
            session = self._idle.pop() if self._idle else self._reserve()
        if session is None:
            return self._connect()
        if time.monotonic() - session.returned_at > IDLE_CHECK_SECONDS:
            try:
                session.conn.execute("")
            except psycopg.Error:
                # The server went away since: check the other idle ones too, and replace
                # this one (its place stays reserved).
                session.conn.close()
                self.check()
                return self._connect()
        return session

    def _reserve(self) -> _Session | None:
        """With the lock held and no connection idle: wait until one comes back (returned)
        or another may be opened (None: counted as open, for the caller to open)."""
        deadline = time.monotonic() + WAIT_SECONDS
        started = time.monotonic()
        while not self._idle and self._open >= self._max_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                break
            self._returned.wait(remaining)
        self._wait_seconds += time.monotonic() - started
        if self._closed:
            raise DatabaseError("this LongTermMemory is closed")
        if self._idle:  # one came back meanwhile: the caller takes it
            return self._idle.pop()
        if self._open >= self._max_size:
            raise psycopg_pool.PoolTimeout(
                f"couldn't get a connection after {WAIT_SECONDS:.2f} sec")
        self._open += 1
        return None

    def _connect(self) -> _Session:
        """A new connection, set up (its place already counted in ``_open``)."""
        conn: psycopg.Connection[Any] | None = None
        try:
            conn = psycopg.connect(self._url, autocommit=True, context=self._context)
            self._configure(conn)
            conn.execute(_SESSION_SETTINGS, (str(SESSION_EF_SEARCH),))
            return _Session(conn, SESSION_EF_SEARCH)
        except BaseException:
            if conn is not None:
                conn.close()
            self._forget_one()
            raise

    def _forget_one(self) -> None:
        with self._lock:
            self._open -= 1
            self._returned.notify()

    def _give_back(self, session: _Session) -> None:
        conn = session.conn
        if conn.pgconn.transaction_status == pq.TransactionStatus.IDLE:
            with self._lock:
                if not self._closed:
                    session.returned_at = time.monotonic()
                    self._idle.append(session)
                    self._returned.notify()
                    return
        # Broken, or left in a transaction or a query by an error: not worth reusing.
        conn.close()
        self._forget_one()

    # -- what searches use ----------------------------------------------------------------

    def fetch(self, statement: str | sql.Composed, params: dict[str, Any], *,
              ef_search: int = DEFAULT_EF_SEARCH, filtered: bool = False,
              before: Callable[[psycopg.Cursor[Any]], object] | None = None
              ) -> list[dict[str, Any]]:
        """The rows of ``statement`` run as a prepared statement on a search connection (see
        :meth:`cursor`), ``before(cur)`` first on the same connection."""
        session = self._take()
        try:
            if session.ef_search == ef_search and not filtered:  # the usual case: as is
                cur = session.conn.cursor(row_factory=dict_row)
                if before is not None:
                    before(cur)
                return cur.execute(statement, params, prepare=True).fetchall()
            with self._set_up(session, ef_search, filtered) as cur:
                if before is not None:
                    before(cur)
                return cur.execute(statement, params, prepare=True).fetchall()
        finally:
            self._give_back(session)

    @contextmanager
    def cursor(self, *, ef_search: int | None = DEFAULT_EF_SEARCH, filtered: bool = False
               ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor on a search connection whose session has ``ef_search`` (None: any); for
        a filtered search, in a transaction with the iterative scan on.

        A change of the session's ``ef_search`` is sent with what the caller runs, in
        pipeline mode.
        """
        session = self._take()
        try:
            with self._set_up(session, ef_search, filtered) as cur:
                yield cur
        finally:
            self._give_back(session)

    @staticmethod
    @contextmanager
    def _set_up(session: _Session, ef_search: int | None, filtered: bool
                ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        conn = session.conn
        change = ef_search is not None and session.ef_search != ef_search
        with conn.pipeline() if change else nullcontext(), \
                conn.cursor(row_factory=dict_row) as cur:
            if change:
                # Forgotten first: if the change fails, the next use sets it again.
                session.ef_search = None
                cur.execute(_SET_EF_SEARCH, (str(ef_search),), prepare=True)
                session.ef_search = ef_search
            if not filtered:
                yield cur
                return
            with conn.transaction():
                cur.execute(_ITERATIVE_SCAN, prepare=True)
                yield cur

    def check(self) -> None:
        """Have every idle connection checked before its next use (after a connection
        error: the server may have gone away)."""
        with self._lock:
            for session in self._idle:
                session.returned_at = float("-inf")

    def resize(self, size: int) -> None:
        """Let the pool hold ``size`` connections (it follows the store's main pool)."""
        with self._lock:
            if size > self._max_size:
                self._max_size = size
                self._returned.notify_all()

    def pop_wait_seconds(self) -> float:
        """Seconds searches waited for a connection since the last call (all threads)."""
        with self._lock:
            waited, self._wait_seconds = self._wait_seconds, 0.0
        return waited

    def close(self) -> None:
        """Close the idle connections; those in use are closed as they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._returned.notify_all()
        for session in idle:
            session.conn.close()
