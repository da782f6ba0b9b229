"""Choosing the database, connection failures, timeouts and error translation."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from htm_analytics import (
    DatabaseConnectionError,
    LongTermMemory,
    QueryTimeoutError,
    ValidationError,
    mask_url,
    resolve_database_url,
)


def test_environment_variables_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTM_DBURL", "HTM_DATABASE__URL", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql://c@host/c")
    assert resolve_database_url() == "postgresql://c@host/c"
    monkeypatch.setenv("HTM_DATABASE__URL", "postgresql://b@host/b")
    assert resolve_database_url() == "postgresql://b@host/b"
    monkeypatch.setenv("HTM_DBURL", "postgresql://a@host/a")
    assert resolve_database_url() == "postgresql://a@host/a"


def test_mapping_config_like_the_reference() -> None:
    url = resolve_database_url({"host": "db.example", "port": 5433, "dbname": "htm",
                                "user": "robot", "password": "s3cret", "sslmode": "require"})
    assert "host=db.example" in url and "port=5433" in url and "sslmode=require" in url


@pytest.mark.parametrize("url, expected", [
    ("postgresql://robot:s3cret@db.example:5432/htm",
     "postgresql://robot:***@db.example:5432/htm"),
    ("host=db password=s3cret user=robot", "host=db password=*** user=robot"),
    ("host=db password='s3 cret' user=robot", "host=db password=*** user=robot"),
    ("postgresql:///htm?host=/tmp", "postgresql:///htm?host=/tmp"),
])
def test_mask_url_hides_passwords(url: str, expected: str) -> None:
    assert mask_url(url) == expected


def test_bad_urls_and_configs_are_validation_errors() -> None:
    with pytest.raises(ValidationError):
        resolve_database_url("not a url = = =")
    with pytest.raises(ValidationError):
        resolve_database_url(42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        resolve_database_url("   ")


def test_unreachable_server_names_the_masked_url_and_what_to_try() -> None:
    url = "postgresql://robot:topsecret@127.0.0.1:1/htm?connect_timeout=2"
    with pytest.raises(DatabaseConnectionError) as info:
        LongTermMemory(url)
    message = str(info.value)
    assert "robot:***@127.0.0.1:1" in message and "topsecret" not in message
    assert "HTM_DBURL" in message


def test_statement_timeout_raises_a_typed_error(database_url: str) -> None:
    with LongTermMemory(database_url, query_timeout=100) as ltm:
        with pytest.raises(QueryTimeoutError) as info:
            ltm._fetch("SELECT pg_sleep(2)")
        assert info.value.sqlstate == "57014"
        assert isinstance(info.value, TimeoutError)
        assert "the store's query_timeout of 0.1 s" in str(info.value)
        assert "--query-timeout SECONDS" in str(info.value)  # how to give it longer
        assert ltm._fetch("SHOW statement_timeout") == [{"statement_timeout": "100ms"}]
        # The pool recovered: the next statement works.
        assert ltm.exists(1) is False


def test_pool_connections_run_in_utc(ltm: LongTermMemory) -> None:
    assert ltm._fetch("SHOW TimeZone") == [{"TimeZone": "UTC"}]


def test_closed_store_refuses_work(database_url: str) -> None:
    from htm_analytics import DatabaseError
    ltm = LongTermMemory(database_url)
    ltm.close()
    ltm.close()  # idempotent
    with pytest.raises(DatabaseError, match="closed"):
        ltm.exists(1)


def test_a_url_of_a_stopped_embedded_server_starts_it() -> None:
    # The demo prints its database's URL; the embedded server stops when that run exits, and
    # the URL must still work in the next command.
    root = Path(tempfile.mkdtemp(prefix="htm-embedded-"))
    os.chmod(root, 0o755)  # as root the server runs as another user, who must reach it
    try:
        first = subprocess.run(
            [sys.executable, "-c", "import sys, pathlib; "
             "from htm_analytics.store import embedded_server_url as start; "
             "print(start(pathlib.Path(sys.argv[1])))",
             str(root / "pgdata")], capture_output=True, text=True, check=True)
        url = first.stdout.strip()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=5).close()  # stopped with its process
        init = subprocess.run([sys.executable, "-m", "htm_analytics", "--db", url, "init-db"],
                              capture_output=True, text=True)
        assert init.returncode == 0, init.stderr
        assert "applied migrations" in init.stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_socket_directory_out_of_reach_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # A user may not look into another user's directory; that is no embedded server of ours.
    def denied(path: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Path, "is_file", denied)
    url = "host=/srv/someone-else dbname=x"
    assert resolve_database_url(url) == url


def test_the_command_line_sets_the_query_timeout(database_url: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``--query-timeout SECONDS`` (or ``HTM_QUERY_TIMEOUT``) reaches the store's
    statement_timeout; a non-positive one is refused."""
    from click.testing import CliRunner

    from htm_analytics.cli import cli
    from htm_analytics.cli._database import open_store

    seen: list[object] = []

    def opened(ctx: Any, **options: Any) -> Any:
        store = open_store(ctx, **options)
        seen.append(store._fetch("SHOW statement_timeout")[0]["statement_timeout"])
        return store

    monkeypatch.setattr("htm_analytics.cli._app._open_store", opened)
    monkeypatch.setattr("htm_analytics.cli.hygiene._open_store", opened)
    runner = CliRunner()
    given = runner.invoke(cli, ["--db", database_url, "--query-timeout", "90", "hygiene",
                                "--check", "supersession"])
    assert given.exit_code == 0, given.output
    from_env = runner.invoke(cli, ["--db", database_url, "hygiene", "--check", "supersession"],
                             env={"HTM_QUERY_TIMEOUT": "2.5"})
    assert from_env.exit_code == 0, from_env.output
    assert seen == ["90s", "2500ms"]
    refused = runner.invoke(cli, ["--db", database_url, "--query-timeout", "0", "tags"])
    assert refused.exit_code == 2 and "--query-timeout" in refused.output


