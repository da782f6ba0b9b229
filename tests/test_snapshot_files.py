"""What is not a snapshot, or not a whole one, is refused when it is opened, naming ``path``
in one line (a DuckDB file of other tables, a Parquet folder with a corrupt file, a table of
other columns, an empty snapshot_info); a DuckDB error while a snapshot is read later is a
typed error too; and a path the file system cannot use (a name too long) is a
ValidationError naming the argument, from export_snapshot, Snapshot and the output paths,
never an OSError."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from cli_helpers import run_main
from fixtures_db import temporary_database

import htm_analytics as ha
from htm_analytics import HTMError, LongTermMemory, Snapshot, ValidationError, export_snapshot
from htm_analytics.report.build import Report
from htm_analytics.store import snapshot as snapshot_module
from htm_analytics.store.file_paths import output_path, writable_folder

_LONG = "a" * 300


@pytest.fixture(scope="module")
def snapshots(server_url: str, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[dict[str, Path]]:
    """A small memory exported once as a DuckDB file and as a Parquet folder."""
    folder = tmp_path_factory.mktemp("snapshots")
    with temporary_database(server_url, "htm_snapshot_files") as url, \
            LongTermMemory(url) as store:
        robot = store.register_robot("scout")
        for n in range(4):
            store.add(content=f"memory number {n}", robot_id=robot, tags=["t:a", "t:b"])
        yield {"duckdb": export_snapshot(store, folder / "memory.duckdb"),
               "parquet": export_snapshot(store, folder / "memory")}


@pytest.fixture
def folder_copy(snapshots: dict[str, Path], tmp_path: Path) -> Path:
    """A copy of the good Parquet snapshot, to damage."""
    return Path(shutil.copytree(snapshots["parquet"], tmp_path / "copy"))


@pytest.fixture
def file_copy(snapshots: dict[str, Path], tmp_path: Path) -> Path:
    """A copy of the good DuckDB snapshot, to damage."""
    return Path(shutil.copy(snapshots["duckdb"], tmp_path / "copy.duckdb"))


def _refused(where: Path | str, match: str) -> ValidationError:
    """Snapshot(where) refuses it: a ValidationError naming path, in one line."""
    with pytest.raises(ValidationError, match=match) as raised:
        Snapshot(where)
    assert raised.value.field == "path", raised.value
    assert "\n" not in str(raised.value)
    return raised.value


def _one_error_line(err: str) -> str:
    """The report command's error: its last line (after ``snapshot: PATH``), no traceback."""
    lines = err.splitlines()
    assert "Traceback" not in err and lines[:-1] == [line for line in lines[:-1]
                                                     if line.startswith("snapshot: ")], err
    return lines[-1]


def _helpers() -> list[Callable[[Snapshot], Any]]:
    return [lambda sn: sn.info, lambda sn: sn.table_counts(), ha.tag_cooccurrence,
            ha.popular_tags, ha.remember_trends, ha.robot_activity]


# --- S1: a DuckDB file that is not a snapshot -------------------------------------------------

def test_a_duckdb_file_of_other_tables_is_refused_when_opened(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    _refused(other, "not a snapshot")
    code, _, err = run_main(["report", "--snapshot", str(other), "--out",
                           str(tmp_path / "r.html")], monkeypatch, capsys)
    assert code == 1 and _one_error_line(err).startswith("Error: path: "), err
    assert "not a snapshot" in err
    assert not (tmp_path / "r.html").exists()


def test_a_duckdb_snapshot_missing_a_table_or_column_is_refused(file_copy: Path) -> None:
    with duckdb.connect(str(file_copy)) as con:
        con.execute("DROP TABLE tags")
    _refused(file_copy, "no tags")


def test_a_duckdb_snapshot_of_other_columns_is_refused(file_copy: Path) -> None:
    with duckdb.connect(str(file_copy)) as con:
        con.execute("ALTER TABLE nodes DROP COLUMN created_at")
    _refused(file_copy, "nodes.*created_at")


def test_a_file_that_is_no_duckdb_database_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database")
    _refused(text, "cannot open the snapshot")


# --- S2: a Parquet folder with a damaged file -------------------------------------------------

def test_a_corrupt_parquet_file_is_refused_when_opened(
        folder_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (folder_copy / "tags.parquet").write_bytes(os.urandom(100))
    _refused(folder_copy, "tags.parquet")
    code, _, err = run_main(["report", "--snapshot", str(folder_copy), "--out",
                           str(tmp_path / "r.html")], monkeypatch, capsys)
    assert code == 1 and "tags.parquet" in _one_error_line(err), err


def test_a_parquet_file_of_another_table_is_refused(folder_copy: Path) -> None:
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT 1 AS x) TO '{folder_copy / 'nodes.parquet'}' "
                    "(FORMAT parquet)")
    _refused(folder_copy, "nodes.parquet has no columns id, content")


def test_a_column_of_another_type_is_refused(folder_copy: Path) -> None:
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT 'x' AS exported_at, 's' AS source, 1 AS schema_version, "
                    f"'17' AS postgresql, '0.8' AS pgvector) TO "
                    f"'{folder_copy / 'snapshot_info.parquet'}' (FORMAT parquet)")
    _refused(folder_copy, "column exported_at of snapshot_info.parquet is VARCHAR, not "
                          "TIMESTAMP WITH TIME ZONE")


@pytest.mark.parametrize("kind", ["parquet", "duckdb"])
def test_a_snapshot_info_without_its_row_is_refused(kind: str, folder_copy: Path,
                                                    file_copy: Path) -> None:
    if kind == "parquet":
        target = folder_copy
        with duckdb.connect() as con:
            info = folder_copy / "snapshot_info.parquet"
            con.execute(f"COPY (SELECT * FROM '{info}' LIMIT 0) TO '{info}.new' "
                        "(FORMAT parquet)")
        os.replace(f"{info}.new", info)
    else:
        target = file_copy
        with duckdb.connect(str(file_copy)) as con:
            con.execute("DELETE FROM snapshot_info")
    _refused(target, r"snapshot_info(\.parquet)? has no row")


