"""Where a history is kept: a folder of Parquet files gives the same frames and drift findings
as a DuckDB file, a history of an older schema version is read and brought up to date, one of
this version is read by the next and refused by the previous one, and bad places get typed
errors naming the field."""

from __future__ import annotations

import json
import shutil
from functools import partial
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from cli_helpers import run_main
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from htm_analytics import HistoryVersionError, LongTermMemory, NotAHistoryError, ValidationError
from htm_analytics.advisor import (
    HistoryFolder,
    collect_sample,
    drift_findings,
    history,
    split_statements,
)
from htm_analytics.advisor.history import _HNSW_INDEXES
from htm_analytics.cli import cli
from htm_analytics.store import history as history_module
from htm_analytics.store.history import (
    HISTORY_SCHEMA_VERSION,
    HISTORY_TABLES,
    HistoryTable,
    append_sample,
    history_location,
    read_history,
)
from htm_analytics.store.history_folder import history_schema

LOGGED = ["logged_queries", "logged_recall", "logged_recall_low", "logged_recall_high",
          "logged_recall_queries"]
# The columns of samples each schema version added.
# The columns each schema version added, per table.
ADDED = {2: {"samples": LOGGED}, 3: {"samples": ["recall_index"]},
         4: {"sample_statements": ["stats_since"]}, 5: {"samples": ["statements_evicted"]}}



def _statements(text: str) -> list[str]:
    """The statements of a finding's ``sql``, without their semicolons."""
    return [statement.rstrip(";") for statement in split_statements(text)]

def _collect(url: str, path) -> dict[str, pd.DataFrame]:
    with LongTermMemory(url, read_only=True) as store:
        return collect_sample(store, path, recall_queries=30)