def test_the_store_s_sessions_compile_nothing(ltm) -> None:
    """JIT stays off on the store's connections: on servers built with LLVM, compiling the
    searches' plans took longer than running them (a default search on PostgreSQL 15 from
    Debian: 4-15 ms with JIT, 3 ms without)."""
    assert ltm._fetch("SELECT current_setting('jit') AS jit")[0]["jit"] == "off"


@pytest.mark.parametrize("read_only", [False, True])
def test_a_new_connection_is_set_up_outside_any_transaction(
        database_url: str, tmp_path: Path, read_only: bool) -> None:
    """The pool sets up the connections it opens (or reopens, after one was lost) in its own
    thread, while the store works: a setup in a transaction showed, for a round trip, as an
    'idle in transaction' session to the store's own checks and to the server's monitoring.
    Every ReadyForQuery the server sends during the setup says idle ('I'), never 'T'."""
    with LongTermMemory(database_url, read_only=read_only) as store, \
            psycopg.connect(database_url, context=store._adapters) as conn:
        trace = tmp_path / "libpq.trace"
        with trace.open("w") as out:
            conn.pgconn.trace(out.fileno())
            store._configure_connection(conn)
            conn.pgconn.untrace()
        statuses = [line.split()[-1] for line in trace.read_text().splitlines()
                    if "ReadyForQuery" in line]
        assert statuses and set(statuses) == {"I"}, statuses
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert not conn.autocommit  # as the pool hands connections out
        assert conn.execute("SELECT current_setting('jit')").fetchone() == ("off",)
        read_only_setting = conn.execute(
            "SELECT current_setting('default_transaction_read_only')").fetchone()
        assert read_only_setting == ("on" if read_only else "off",)
        vector = conn.execute("SELECT '[1,2]'::vector").fetchone()[0]
        assert vector.to_numpy().dtype == np.float32 and vector.to_list() == [1.0, 2.0]
        assert conn.execute("SELECT 'infinity'::timestamptz").fetchone()[0].year == 9999