def test_a_duckdb_error_while_reading_is_a_typed_error(folder_copy: Path) -> None:
    """A snapshot damaged after it was opened: every helper raises an HTMError (naming
    path), never DuckDB's own."""
    with Snapshot(folder_copy) as sn:
        (folder_copy / "tags.parquet").write_bytes(os.urandom(100))
        (folder_copy / "nodes.parquet").unlink()
        (folder_copy / "snapshot_info.parquet").unlink()
        (folder_copy / "robots.parquet").unlink()
        for helper in _helpers():
            with pytest.raises(ValidationError, match="cannot read the snapshot") as raised:
                helper(sn)
            assert raised.value.field == "path" and "\n" not in str(raised.value)


def test_a_closed_snapshot_is_a_typed_error(snapshots: dict[str, Path]) -> None:
    sn = Snapshot(snapshots["duckdb"])
    sn.close()
    for helper in _helpers():
        with pytest.raises(HTMError, match="closed"):
            helper(sn)


def test_good_snapshots_still_open(snapshots: dict[str, Path]) -> None:
    for path in snapshots.values():
        with Snapshot(path) as sn:
            assert sn.info["schema_version"] >= 1
            assert int(sn.table_counts().set_index("table")["rows"]["nodes"]) == 4
            assert not ha.tag_cooccurrence(sn).empty


# --- S3: names the file system cannot use ---------------------------------------------------

@pytest.mark.parametrize("name", [f"{_LONG}.duckdb", _LONG, f"{_LONG}/memory.duckdb"])
def test_a_name_too_long_is_refused_by_name(snapshots: dict[str, Path], tmp_path: Path,
                                            server_url: str, name: str) -> None:
    with temporary_database(server_url, "htm_snapshot_long") as url, \
            LongTermMemory(url) as store:
        with pytest.raises(ValidationError, match="too long") as raised:
            export_snapshot(store, tmp_path / name)
        assert raised.value.field == "path" and "\n" not in str(raised.value)
        with pytest.raises(ValidationError, match="too long") as raised:
            export_snapshot(store, tmp_path / name, overwrite=True)
        assert raised.value.field == "path"
    _refused(tmp_path / name, "too long")
    assert list(tmp_path.iterdir()) == []


def test_a_long_name_that_fits_is_written(snapshots: dict[str, Path], server_url: str,
                                          tmp_path: Path) -> None:
    """A name that fits the file system, but not with the work folder's prefix and suffix
    around it, is written all the same."""
    name = "b" * 250
    with temporary_database(server_url, "htm_snapshot_long") as url, \
            LongTermMemory(url) as store:
        target = export_snapshot(store, tmp_path / name)
    assert target.is_dir() and [p.name for p in tmp_path.iterdir()] == [name]
    with Snapshot(target) as sn:
        assert sn.info["schema_version"] >= 1


@pytest.mark.parametrize("where", [f"{_LONG}.html", f"{_LONG}/r.html",
                                   "~no-such-user-of-htm/r.html"])
def test_output_paths_refuse_what_the_system_cannot_use(tmp_path: Path, where: str) -> None:
    target = where if where.startswith("~") else str(tmp_path / where)
    for call, field in ((lambda: output_path(target, field="out"), "out"),
                        (lambda: output_path(target, field="out", make_folder=False), "out"),
                        (lambda: writable_folder(target, field="folder"), "folder")):
        with pytest.raises(ValidationError) as raised:
            call()
        assert raised.value.field == field and "\n" not in str(raised.value)
    report = Report(title="t", source="s", generated_at=dt.datetime.now(dt.UTC), facts={},
                    sections=[])
    with pytest.raises(ValidationError) as raised:
        report.write_html(target)
    assert raised.value.field == "path"


def test_the_report_command_refuses_a_long_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        snapshots: dict[str, Path]) -> None:
    code, _, err = run_main(["report", "--snapshot", str(snapshots["duckdb"]), "--out",
                           str(tmp_path / f"{_LONG}.html")], monkeypatch, capsys)
    assert code == 2 and "too long" in err and "Traceback" not in err, err
    # A snapshot to read, or to write, under such a name: a usage error naming the option.
    for args, option in ((["report", "--snapshot", str(tmp_path / f"{_LONG}.duckdb")],
                          "--snapshot"),
                         (["--db", "postgresql://nobody@/none", "snapshot",
                           str(tmp_path / f"{_LONG}.duckdb")], "PATH")):
        code, _, err = run_main(args, monkeypatch, capsys)
        assert code == 2 and f"Invalid value for {option}" in err and "too long" in err, err


def test_a_duckdb_error_while_writing_is_a_typed_error(server_url: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """DuckDB's own error while the snapshot is written (a disk filling up): a
    ValidationError naming path, in one line, and nothing left behind."""
    def full(con: duckdb.DuckDBPyConnection) -> None:
        raise duckdb.IOException("IO Error: Could not write file: No space left on device\n"
                                 "LINE 1: ...")

    monkeypatch.setattr(snapshot_module, "_create_tables", full)
    with temporary_database(server_url, "htm_snapshot_full") as url, \
            LongTermMemory(url) as store:
        for target in (tmp_path / "memory.duckdb", tmp_path / "memory"):
            with pytest.raises(ValidationError, match="No space left on device") as raised:
                export_snapshot(store, target)
            assert raised.value.field == "path" and "\n" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []
