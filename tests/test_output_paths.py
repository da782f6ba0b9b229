"""Where the toolkit writes: a path it cannot write is refused with the argument's name,
before the work that produces the file; nothing escapes as a bare OSError."""

from __future__ import annotations

import datetime as dt
import io
import sys
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest
from click.testing import CliRunner

from htm_analytics import LongTermMemory, ValidationError
from htm_analytics.analysis import write_tag_graph
from htm_analytics.cli import cli
from htm_analytics.cli._app import main
from htm_analytics.report import Report
from htm_analytics.report.render import Section
from htm_analytics.store import export_snapshot
from htm_analytics.tuning import benchmark_recall


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    """A plain file: no folder can be made inside it, whoever runs the tests (root too)."""
    path = tmp_path / "a-file.txt"
    path.write_text("mine")
    return path


def _report() -> Report:
    return Report(title="t", source="s", generated_at=dt.datetime.now(dt.UTC), facts={},
                  sections=[Section(key="k", title="K",
                                    data={"rows": pd.DataFrame({"x": [1]})})])


def _refused(call, field: str) -> ValidationError:
    with pytest.raises(ValidationError) as refused:
        call()
    assert refused.value.field == field, refused.value
    return refused.value


def test_report_writers_refuse_what_they_cannot_write(tmp_path: Path, a_file: Path) -> None:
    report = _report()
    _refused(lambda: report.write_html(tmp_path), "path")  # a folder
    assert "cannot write" in str(_refused(lambda: report.write_html(a_file / "r.html"),
                                          "path"))
    _refused(lambda: report.write_markdown(a_file / "r.md"), "path")
    _refused(lambda: report.write_data(a_file / "data"), "folder")
    _refused(lambda: report.write_data(tmp_path / "data", format="xlsx"), "format")
    _refused(lambda: report.write_data(3), "folder")  # not a path at all
    _refused(lambda: report.write_html("bad\0name.html"), "path")
    # Each writer writes its own format: HTML in a .md file would mislead whoever opens it.
    for write, wrong in ((report.write_html, "r.md"), (report.write_html, "r.txt"),
                         (report.write_markdown, "r.html")):
        assert "must end in" in str(_refused(
            lambda write=write, wrong=wrong: write(tmp_path / wrong), "path"))
    assert not list(tmp_path.glob("r.*"))
    assert a_file.read_text() == "mine"
    assert report.write_html(tmp_path / "new" / "r.html").is_file()  # a new folder is made
    assert [p.name for p in report.write_data(tmp_path / "data")] == ["k-rows.csv"]


def test_graphs_snapshots_and_sweeps_check_their_path_first(ltm: LongTermMemory,
                                                            tmp_path: Path,
                                                            a_file: Path) -> None:
    graph = nx.Graph([("a", "b")])
    _refused(lambda: write_tag_graph(graph, tmp_path / "g.txt"), "path")
    _refused(lambda: write_tag_graph(graph, a_file / "g.gexf"), "path")
    assert write_tag_graph(graph, tmp_path / "g.GEXF").is_file()
    _refused(lambda: export_snapshot(ltm, a_file / "s.duckdb"), "path")
    ltm.bulk_add(["one memory", "another memory"], robots="r",
                 embeddings=[[1.0, 0.0], [0.0, 1.0]])
    for output in (a_file / "b.csv", tmp_path / "b.xlsx", tmp_path):
        _refused(lambda output=output: benchmark_recall(ltm, queries=2, output=output),
                 "output")


def test_the_commands_refuse_an_output_before_their_work(memory_url: str,
                                                         tmp_path: Path,
                                                         a_file: Path) -> None:
    runner = CliRunner()
    for command, option in ((["report", "--out", str(tmp_path)], "--out"),
                            (["report", "--out", str(a_file / "r.html")], "--out"),
                            (["report", "--out", str(tmp_path / "r.txt")], "--out"),
                            (["report", "--format", "md", "--out", str(tmp_path / "r")],
                             "--out"),
                            (["report", "--data-dir", str(a_file / "d")], "--data-dir"),
                            (["history", "--history", str(tmp_path / "h"),
                              "--plot", str(tmp_path / "p.txt")], "--plot")):
        result = runner.invoke(cli, ["--db", memory_url, *command])
        assert result.exit_code == 2 and option in result.output, result.output
        assert "database:" not in result.stderr  # refused before the database was opened


def test_a_question_answered_no_changes_nothing(ltm: LongTermMemory, database_url: str,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    ltm.bulk_add(["keep this memory"], robots="r")
    node_id = ltm.node_ids_by_content(["keep this memory"])[0]
    monkeypatch.setattr(sys, "argv", ["htm-analytics", "--db", database_url, "forget",
                                      str(node_id)])
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 1  # not Ctrl-C's 130
    assert "not confirmed: nothing was changed" in capsys.readouterr().err
    assert ltm.retrieve(node_id) is not None


def test_numbers_no_calendar_or_clock_holds_are_refused(database_url: str) -> None:
    import datetime as dt

    from htm_analytics.store import LongTermMemory as Store

    runner = CliRunner()
    nan = runner.invoke(cli, ["--query-timeout", "nan", "--db", database_url, "status"])
    assert nan.exit_code == 2 and "NaN" in nan.output
    for age in ("99999999999d", "999999999d"):
        result = runner.invoke(cli, ["--db", database_url, "purge", "--older-than", age,
                                     "--yes"])
        assert result.exit_code != 0 and "older" in result.output + str(result.exception)
        assert not isinstance(result.exception, OverflowError)
    with Store(database_url) as store:
        _refused(lambda: store.purge_deleted(older_than=dt.timedelta(days=999_999_999),
                                             confirm="confirmed"), "older_than")
