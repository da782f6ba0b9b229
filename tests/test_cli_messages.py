"""What the command line says when something is missing or wrong: what it is, and the command
or option that fixes it; and commands that write set up an empty target themselves."""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_helpers import run_main
from click.testing import CliRunner
from fixtures_db import embedded_test_dir, temporary_database
from psycopg.conninfo import make_conninfo
from test_peers_ghostkg import build_ghostkg

import htm_analytics.cli as cli_package
from htm_analytics import LongTermMemory, SchemaError, ValidationError
from htm_analytics.cli import cli


def test_status_on_an_empty_database_reports_the_server(empty_database_url: str) -> None:
    runner = CliRunner()
    shown = runner.invoke(cli, ["--db", empty_database_url, "status"])
    assert shown.exit_code == 0, shown.output
    with psycopg.connect(empty_database_url) as conn:
        major = conn.execute("SELECT current_setting('server_version_num')::int / 10000"
                             ).fetchone()[0]
    assert f"postgresql: {major}" in shown.stdout
    assert "pgvector:   not installed in this database (0.8" in shown.stdout
    assert "schema:     absent" in shown.stdout and "htm-analytics init-db" in shown.stdout
    document = json.loads(runner.invoke(cli, ["--db", empty_database_url, "status",
                                              "--json"]).stdout)
    assert document["schema"] is None and document["tables"] == []
    assert document["server"]["pgvector"] is None
    assert document["server"]["pgvector_available"].startswith("0.8")
    assert "schema is missing" in document["problem"]


def test_a_fresh_database_lacks_the_schema_not_pgvector(empty_database_url: str) -> None:
    with pytest.raises(SchemaError) as info:
        LongTermMemory(empty_database_url)
    message = str(info.value)
    assert "the HTM schema is missing" in message and "htm-analytics init-db" in message
    assert "pgvector is not installed" not in message


def _system_pg_ctl() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), reverse=True):
        if not list(candidate.parents[1].glob("**/extension/vector.control")) and not list(
                Path("/usr/share/postgresql").glob(
                    f"{candidate.parents[1].name}/extension/vector.control")):
            return candidate
    return None


