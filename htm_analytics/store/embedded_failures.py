"""Why the embedded server did not start or stop, in one line a user can act on."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

__all__ = ["failure_reason", "start_failure"]


def _log_reason(data_dir: Path) -> str | None:
    """The server log's last FATAL or PANIC line (why it did not start), if any."""
    try:
        lines = (data_dir / "log").read_text(errors="replace").splitlines()[-40:]
    except OSError:
        return None
    found = [line for line in lines if re.search(r"\b(FATAL|PANIC):|^postgres: ", line)]
    return re.sub(r"^.*?\b(FATAL|PANIC):\s*", "", found[-1]).strip() if found else None


def failure_reason(data_dir: Path, exc: BaseException) -> str:
    """Why a start or stop of the server in ``data_dir`` failed with ``exc``: a timeout, the
    log's last FATAL line, or the failing program and its exit status."""
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"it did not answer within {exc.timeout:.0f} s"
    if reason := _log_reason(data_dir):
        return reason
    if isinstance(exc, subprocess.CalledProcessError):
        program = Path(str(exc.cmd[0] if isinstance(exc.cmd, list) else exc.cmd)).name
        return f"{program} failed (exit status {exc.returncode})"
    return str(getattr(exc, "strerror", None) or exc) or type(exc).__name__


def start_failure(data_dir: Path, exc: BaseException) -> str:
    """The message of a failed start: the reason, where the log is, and what to try."""
    return (f"could not start the embedded PostgreSQL in {data_dir}: "
            f"{failure_reason(data_dir, exc)}. See {data_dir / 'log'}; set HTM_EMBEDDED_DIR "
            "to another directory, or HTM_DBURL to use your own server")
