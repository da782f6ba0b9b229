"""The command line, run in-process, and the docs that must mention every command."""

from __future__ import annotations

import importlib.resources
import json
import re
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from htm_analytics import ValidationError
from htm_analytics.cli import cli

# The migrations shipped in the package (numbers may have gaps while branches add their own).
SHIPPED_VERSIONS = sorted(
    int(path.name[:3]) for path in importlib.resources.files("htm_analytics").joinpath(
        "sql").iterdir() if re.match(r"^\d{3}_[a-z0-9_]+\.sql$", path.name))

ROOT = Path(__file__).resolve().parents[1]


def test_init_db_then_status(empty_database_url: str) -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["--db", empty_database_url, "init-db"])
    assert first.exit_code == 0, first.output
    assert f"applied migrations {SHIPPED_VERSIONS}" in first.output
    again = runner.invoke(cli, ["--db", empty_database_url, "init-db"])
    assert "already up to date" in again.output
    status = runner.invoke(cli, ["--db", empty_database_url, "status"])
    assert status.exit_code == 0, status.output
    assert "pgvector:   0.8" in status.output and "idx_nodes_embedding" in status.output
    as_json = runner.invoke(cli, ["--db", empty_database_url, "status", "--json",
                                  "--no-indexes"])
    document = json.loads(as_json.stdout)  # one document: server, schema, tables
    assert {row["table"]: row["rows"] for row in document["tables"]}["nodes"] == 0
    assert document["server"]["pgvector"].startswith("0.8") and document["schema"]["version"]
    as_csv = runner.invoke(cli, ["--db", empty_database_url, "status", "--csv", "--no-indexes"])
    assert as_csv.stdout.splitlines()[0] == "table,rows"
    # --db also goes after the command's name, and wins over the group's.
    after = runner.invoke(cli, ["--db", "postgresql://nobody@127.0.0.1:1/x", "status",
                                "--csv", "--no-indexes", "--db", empty_database_url])
    assert after.exit_code == 0 and after.stdout == as_csv.stdout


def test_errors_are_one_line_without_password() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "htm_analytics", "--db",
         "postgresql://u:hunter2@127.0.0.1:1/x?connect_timeout=2", "status"],
        capture_output=True, text=True)
    assert result.returncode == 1
    said, error = result.stderr.splitlines()[:2]  # which database, then the error
    assert said.startswith("database: postgresql://u:***@127.0.0.1:1/x")
    assert error.startswith("Error: could not talk to postgresql://u:***@")
    assert "hunter2" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def _command_names(group: click.Group, prefix: str = "htm-analytics") -> list[str]:
    names = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            names += _command_names(command, f"{prefix} {name}")
        else:
            names.append(f"{prefix} {name}")
    return names


def test_readme_mentions_every_command() -> None:
    readme = (ROOT / "README.md").read_text()
    names = _command_names(cli)
    assert "htm-analytics bench recall" in names
    for name in names:
        assert name in readme, name
        command = cli
        for part in name.split()[1:]:
            command = command.commands[part]  # type: ignore[attr-defined]
        assert "--db" in [o for p in command.params for o in p.opts], name


