"""The embedded server's life as users meet it: data directories with spaces, accents or a
long path, directories it must refuse, first runs at the same moment, a server stopped by
another process or killed. Every server runs in a private directory of its own, started by
child processes that exit (the last one stops it), and is deleted afterwards."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fixtures_db import embedded_test_dir
from psycopg.conninfo import conninfo_to_dict

from htm_analytics.store.connection import check_database_url, embedded_dir_of
from htm_analytics.store.embedded import delete_embedded_server, embedded_server_status

pytestmark = pytest.mark.reliability

# Starts (or joins) the embedded server in argv[1] and prints one JSON line: {"url": ...} or
# {"error": type, "message": ...}. With "again" it then waits for a line on stdin, asks for
# the server once more and runs a statement, printing a second such line; then waits for EOF.
CLIENT = textwrap.dedent("""
    import json, pathlib, sys
    import psycopg
    from htm_analytics.store.connection import embedded_server_url

    def attempt():
        try:
            url = embedded_server_url(pathlib.Path(sys.argv[1]))
            with psycopg.connect(url) as conn:
                conn.execute("SELECT 1")
            return {"url": url}
        except Exception as exc:
            return {"error": type(exc).__name__, "message": str(exc)}

    print(json.dumps(attempt()), flush=True)
    if sys.argv[2:] == ["again"]:
        sys.stdin.readline()
        print(json.dumps(attempt()), flush=True)
        sys.stdin.read()
""")


def _client(data_dir: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CLIENT, str(data_dir), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _run(data_dir: Path) -> dict[str, str]:
    """One process that starts (or joins) the server, uses it and exits."""
    client = _client(data_dir)
    out, err = client.communicate("", timeout=120)
    assert out.strip(), err[-2000:]
    return dict(json.loads(out.splitlines()[0]))


@pytest.fixture
def root() -> Iterator[Path]:
    """A private folder for data directories; every server in it is stopped and deleted."""
    directory = embedded_test_dir("htm-life-")
    yield directory
    for version in list(directory.rglob("PG_VERSION")):
        if version.parent.name != "refused":
            delete_embedded_server(version.parent, force=True)
    shutil.rmtree(directory, ignore_errors=True)


def _no_server(data_dir: Path) -> bool:
    return not embedded_server_status(data_dir).running


@pytest.mark.parametrize("name", ["my data", "dätä ünd mehr"])
def test_a_data_directory_with_spaces_or_accents(root: Path, name: str) -> None:
    """macOS keeps user data in "Application Support": pg_ctl got the socket directory
    unquoted, and the URL (with a raw space) was one the toolkit itself refuses."""
    data_dir = root / name / "pgdata"
    result = _run(data_dir)
    assert "url" in result, result
    url = check_database_url(result["url"])  # a URL the toolkit accepts back (--db)
    assert embedded_dir_of(url) == data_dir.resolve()
    assert _no_server(data_dir)  # the last user exited: stopped
    again = _run(data_dir)  # and it starts again from the URL's directory
    assert again == result


def test_a_data_directory_too_long_for_a_socket_is_still_found_by_its_url(root: Path) -> None:
    """The socket then lives in a short directory: the URL printed by the demo must still
    lead ``server status --db URL`` and a later run to the data directory."""
    data_dir = root / ("d" * 60) / ("e" * 40) / "pgdata"
    assert len(str(data_dir / ".s.PGSQL.5432")) > 107
    result = _run(data_dir)
    assert "url" in result, result
    socket_dir = Path(conninfo_to_dict(result["url"])["host"])
    try:
        assert embedded_dir_of(result["url"]) == data_dir.resolve()
        assert _no_server(data_dir)
        assert delete_embedded_server(data_dir) > 0  # `server clean`
        assert not socket_dir.exists()  # its socket's directory goes with it
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


def _other_version(directory: Path) -> None:
    directory.mkdir()
    (directory / "PG_VERSION").write_text("16\n")
    (directory / "postgresql.conf").write_text("# a PostgreSQL 16 cluster\n")


def _under_a_file(directory: Path) -> None:
    directory.parent.write_text("notes")


@pytest.mark.parametrize("make, path, expected", [
    (_other_version, "refused", "data directory of PostgreSQL '16'"),
    (_under_a_file, "a file/pgdata", "could not create the embedded server's directory"),
    (lambda d: None, 'say "cheese"', "pg_ctl cannot pass a path"),
], ids=["other-major-version", "under-a-file", "quote-in-path"])
def test_a_directory_it_cannot_use_is_one_readable_line(root: Path, make, path: str,
                                                        expected: str) -> None:
    data_dir = root / path
    make(data_dir)
    before = {p.relative_to(root): (p.stat().st_uid, p.stat().st_mode)
              for p in root.rglob("*")}
    result = _run(data_dir)
    assert result.get("error") == "DatabaseConnectionError", result
    assert expected in result["message"] and "HTM_EMBEDDED_DIR" in result["message"]
    assert "pg_ctl'," not in result["message"] and "Errno" not in result["message"]
    assert {p.relative_to(root): (p.stat().st_uid, p.stat().st_mode)
            for p in root.rglob("*")} == before  # nothing taken over, nothing made


def test_first_runs_at_the_same_moment_share_one_server(root: Path) -> None:
    data_dir = root / "pgdata"
    clients = [_client(data_dir) for _ in range(3)]
    results = []
    for client in clients:
        out, err = client.communicate("", timeout=120)
        assert out.strip(), err[-2000:]
        results.append(json.loads(out.splitlines()[0]))
    assert all("url" in r for r in results), results
    assert len({r["url"] for r in results}) == 1
    assert _no_server(data_dir)
    assert "url" in _run(data_dir)  # the directory they made together is whole


def test_a_process_outlives_a_forced_stop_by_another(root: Path) -> None:
    """``htm-analytics server stop --force`` ends a long-running user's sessions; its next
    request starts the server again instead of failing until it is restarted."""
    from click.testing import CliRunner

    from htm_analytics.cli import cli

    data_dir = root / "pgdata"
    holder = _client(data_dir, "again")
    try:
        assert holder.stdin is not None and holder.stdout is not None
        first = json.loads(holder.stdout.readline())
        assert "url" in first, first
        stopped = CliRunner().invoke(cli, ["--db", first["url"], "server", "stop", "--force"])
        assert stopped.exit_code == 0 and "stopped" in stopped.stdout, stopped.output
        assert _no_server(data_dir)
        holder.stdin.write("\n")
        holder.stdin.flush()
        second = json.loads(holder.stdout.readline())
        assert second == first  # started again, same URL
        assert [h["pid"] for h in embedded_server_status(data_dir).holders] == [holder.pid]
    finally:
        holder.communicate("", timeout=120)
    assert _no_server(data_dir)  # and, last to exit, it stopped it


def test_a_server_killed_with_sigkill_is_started_again_at_once(root: Path) -> None:
    data_dir = root / "pgdata"
    holder = _client(data_dir, "again")
    try:
        assert holder.stdin is not None and holder.stdout is not None
        assert "url" in json.loads(holder.stdout.readline())
        pid = embedded_server_status(data_dir).pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # postmaster.pid stays behind
        deadline = time.monotonic() + 30
        result = _run(data_dir)
        assert "url" in result, result["message"]
        assert time.monotonic() < deadline
        with psycopg.connect(result["url"]) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        holder.communicate("", timeout=120)
