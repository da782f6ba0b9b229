"""Databases by name on one server: point a URL at another database, create, drop, scratch.

The demo, the benchmarks and the test suite each keep their memory in a database of its own
on the configured (or embedded) server; these helpers are the one way they do it. Names are
always quoted identifiers, never interpolated text.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import ValidationError
from ._common import Statement
from ._errors import translate_database_error

__all__ = ["with_database", "database_name", "database_exists", "create_database",
           "ensure_database", "drop_database", "replace_database", "claimed_database",
           "drop_unused_databases", "scratch_database"]

# How long a swap waits for the sessions it ends to go, in milliseconds, and how often it tries.
_TERMINATE_WAIT_MS = 5_000
_SWAP_ATTEMPTS = 5


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name.encode("utf-8")) > 63 \
            or "\x00" in name:
        raise ValidationError("must be a database name of 1 to 63 bytes", field="database")
    return name


def database_name(url: str) -> str | None:
    """The database a URL (or libpq keyword string) names, None when it names none."""
    name = conninfo_to_dict(url).get("dbname")
    return None if name is None else str(name)


def with_database(url: str, name: str) -> str:
    """``url`` pointed at the database ``name`` on the same server, with the same user and
    settings (a libpq keyword string)."""
    params = conninfo_to_dict(url)
    params["dbname"] = _check_name(name)
    return make_conninfo(**{key: str(value) for key, value in params.items()})


def _admin(server_url: str, statement: Statement,
           params: tuple[object, ...] | None = None) -> list[tuple[object, ...]]:
    """Run one statement outside a transaction (CREATE/DROP DATABASE need that)."""
    try:
        with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=server_url) from exc


def database_exists(server_url: str, name: str) -> bool:
    """Whether the server has a database called ``name``."""
    return bool(_admin(server_url, "SELECT 1 FROM pg_database WHERE datname = %s",
                       (_check_name(name),)))


def create_database(server_url: str, name: str, *, template: str | None = None,
                    replace: bool = False) -> str:
    """Create the database ``name`` (a copy of ``template`` if given) and return its URL.

    ``replace`` drops an existing database of that name first, disconnecting its sessions.
    """
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(_check_name(name)))
    if template is not None:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(_check_name(template)))
    if replace:
        drop_database(server_url, name)
    _admin(server_url, create)
    return with_database(server_url, name)


def ensure_database(server_url: str, name: str, *, fresh: bool = False) -> str:
    """The URL of the database ``name``, created if it is missing; ``fresh`` recreates it."""
    if fresh or not database_exists(server_url, name):
        return create_database(server_url, name, replace=fresh)
    return with_database(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """Drop the database ``name`` if it exists, disconnecting its sessions."""
    _admin(server_url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
        sql.Identifier(_check_name(name))))


def replace_database(server_url: str, source: str, target: str) -> str:
    """Put the database ``source`` in the place of ``target`` and return its URL.

    Both renames happen in one transaction (``ALTER DATABASE ... RENAME``), so at every moment
    ``target`` is either the old database, whole, or the new one: an interrupt before the
    commit leaves the old one as it was. The old database is dropped afterwards. Sessions on
    either database are ended first (renaming needs that), as dropping it would.
    """
    _check_name(source)
    _check_name(target)
    retired = f"{target.encode('utf-8')[:40].decode('utf-8', 'ignore')}_old_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as conn:
            for attempt in range(_SWAP_ATTEMPTS):
                try:
                    with conn.transaction():
                        conn.execute(
                            "SELECT pg_terminate_backend(pid, %s) FROM pg_stat_activity "
                            "WHERE datname IN (%s, %s) AND pid <> pg_backend_pid()",
                            (_TERMINATE_WAIT_MS, source, target))
                        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                        (target,)).fetchone():
                            conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                                sql.Identifier(target), sql.Identifier(retired)))
                        conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            sql.Identifier(source), sql.Identifier(target)))
                    break
                except psycopg.errors.ObjectInUse:  # a session arrived meanwhile: again
                    if attempt == _SWAP_ATTEMPTS - 1:
                        raise
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=server_url) from exc
    drop_database(server_url, retired)
    return with_database(server_url, target)


# A claim on a database being built: a session advisory lock on (this class, its name).
_CLAIM = "SELECT {}(hashtext('htm_analytics.database'), hashtext(%s))"


@contextmanager
def claimed_database(server_url: str, name: str, *,
                     on_wait: Callable[[], object] | None = None) -> Iterator[None]:
    """Claim the database ``name`` while the block runs (a session advisory lock, held on a
    connection to the server URL's database): :func:`drop_unused_databases` leaves it
    alone, even at a moment when no session is connected to it, and another claim of the
    same name waits for this one. The claim ends with the block, or with the process.
    ``on_wait`` is called first when another process holds the claim."""
    try:
        conn = psycopg.connect(server_url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=server_url) from exc
    with conn:
        try:
            taken = conn.execute(sql.SQL(_CLAIM).format(sql.SQL("pg_try_advisory_lock")),
                                 (name,)).fetchone()
            if not (taken and taken[0]):
                if on_wait is not None:
                    on_wait()
                conn.execute(sql.SQL(_CLAIM).format(sql.SQL("pg_advisory_lock")), (name,))
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=server_url) from exc
        yield


def drop_unused_databases(server_url: str, prefix: str) -> list[str]:
    """Drop the databases whose name starts with ``prefix``, that no session uses and no
    process claims (:func:`claimed_database`): left by a process killed while building one.
    Return their names."""
    rows = _admin(server_url, """SELECT datname FROM pg_database d
                                 WHERE left(datname, length(%s)) = %s
                                   AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                                                   WHERE a.datname = d.datname)""",
                  (prefix, prefix))
    dropped = []
    claim = sql.SQL(_CLAIM).format(sql.SQL("pg_try_advisory_lock"))
    try:
        with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as conn:
            for name in (str(row[0]) for row in rows):
                if not conn.execute(claim, (name,)).fetchone()[0]:  # type: ignore[index]
                    continue  # a build under way, between two of its sessions
                try:
                    drop_database(server_url, name)
                finally:
                    conn.execute(sql.SQL(_CLAIM).format(sql.SQL("pg_advisory_unlock")),
                                 (name,))
                dropped.append(name)
    except psycopg.Error as exc:
        raise translate_database_error(exc, url=server_url) from exc
    return dropped


@contextmanager
def scratch_database(server_url: str, prefix: str = "htm_scratch", *,
                     template: str | None = None, keep: bool = False) -> Iterator[str]:
    """A new database with a unique name (``prefix`` + random hex), dropped afterwards (also
    on an error or Ctrl-C) unless ``keep``; yields its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = create_database(server_url, name, template=template)
    try:
        yield url
    finally:
        if not keep:
            drop_database(server_url, name)