def test_bench_commands(memory_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "recall.csv"
    result = runner.invoke(cli, ["--db", memory_url, "bench", "recall", "--queries", "20",
                                 "--ef-search", "10,40", "--repeats", "1", "--tag", "role",
                                 "--iterative-scan", "off", "--iterative-scan",
                                 "relaxed_order", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 8 and {r["filter"] for r in rows} == {"none", "tag=role"}
    assert out.is_file()
    repeated = runner.invoke(cli, ["--db", memory_url, "bench", "recall", "--queries", "10",
                                   "--ef-search", "40", "--repeats", "2", "--out", str(out)])
    assert repeated.exit_code == 0, repeated.output
    assert "varied by up to" in repeated.stderr and "are noise" in repeated.stderr
    bad = runner.invoke(cli, ["--db", memory_url, "bench", "recall", "--ef-search", "ten"])
    assert bad.exit_code == 2 and "comma-separated integers" in bad.output
    assert "--ef-search" in bad.output  # it named no option
    low = runner.invoke(cli, ["--db", memory_url, "bench", "build", "--m", "1"])
    assert isinstance(low.exception, ValidationError) and low.exception.field == "m"
    assert "from 2 to 100" in str(low.exception)  # it was the server's "out of bounds"
    twice = runner.invoke(cli, ["--db", memory_url, "bench", "recall", "--queries", "10",
                                "--ef-search", "40,40", "--json"])
    assert twice.exit_code == 0 and len(json.loads(twice.stdout)) == 1  # measured once
    empty = runner.invoke(cli, ["--db", memory_url, "bench", "recall", "--ef-search", ""])
    assert empty.exit_code == 2 and "got none" in empty.output  # not "(no rows)", exit 0
    build = runner.invoke(cli, ["--db", memory_url, "bench", "build", "--m", "4",
                                "--ef-construction", "16", "--queries", "20",
                                "--ef-search", "20", "--out", str(tmp_path / "b.csv")])
    assert build.exit_code == 0, build.output
    assert "m=4,efc=16" in build.stdout


def test_analysis_commands(memory_url: str, tmp_path: Path) -> None:
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, ["--db", memory_url, *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    pairs = json.loads(run("tags", "--level", "1", "--limit", "5", "--json"))
    assert len(pairs) == 5 and ":" not in pairs[0]["topic1"]
    assert run("tag-tree", "--max-depth", "1", "--csv").splitlines()[0].startswith("tag,name,")
    for refused in (["tag-tree", "--max-depth", "0"], ["trends", "--level", "1"],
                    ["trends", "--by", "robot", "--prefix", "database"]):
        result = runner.invoke(cli, ["--db", memory_url, *refused])
        assert result.exit_code == 2 and refused[-2] in result.output, (refused, result.output)
    weekly = json.loads(run("trends", "--by", "robot", "--robot", "coder", "--json"))
    assert {row["robot"] for row in weekly} == {"coder"}
    recent = json.loads(run("trends", "--freq", "D", "--since", "2026-06-20",
                            "--until", "2026-06-30", "--json"))
    assert recent and all(row["period"] >= "2026-06-20" for row in recent)
    # A date ending the range holds that whole day, alone or with --since on the same day.
    day = max(recent, key=lambda row: row["period"])["period"][:10]
    alone = json.loads(run("trends", "--freq", "D", "--since", day, "--until", day, "--json"))
    assert [row["period"][:10] for row in alone] == [day]
    assert alone[0]["remembers"] == next(r["remembers"] for r in recent
                                         if r["period"].startswith(day))
    noon = json.loads(run("trends", "--freq", "D", "--since", day,
                          "--until", f"{day} 00:00:00", "--json"))
    assert sum(row["remembers"] for row in noon) < alone[0]["remembers"]
    assert "shared_fraction" in run("robots")
    assert "jaccard" in run("robots", "--overlap", "--csv")
    assert "snapshot written to" in run("snapshot", str(tmp_path / "m.duckdb"))
    assert (tmp_path / "m.duckdb").is_file()


def test_a_terminated_bench_build_drops_its_scratch_table(database_url: str,
                                                          tmp_path: Path) -> None:
    """SIGTERM (timeout, systemd, docker stop) ends a command as Ctrl-C does: the blocks
    that drop its scratch table run. Python's default would leave the table behind."""
    import signal
    import time

    import numpy as np
    import psycopg

    from htm_analytics import LongTermMemory

    vectors = np.random.default_rng(0).normal(size=(4000, 32)).astype(np.float32)
    with LongTermMemory(database_url) as store:
        store.bulk_add([f"memory {i}" for i in range(len(vectors))], robots="r",
                       embeddings=vectors)
    command = [sys.executable, "-m", "htm_analytics", "--db", database_url, "bench", "build",
               "--m", "8,16,32,48,64", "--ef-construction", "400", "--queries", "100",
               "--out", str(tmp_path / "build.csv")]
    running = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    scratch = "SELECT count(*) FROM pg_class WHERE relname LIKE 'htm_analytics_bench%%'"
    with psycopg.connect(database_url, autocommit=True) as db:
        deadline = time.monotonic() + 120
        while not db.execute(scratch).fetchone()[0] and running.poll() is None:
            assert time.monotonic() < deadline, "the build never started"
            time.sleep(0.05)
        assert running.poll() is None, "the build ended before it could be stopped"
        running.send_signal(signal.SIGTERM)
        _, errors = running.communicate(timeout=120)
        assert running.returncode == 128 + signal.SIGTERM, errors
        assert "Traceback" not in errors
        assert db.execute(scratch).fetchone()[0] == 0