@pytest.fixture(scope="module")
def server_without_pgvector() -> Iterator[str]:
    """A PostgreSQL of the system's packages that has no pgvector (skipped without one)."""
    import os
    import pwd

    pg_ctl = _system_pg_ctl()
    if pg_ctl is None or not shutil.which("runuser"):
        pytest.skip("needs a system PostgreSQL without pgvector (/usr/lib/postgresql/*)")
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "nobody", "--"]
    root = embedded_test_dir("htm-nopgv-")
    data = root / "data"
    if as_user:
        shutil.chown(root, user=pwd.getpwnam("nobody").pw_uid)
    subprocess.run([*as_user, str(pg_ctl.parent / "initdb"), "-D", str(data), "-A", "trust",
                    "-U", "postgres"], check=True, capture_output=True)
    subprocess.run([*as_user, str(pg_ctl), "-D", str(data), "-w", "-l", str(root / "log"),
                    "-o", f"-h '' -k {root}", "start"], check=True, capture_output=True)
    try:
        yield f"host={root} user=postgres dbname=postgres"
    finally:
        subprocess.run([*as_user, str(pg_ctl), "-D", str(data), "-w", "-m", "fast", "stop"],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_init_db_without_pgvector_says_how_to_get_it(
        server_without_pgvector: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["--db", server_without_pgvector, "init-db"], monkeypatch, capsys)
    assert code == 1
    error = err.splitlines()[-1]
    assert error.startswith("Error: pgvector is not installed on the server of")
    assert "install pgvector" in error and "embedded server" in error
    with pytest.raises(SchemaError, match="pgvector is not installed on the server"):
        LongTermMemory(server_without_pgvector)
    status = CliRunner().invoke(cli, ["--db", server_without_pgvector, "status"])
    assert status.exit_code == 0 and "pgvector:   not available on this server" in status.stdout


def test_a_demo_that_cannot_load_leaves_no_database(
        server_without_pgvector: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["--db", server_without_pgvector, "demo", "--out",
                              str(Path(tempfile.gettempdir()) / "never.html")],
                             monkeypatch, capsys)
    assert code == 1 and "pgvector is not installed on the server" in err
    with psycopg.connect(server_without_pgvector) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database")]
    assert not [name for name in names if name.startswith("htm_demo")], names


def test_import_sets_up_an_empty_database(empty_database_url: str, tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    build_ghostkg(path)
    result = CliRunner().invoke(cli, ["--db", empty_database_url, "import", "ghostkg",
                                      str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert "setting up the memory schema" in result.stderr
    rows = {r["table"]: r for r in json.loads(result.stdout)}
    assert rows["(total)"]["imported"] > 0


def test_import_refuses_htm_tables_without_the_additions(server_url: str,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    build_ghostkg(path)
    seed = importlib.resources.files("htm_analytics").joinpath(
        "sql/001_seed_schema.sql").read_text("utf-8")
    with temporary_database(server_url, "htm_gem_only", template=None) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(seed.encode())
            conn.execute("INSERT INTO nodes (content, content_hash, token_count) "
                         "VALUES ('a memory of the gem', 'x', 4)")
            before = conn.execute("SELECT count(*) FROM pg_class").fetchone()
        result = CliRunner().invoke(cli, ["--db", url, "import", "ghostkg", str(path)])
        assert isinstance(result.exception, SchemaError)
        message = str(result.exception)
        assert "holds HTM tables" in message and "import_records" in message
        assert "htm-analytics init-db" in message and "nothing was written" in message
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM pg_class").fetchone() == before
            assert conn.execute("SELECT count(*) FROM nodes").fetchone() == (1,)


def test_an_unknown_robot_gets_a_hint(memory_url: str) -> None:
    result = CliRunner().invoke(cli, ["--db", memory_url, "robots", "--robot", "nobody"])
    assert result.exit_code == 0, result.output
    assert "(no rows)" in result.stdout
    assert "no robot named 'nobody'" in result.stderr and "coder" in result.stderr
    # Whether or not anything is left, and for every command scoped by robot.
    mixed = CliRunner().invoke(cli, ["--db", memory_url, "robots", "--robot", "coder",
                                     "--robot", "nosuch"])
    assert mixed.exit_code == 0 and "coder" in mixed.stdout
    assert "no robot named 'nosuch'" in mixed.stderr and "'coder'" not in mixed.stderr
    for command in (["hygiene", "--check", "sensitive"], ["hygiene", "stale"], ["tag-tree"]):
        scoped = CliRunner().invoke(cli, ["--db", memory_url, *command, "--robot", "Coder"])
        assert scoped.exit_code == 0, scoped.output
        assert "no robot named 'Coder'" in scoped.stderr, command
        # A name no robot can have is blamed on the robots asked for.
        bad = CliRunner().invoke(cli, ["--db", memory_url, *command, "--robot", "x" * 300])
        assert isinstance(bad.exception, ValidationError), command
        assert bad.exception.field == "robots", command


def test_snapshot_options_and_paths_agree(ltm: LongTermMemory, database_url: str,
                                          tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    ltm.add(content="a memory", robot_id=ltm.register_robot("r"))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    written = runner.invoke(cli, ["--db", database_url, "snapshot", "memory"])
    assert written.exit_code == 0, written.output
    assert "a folder of Parquet files" in written.stdout
    assert "htm-analytics report --snapshot memory" in written.stdout
    wrong = runner.invoke(cli, ["report", "--snapshot", "memory.duckdb"])
    assert wrong.exit_code != 0 and "--snapshot memory" in wrong.output
    assert "PATH.duckdb" not in (cli.commands["snapshot"].help or "")
    code, _, err = run_main(["--db", database_url, "snapshot", "memory"], monkeypatch, capsys)
    assert code != 0 and "--overwrite" in err and "overwrite=True" not in err
    for path in ("-", ""):  # "-" became a folder named "-"; "" was taken for "."
        refused = runner.invoke(cli, ["--db", database_url, "snapshot", path])
        assert refused.exit_code == 2 and "give its path" in refused.output
    assert not (tmp_path / "-").exists()
    report = runner.invoke(cli, ["report", "--snapshot", "memory", "--out", "r.html"])
    assert report.exit_code == 0, report.output
    # Options a report on a snapshot, or without hygiene or data, would not use: refused.
    for pointless in (["report", "--snapshot", "memory", "--benchmark"],
                      ["report", "--snapshot", "memory", "--hygiene-sample", "7"],
                      ["report", "--snapshot", "memory", "--workers", "2"],
                      ["--db", database_url, "report", "--snapshot", "memory"],
                      ["--query-timeout", "5", "report", "--snapshot", "memory"],
                      ["--writer-timezone", "Asia/Tokyo", "report", "--snapshot", "memory"],
                      ["report", "--snapshot", "memory", "--data-format", "parquet"],
                      ["--db", database_url, "report", "--no-hygiene", "--hygiene-sample", "5"]):
        refused = runner.invoke(cli, pointless)
        assert refused.exit_code == 2 and "has no effect" in refused.output, pointless
    quiet = runner.invoke(cli, ["report", "--snapshot", "memory", "--no-benchmark", "--out",
                                "r2.html"])
    assert quiet.exit_code == 0, quiet.output  # asking for less is never refused


def test_eval_without_vectors_names_the_cli_option(memory_url: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"query": "a question", "relevant": [1]}) + "\n")
    code, _, err = run_main(["--db", memory_url, "eval", "retrieval", str(queries),
                              "--strategies", "vector"], monkeypatch, capsys)
    assert code == 1 and "--embedder" in err and "embedding_service" not in err


def test_bench_build_names_the_grid_points_it_skips(memory_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", memory_url, "bench", "build", "--m", "4,16",
                                      "--ef-construction", "16", "--queries", "10",
                                      "--ef-search", "20", "--out", str(tmp_path / "b.csv"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    assert {row["variant"] for row in json.loads(result.stdout)} == {"m=4,efc=16"}
    assert "skipped m=16,efc=16" in result.stderr


def test_sizes_read_as_sizes_in_a_terminal_and_as_bytes_in_json(database_url: str) -> None:
    runner = CliRunner()
    table = runner.invoke(cli, ["--db", database_url, "indexes"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    header = table.stdout.splitlines()[0].split()
    assert "size" in header and "size_bytes" not in header
    assert " kB" in table.stdout
    rows = json.loads(runner.invoke(cli, ["--db", database_url, "indexes", "--json"]).stdout)
    assert all(isinstance(row["size_bytes"], int) for row in rows)


def test_every_command_names_its_database_on_stderr(database_url: str) -> None:
    result = CliRunner().invoke(cli, ["--db", database_url, "health", "--json"])
    assert result.exit_code == 0
    assert result.stderr.startswith("database: ") and "(--db)" in result.stderr
    json.loads(result.stdout)  # stdout is the document alone


def test_help_is_fast_to_reach() -> None:
    # --help imports no analysis, report or plotting module: it starts in a fraction of the
    # time (docs/benchmarks.md has the figures).
    code = ("import sys; from htm_analytics.cli import main; sys.argv = ['htm-analytics', "
            "'--help']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('pandas', 'matplotlib', 'scipy', 'networkx', 'duckdb') "
            "if m in sys.modules]\nprint('heavy:', ','.join(heavy))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    assert done.returncode == 0, done.stderr
    assert "Usage: htm-analytics" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "heavy:"


def test_the_analysis_packages_leave_fits_graphs_and_plots_to_the_calls_that_need_them(
) -> None:
    # scipy.stats took about a second of every analysis or advice command's start,
    # matplotlib, networkx and scipy.sparse 0.6 s more (docs/benchmarks.md)
    code = ("import sys, htm_analytics.analysis, htm_analytics.advisor, htm_analytics.tuning, "
            "htm_analytics.report; print(*[m for m in ('scipy.stats', 'scipy.sparse', "
            "'matplotlib', 'networkx') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_every_help_text_prints_as_written() -> None:
    # Click does not %-format help: "95%%" printed as written.
    import click

    def helps(command: click.Command, parent: click.Context | None, name: str) -> Iterator[str]:
        context = click.Context(command, info_name=name, parent=parent)
        yield command.get_help(context)
        for sub_name, sub in getattr(command, "commands", {}).items():
            yield from helps(sub, context, sub_name)

    texts = list(helps(cli, None, "htm-analytics"))
    assert len(texts) > 30
    assert [t.splitlines()[0] for t in texts if "%%" in t or "%(" in t] == []


def test_the_spelt_out_defaults_are_the_library_ones() -> None:
    # Spelt out in the command line so that --help imports neither the driver nor pandas.
    from htm_analytics.cli import _database
    from htm_analytics.cli.bench import DEFAULT_SWEEP
    from htm_analytics.report.demo import DEMO_DATABASE
    from htm_analytics.store.connection import URL_ENVIRONMENT_VARIABLES
    from htm_analytics.tuning import DEFAULT_EF_SEARCH_SWEEP

    assert _database.URL_ENVIRONMENT_VARIABLES == URL_ENVIRONMENT_VARIABLES
    assert _database.DEMO_DATABASE == DEMO_DATABASE

    assert ",".join(map(str, DEFAULT_EF_SEARCH_SWEEP)) == DEFAULT_SWEEP

    from htm_analytics.cli import evaluate
    from htm_analytics.tuning import conversation_formats, conversations, evaluation

    assert evaluate.BENCHMARK_FORMATS == conversation_formats.BENCHMARK_FORMATS
    assert evaluate.EVALUATED_STRATEGIES == evaluation.EVALUATED_STRATEGIES
    assert evaluate.CONVERSATION_SCOPES == conversations.CONVERSATION_SCOPES

    from htm_analytics import analysis
    from htm_analytics.cli import hygiene

    assert hygiene.HYGIENE_CHECKS == analysis.HYGIENE_CHECKS
    assert hygiene.SENSITIVE_KINDS == analysis.SENSITIVE_KINDS
    assert hygiene.PAIR_CHOICES == analysis.hygiene.PAIR_CHOICES

    from htm_analytics.cli import _app
    from htm_analytics.report import REPORT_HYGIENE_SAMPLE

    assert _app.HYGIENE_SAMPLE == REPORT_HYGIENE_SAMPLE


@pytest.fixture
def own_default_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An embedded server of its own as the default one (no URL variable set)."""
    from htm_analytics.store.embedded import delete_embedded_server

    for name in ("HTM_DBURL", "HTM_DATABASE__URL", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    data_dir = embedded_test_dir("htm-default-") / "pgdata"
    monkeypatch.setenv("HTM_EMBEDDED_DIR", str(data_dir))
    yield data_dir
    delete_embedded_server(data_dir, force=True)
    shutil.rmtree(data_dir.parent, ignore_errors=True)


def test_the_default_database_follows_one_rule_and_is_named(own_default_server: Path) -> None:
    from htm_analytics.store import create_database
    from htm_analytics.store.connection import resolve_database_url

    runner = CliRunner()

    def used(*args: str) -> str:
        result = runner.invoke(cli, [*args])
        assert result.exit_code == 0, result.output
        said = [line for line in result.stderr.splitlines() if line.startswith("database: ")]
        assert len(said) == 1, result.stderr
        return said[0]

    first = used("status", "--json")  # a new server: htm, empty
    assert "/htm?" in first and "the embedded server's htm)" in first
    server = resolve_database_url(None)
    with LongTermMemory(create_database(server, "htm_demo"), init_schema=True) as demo:
        demo.add(content="a demo memory", robot_id=demo.register_robot("demo-robot"))
    assert "so the demo's htm_demo" in used("robots", "--json")
    # init-db without --db writes htm, and only the schema: readers keep the demo's.
    assert "/htm?" in used("init-db")
    assert "so the demo's htm_demo" in used("robots", "--json")
    with LongTermMemory(server) as store:  # what the README's Python snippets do
        store.add(content="my own memory", robot_id=store.register_robot("mine"))
    line = used("robots", "--json")
    assert "/htm?" in line and "the default: the embedded server's htm)" in line
    rows = json.loads(runner.invoke(cli, ["robots", "--json"]).stdout)
    assert [row["robot"] for row in rows] == ["mine"]


def test_status_csv_is_one_table_and_json_one_document(database_url: str) -> None:
    import csv
    import io

    runner = CliRunner()
    as_csv = runner.invoke(cli, ["--db", database_url, "status", "--csv"])
    assert as_csv.exit_code == 0, as_csv.output
    rows = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert rows[0] == ["table", "rows", "index", "method", "is_unique", "size_bytes"]
    assert len({len(row) for row in rows}) == 1 and len(rows) > 6
    assert {"nodes", "robots", "tags"} <= {row[0] for row in rows[1:]}
    document = json.loads(runner.invoke(cli, ["--db", database_url, "status",
                                              "--json"]).stdout)
    assert set(document) == {"database", "database_name", "chosen_by", "server", "schema",
                             "problem", "tables", "indexes"}
    assert document["server"]["postgresql"] and document["server"]["pg_trgm"]
    assert any(i["index"] == "idx_nodes_embedding" for i in document["indexes"])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_one_line(memory_url: str) -> None:
    """A full disk (/dev/full) gets one line and exit 1, not a traceback; a connection
    error (an OSError as well as the toolkit's) still says what it is; a reader that went
    away (`| head`) ends the command quietly."""
    main = "import sys; from htm_analytics.cli import main; sys.argv[0] = 'htm-analytics'; main()"

    def run(*args: str, stdout: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", main, *args], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())

    with open("/dev/full", "w") as full:
        for args in (["tags", "--json"], ["robots", "--csv"], ["status"]):
            done = run("--db", memory_url, *args, stdout=full)
            assert done.returncode == 1, done.stderr
            assert "Traceback" not in done.stderr, done.stderr
            assert done.stderr.strip().splitlines()[-1] == \
                "Error: could not write the output: No space left on device", args
    missing = make_conninfo(memory_url, dbname="no_such_database_of_htm")
    done = run("--db", missing, "tags", stdout=subprocess.PIPE)
    assert done.returncode == 1 and "could not talk to" in done.stderr, done.stderr
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL)
    done = run("--db", memory_url, "tags", "--limit", "5000", stdout=reader.stdin)
    reader.communicate()
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr


def test_no_number_option_takes_nan() -> None:
    """click's FloatRange lets NaN through (no comparison holds for it): every ranged number
    option of every command refuses it before any work, and no such option is plain."""
    import click

    def commands(command: click.Command, path: list[str]) -> Iterator[tuple[list[str],
                                                                            click.Command]]:
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from commands(sub, [*path, name])

    checked = 0
    for path, command in commands(cli, []):
        for param in command.params:
            if not isinstance(param, click.Option) or not isinstance(param.type,
                                                                      click.FloatRange):
                continue
            assert isinstance(param.type, cli_package._output.NumberRange), param.name
            args = (["--db", "postgresql://nobody@/none", param.opts[0], "nan"] if not path
                    else [*path, param.opts[0], "nan"])
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 2 and "not NaN" in result.output, (path, result.output)
            checked += 1
    assert checked >= 6


def test_an_open_end_past_the_calendar_names_the_end_given() -> None:
    """--since alone past the last day a memory can have (or --until alone before the first)
    names that option, not an end the user never gave."""
    for option, value, said in (("--since", "9999-12-31", "past the last day"),
                                ("--until", "0001-01-01", "before the first day")):
        result = CliRunner().invoke(cli, ["--db", "postgresql://nobody@/none", "robots",
                                          option, value])
        assert result.exit_code == 2, result.output
        assert f"Invalid value for {option}: {value} is {said}" in result.output


@pytest.mark.parametrize("args, option", [
    (["tags", "--min-shared", "0"], "--min-shared"),
    (["tags", "--level", "0"], "--level"),
    (["hygiene", "supersession", "--max-tag-memories", "1"], "--max-tag-memories"),
    (["hygiene", "growth", "--horizon", "0"], "--horizon"),
    (["robots", "--robot", " "], "--robot"),
    # Arguments of other names: they said "older_than_days: ... or a timedelta".
    (["hygiene", "retention", "--expire-after", "0"], "--expire-after"),
    (["hygiene", "stale", "--days", "1e308"], "--days"),
])
def test_bad_input_found_by_the_library_is_a_usage_error_naming_the_option(
        database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        args: list[str], option: str) -> None:
    """Checks the library makes after click's: they said ``min_shared:`` and exited 1."""
    code, _, err = run_main(["--db", database_url, *args], monkeypatch, capsys)
    assert code == 2, err
    assert f"Error: Invalid value for '{option}': " in err and "timedelta" not in err