def _as_input(sample: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """A collected sample as append_sample takes it (without its sample_id)."""
    return {name: frame.drop(columns="sample_id") for name, frame in sample.items()}


def test_a_parquet_folder_reads_as_the_duckdb_file(history_reader_url, database_url, db,
                                                   tmp_path):
    """The same three samples (the last with recall degraded for real) in a DuckDB file and
    in a Parquet folder: the same frames and the same drift findings, whose rebuild is of the
    native index the searches walked; a version-2 sample names none, and none is guessed."""
    file, folder = tmp_path / "history.duckdb", tmp_path / "history"
    with LongTermMemory(database_url) as store:
        native = store.create_native_index(16)
    for step in range(3):
        if step == 2:
            db.execute(sql.SQL("ALTER DATABASE {} SET hnsw.ef_search = 1").format(
                sql.Identifier(db.info.dbname)))
        sample = _collect(history_reader_url, file)
        assert append_sample(HistoryFolder(folder), _as_input(sample)) == step + 1
    from_file, from_folder = history(file), history(f"{folder}/")
    for frame in ("samples", "growth", "index_usage", "recall", "robots", "statements"):
        pd.testing.assert_frame_equal(getattr(from_file, frame), getattr(from_folder, frame))
    drift = drift_findings(from_folder)
    pd.testing.assert_frame_equal(drift_findings(from_file), drift)
    assert "recall_drift" in set(drift["check"])
    assert from_folder.samples["recall_index"].tolist() == [native] * 3
    # The live search walks the native index (EXPLAIN), and the rebuild names it.
    with LongTermMemory(history_reader_url, read_only=True) as store, \
            store.tuning_session() as session:
        _, vectors = session.stored_vectors(16)
        walked = session.knn(vectors[:3], dimension=16, k=10, ef_search=40)
    assert walked["used_index"] and walked["index"] == native == "idx_nodes_embedding_16"
    rebuild = drift.set_index("check").loc["recall_drift"]
    assert rebuild["object"] == f"public.{native}"
    assert _statements(rebuild["sql"]) == [
        "SHOW hnsw.ef_search", 'REINDEX INDEX CONCURRENTLY "public"."idx_nodes_embedding_16"']
    db.execute(_statements(rebuild["sql"])[-1])  # it runs as written
    # The same history as version 2 wrote it: the sample does not say which index it
    # searched, so the finding lists the HNSW indexes instead of naming one.
    old_file = tmp_path / "old.duckdb"
    shutil.copyfile(file, old_file)
    _downgrade(old_file, 2)
    old_drift = drift_findings(history(old_file)).set_index("check")
    assert _statements(old_drift.loc["recall_drift", "sql"]) == [
        "SHOW hnsw.ef_search", _HNSW_INDEXES]
    assert old_drift.loc["recall_drift", "object"] == "vector index"
    assert not old_drift["sql"].str.contains("REINDEX").any()
    listed = [row[0] for row in db.execute(_HNSW_INDEXES)]
    assert listed == ["idx_nodes_embedding", "idx_nodes_embedding_16"]
    # Plain Parquet, one folder per sample, readable by any Parquet reader.
    assert sorted(p.name for p in folder.iterdir()) == [
        "history_meta.parquet", "sample_000001", "sample_000002", "sample_000003"]
    assert sorted(p.name for p in (folder / "sample_000003").iterdir()) == sorted(
        f"{table}.parquet" for table in HISTORY_TABLES)
    recall = pq.read_table(folder / "sample_000003" / "samples.parquet").column("recall")
    assert recall.to_pylist() == [from_file.recall["recall"].iloc[-1]]
    # A sample whose samples.parquet never arrived (a collect that died) is not read, and
    # its number is not given again.
    (folder / "sample_000004").mkdir()
    shutil.copyfile(folder / "sample_000003" / "sample_robots.parquet",
                    folder / "sample_000004" / "sample_robots.parquet")
    assert len(read_history(folder)["samples"]) == 3
    assert append_sample(HistoryFolder(folder), _as_input(sample)) == 5

    runner = CliRunner()
    done = runner.invoke(cli, ["--db", history_reader_url, "collect", "--history",
                               str(tmp_path / "by-cli") + "/", "--recall-queries", "20"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "by-cli" / "sample_000001" / "samples.parquet").is_file()
    assert "no logged queries" in done.stdout
    again = runner.invoke(cli, ["--db", history_reader_url, "collect", "--history",
                                str(tmp_path / "by-cli"), "--history-format", "parquet",
                                "--recall-queries", "20"])
    assert again.exit_code == 0, again.output
    shown = runner.invoke(cli, ["history", "--history", str(tmp_path / "by-cli"), "--what",
                                "recall", "--json"])
    assert [row["sample_id"] for row in json.loads(shown.stdout)] == [1, 2]


def _added_since(version: int, table: str = "samples") -> list[str]:
    """The columns of ``table`` added by the versions after ``version``."""
    return [column for added, tables in ADDED.items() if added > version
            for column in tables.get(table, [])]


def _downgrade(location, version: int) -> None:
    """Make a history written by this release look as schema ``version`` wrote it: without
    the columns the later versions added."""
    dropped = {table: _added_since(version, table) for table in ("samples", "sample_statements")}
    if isinstance(location, HistoryFolder):
        with duckdb.connect() as con:
            for home in location.path.glob("sample_*"):
                for table, columns in dropped.items():
                    target, old = home / f"{table}.parquet", home / "old.parquet"
                    if columns and target.exists():
                        con.read_parquet(str(target)).project(
                            f"* EXCLUDE ({', '.join(columns)})").to_parquet(str(old))
                        old.replace(target)
            con.sql(f"SELECT 'schema_version' AS key, '{version}' AS value").to_parquet(
                str(location.path / "history_meta.parquet"))
        return
    with duckdb.connect(str(location)) as con:
        for table, columns in dropped.items():
            for column in columns:
                con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("UPDATE history_meta SET value = ? WHERE key = 'schema_version'",
                    [str(version)])


@pytest.mark.parametrize("version", [1, 2, 3, 4])
@pytest.mark.parametrize("where", ["history.duckdb", "history/"])
def test_an_older_history_is_read_and_brought_up_to_date(history_reader_url, tmp_path, where,
                                                         version, statement_statistics):
    location = history_location(f"{tmp_path}/{where}")
    _collect(history_reader_url, location)
    _downgrade(location, version)
    old = read_history(location)
    for table in ("samples", "sample_statements"):  # read, the added columns NULL
        assert old[table][_added_since(version, table)].isna().all().all()
    assert len(history(location).recall) == 1
    _collect(history_reader_url, location)  # this release's collect adds the columns
    frames = history(location)
    assert frames.samples["sample_id"].tolist() == [1, 2]
    assert frames.samples["logged_queries"].isna().tolist() == [version < 2, False]
    assert frames.samples["logged_queries"].iloc[-1] == 0  # the log is there, and empty
    # A sample of version 1 or 2 does not say which index its recall searched; the new one
    # does, and says since when pg_stat_statements counted each statement.
    assert frames.samples["recall_index"].isna().tolist() == [version < 3, False]
    dated = read_history(location)["sample_statements"].groupby("sample_id")["stats_since"]
    assert dated.apply(lambda since: since.notna().all()).tolist() == \
        ([version >= 4, True] if statement_statistics.dated else [False] * len(dated))
    assert frames.recall["recall_index"].iloc[-1] == "idx_nodes_embedding"
    assert frames.samples["statements_evicted"].isna().tolist() == [
        version < 5, not statement_statistics.recorded]
    assert frames.recall["recall"].notna().all()
    if isinstance(location, HistoryFolder):
        meta = pq.read_table(location.path / "history_meta.parquet").to_pylist()
    else:
        with duckdb.connect(str(location), read_only=True) as con:
            meta = [{"key": k, "value": v}
                    for k, v in con.execute("SELECT * FROM history_meta").fetchall()]
    # Brought up to this release's version: the one that added the last columns.
    assert max(ADDED) == HISTORY_SCHEMA_VERSION
    assert meta == [{"key": "schema_version", "value": str(HISTORY_SCHEMA_VERSION)}]


@pytest.mark.parametrize("where", ["history.duckdb", "history/"])
def test_a_history_of_this_version_is_read_by_the_next(history_reader_url, tmp_path,
                                                       monkeypatch, where):
    location = history_location(f"{tmp_path}/{where}")
    sample = _collect(history_reader_url, location)
    assert sample["samples"]["recall_index"].tolist() == ["idx_nodes_embedding"]
    monkeypatch.setattr(history_module, "HISTORY_SCHEMA_VERSION", HISTORY_SCHEMA_VERSION - 1)
    with pytest.raises(HistoryVersionError, match=f"holds history schema version "
                       f"{HISTORY_SCHEMA_VERSION}; this release reads up to "
                       f"{HISTORY_SCHEMA_VERSION - 1}"):
        read_history(location)  # the previous release refuses it
    monkeypatch.setattr(history_module, "HISTORY_SCHEMA_VERSION", HISTORY_SCHEMA_VERSION + 1)
    read = read_history(location)["samples"]  # the next release reads it
    assert read["recall_index"].tolist() == ["idx_nodes_embedding"]
    append_sample(location, _as_input(sample))  # and writes its own version there
    monkeypatch.undo()
    with pytest.raises(HistoryVersionError, match="upgrade htm-analytics"):
        read_history(location)  # which this one refuses rather than misread
    with pytest.raises(HistoryVersionError, match="upgrade htm-analytics"):
        append_sample(location, _as_input(sample))


def test_bad_places_are_refused_by_name(history_reader_url, tmp_path):
    sample = _as_input(_collect(history_reader_url, tmp_path / "good.duckdb"))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a history")
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    (crowded / "photo.jpg").write_bytes(b"\xff\xd8")
    cases = [(HistoryFolder(a_file), "is a file"),
             (HistoryFolder(a_file / "history"), "cannot write the history folder"),
             (a_file / "history.duckdb", "cannot write the history"),
             (f"{crowded}/", "not a history folder")]
    with duckdb.connect(str(tmp_path / "other.duckdb")) as con:
        con.execute("CREATE TABLE photos (id INTEGER)")
    cases.append((tmp_path / "other.duckdb", "not a history file"))
    for where, message in cases:
        with pytest.raises(ValidationError, match=message) as raised:
            append_sample(where, sample)
        assert raised.value.field == "history"
    assert sorted(p.name for p in crowded.iterdir()) == ["photo.jpg"]  # nothing written
    with pytest.raises(ValidationError, match="no history folder") as raised:
        read_history(HistoryFolder(tmp_path / "missing"))
    assert raised.value.field == "history"
    with pytest.raises(HistoryVersionError, match="not a history") as raised:
        read_history(crowded)
    assert isinstance(raised.value, ValidationError) and raised.value.field == "history"
    with pytest.raises(ValidationError) as raised:
        history_location(tmp_path / "x", "csv")
    assert raised.value.field == "history_format"
    assert not (tmp_path / "missing").exists()  # reads create nothing


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_an_older_history_in_a_schema_is_brought_up_to_date(history_reader_url, database_url,
                                                            db, version,
                                                            statement_statistics):
    runner = CliRunner()

    def collect() -> None:
        done = runner.invoke(cli, ["--db", history_reader_url, "collect", "--history-schema",
                                   "kept", "--history-db", database_url,
                                   "--recall-queries", "5"])
        assert done.exit_code == 0, done.output

    collect()
    dropped = {table: _added_since(version, table) for table in ("samples", "sample_statements")}
    for table, columns in dropped.items():
        for column in columns:
            db.execute(sql.SQL("ALTER TABLE kept.{} DROP COLUMN {}").format(
                sql.Identifier(table), sql.Identifier(column)))
    db.execute("UPDATE kept.history_meta SET value = %s", [str(version)])
    target = history_module.HistoryTable(database_url, "kept")
    old = read_history(target)
    for table, columns in dropped.items():
        assert old[table][columns].isna().all().all()
    collect()
    frames = history(target)
    assert frames.samples["logged_queries"].isna().tolist() == [version < 2, False]
    assert frames.samples["recall_index"].isna().tolist() == [version < 3, False]
    dated = read_history(target)["sample_statements"].groupby("sample_id")["stats_since"]
    assert dated.apply(lambda since: since.notna().all()).tolist() == \
        ([version >= 4, True] if statement_statistics.dated else [False] * len(dated))
    assert frames.samples["recall_index"].iloc[-1] == "idx_nodes_embedding"
    # A sample before version 5 does not say what pg_stat_statements evicted; the new one
    # does where the server records statements.
    assert frames.samples["statements_evicted"].isna().tolist() == [
        version < 5, not statement_statistics.recorded]
    assert db.execute("SELECT value FROM kept.history_meta").fetchone()[0] == \
        str(HISTORY_SCHEMA_VERSION)


def test_history_location_rules(tmp_path):
    (tmp_path / "folder").mkdir()
    assert isinstance(history_location(tmp_path / "folder"), HistoryFolder)
    assert isinstance(history_location(f"{tmp_path}/new/"), HistoryFolder)
    assert isinstance(history_location(tmp_path / "new", "parquet"), HistoryFolder)
    assert history_location(tmp_path / "h.duckdb") == Path(tmp_path / "h.duckdb")
    with pytest.raises(ValidationError, match="is a folder") as raised:
        history_location(tmp_path / "folder", "duckdb")
    assert raised.value.field == "history"


# --- places that are not a history, or not a whole one ----------------------------------------

def _blank_sample() -> dict[str, pd.DataFrame]:
    """A sample as append_sample takes it, without a database: one row of samples (no recall
    measured), the other tables empty."""
    with history_schema() as con:
        columns = {table: [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]
                   for table in HISTORY_TABLES}
    sample = {table: pd.DataFrame(columns=[c for c in names if c != "sample_id"])
              for table, names in columns.items()}
    sample["samples"] = pd.DataFrame([{"collected_at": pd.Timestamp("2025-01-01", tz="UTC"),
                                       "database": "memory"}])
    return sample


def _refused(call, match: str) -> NotAHistoryError:
    """The error ``call()`` raises: not a history, naming the field history, in one line."""
    with pytest.raises(NotAHistoryError, match=match) as raised:
        call()
    assert isinstance(raised.value, HistoryVersionError)  # as these errors always were
    assert isinstance(raised.value, ValidationError) and raised.value.field == "history"
    assert "\n" not in str(raised.value)
    return raised.value


def test_what_cannot_be_opened_as_a_history_is_refused_alike(tmp_path):
    """A text file or an empty file named .duckdb, a folder of other files: history() and
    collect both refuse them naming the field history."""
    text, empty, crowded = tmp_path / "notes.duckdb", tmp_path / "empty.duckdb", \
        tmp_path / "crowded"
    text.write_text("not a history")
    empty.write_bytes(b"")
    crowded.mkdir()
    (crowded / "photo.jpg").write_bytes(b"\xff\xd8")
    for where in (text, empty):
        _refused(partial(history, where), "cannot open the history")
        with pytest.raises(ValidationError) as raised:
            append_sample(where, _blank_sample())
        assert raised.value.field == "history"
    _refused(lambda: history(crowded), "not a history")
    with pytest.raises(ValidationError) as raised:
        append_sample(crowded, _blank_sample())
    assert raised.value.field == "history"


def test_a_schema_version_that_is_no_version_is_refused(tmp_path):
    """Whatever history_meta.schema_version holds, a history reads (a version up to this
    release's), or is refused with a typed error, before collect writes anything."""
    file, folder = tmp_path / "history.duckdb", HistoryFolder(tmp_path / "history")
    for where in (file, folder):
        append_sample(where, _blank_sample())

    def set_version(value: str | None) -> None:
        pd.DataFrame({"key": ["schema_version"], "value": pd.Series([value], dtype=object)}
                     ).to_parquet(folder.path / "history_meta.parquet", index=False)
        if value is not None:
            with duckdb.connect(str(file)) as con:
                con.execute("UPDATE history_meta SET value = ?", [value])

    @settings(max_examples=60)
    @given(st.one_of(st.sampled_from(["abc", "", "3.5", "-1", "0", " 5 ", "\u0663", "1e0",
                                      str(HISTORY_SCHEMA_VERSION + 1)]), st.none(),
                     st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"),
                              max_size=6)))
    def check(value: str | None) -> None:
        set_version(value)
        readable = value is not None and value.strip().isascii() \
            and value.strip().isdigit() and 1 <= int(value) <= HISTORY_SCHEMA_VERSION
        for where in ((file, folder) if value is not None else (folder,)):
            if readable:
                assert len(read_history(where)["samples"]) == 1
                continue
            with pytest.raises(HistoryVersionError) as raised:
                read_history(where)
            assert "\n" not in str(raised.value)
            if not isinstance(raised.value, NotAHistoryError):
                assert "upgrade htm-analytics" in str(raised.value)
            with pytest.raises(type(raised.value)):
                append_sample(where, _blank_sample())
        set_version(str(HISTORY_SCHEMA_VERSION))
        for where in (file, folder):  # nothing was written
            assert len(read_history(where)["samples"]) == 1

    check()
    set_version("abc")
    _refused(lambda: history(file), "'abc', not a version number")
    _refused(lambda: history(folder), "'abc', not a version number")


@pytest.mark.parametrize("table", HISTORY_TABLES)
def test_a_history_missing_a_table_is_refused_by_name(tmp_path, table):
    file, folder = tmp_path / "history.duckdb", HistoryFolder(tmp_path / "history")
    for where in (file, folder):
        append_sample(where, _blank_sample())
    with duckdb.connect(str(file)) as con:
        con.execute(f"DROP TABLE {table}")
    _refused(lambda: history(file), f"incomplete.*{table}")
    lost = folder.path / "sample_000001" / f"{table}.parquet"
    if table != "samples":  # without samples.parquet, the sample is not committed: not read
        lost.unlink()
        _refused(lambda: history(folder), f"incomplete.*{table}")
    lost.write_text("damaged")
    _refused(lambda: history(folder), f"cannot read the history.*{table}")


def test_a_history_schema_missing_a_table_is_refused_by_name(database_url, db):
    target = HistoryTable(database_url, "kept")
    append_sample(target, _blank_sample())
    db.execute("DROP TABLE kept.sample_robots")
    _refused(lambda: history(target), "incomplete.*sample_robots")
    db.execute("UPDATE kept.history_meta SET value = 'abc'")
    _refused(lambda: history(target), "'abc', not a version number")
    with pytest.raises(NotAHistoryError, match="'abc', not a version number"):
        append_sample(target, _blank_sample())
    assert db.execute("SELECT value FROM kept.history_meta").fetchone()[0] == "abc"


def test_a_corrupt_history_meta_is_one_line(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "history"
    append_sample(HistoryFolder(folder), _blank_sample())
    (folder / "history_meta.parquet").write_text("damaged")
    _refused(lambda: history(folder), "cannot read .*history_meta.parquet")
    _refused(lambda: append_sample(HistoryFolder(folder), _blank_sample()),
             "cannot read .*history_meta.parquet")
    code, _, err = run_main(["history", "--history", str(folder)], monkeypatch, capsys)
    assert code == 1 and err.startswith("Error: history: cannot read ")
    assert err.count("\n") == 1 and "LINE 1" not in err


def _every_use(where: str) -> list:
    """Each way the library reads or writes the history at ``where``."""
    return [lambda: history(where), lambda: read_history(where),
            lambda: append_sample(where, _blank_sample()),
            lambda: read_history(HistoryFolder(where)),
            lambda: append_sample(HistoryFolder(where), _blank_sample())]


def test_a_path_the_system_cannot_use_is_refused_by_name(tmp_path, monkeypatch, capsys):
    """A file name too long for the file system, a home folder of nobody: ValidationError
    naming history, from the library and in one line from the CLI (never an OSError)."""
    long_file, long_folder = f"{tmp_path}/{'x' * 300}.duckdb", f"{tmp_path}/{'x' * 300}/"
    for where in (long_file, long_folder, f"{tmp_path}/{'x' * 300}/history.duckdb",
                  "~no-such-user-of-htm/history.duckdb"):
        for call in _every_use(where):
            with pytest.raises(ValidationError) as raised:
                call()
            assert raised.value.field == "history", where
    with pytest.raises(ValidationError, match="File name too long") as raised:
        history_location(long_file)
    assert raised.value.field == "history"
    for command in (["history", "--history", long_file],
                    ["--db", "postgresql://nobody@127.0.0.1:9/none", "collect", "--history",
                     long_file]):
        code, _, err = run_main(command, monkeypatch, capsys)
        assert code == 1 and err.startswith("Error: history: ") and err.count("\n") == 1, err
