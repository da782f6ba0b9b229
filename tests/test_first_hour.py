"""What a new user meets in the first hour: the README's snippets, the report's file name, the
command after the demo, the demo's history, terminal tables, searches across models."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

import htm_analytics as ha
import htm_analytics.cli._database as cli_database
from htm_analytics.agent.datasets import DEMO_ROBOTS, read_demo, simulate_remembers
from htm_analytics.cli import cli
from htm_analytics.cli._output import _as_text, _cut, _pieces, terminal_lines, terminal_table
from htm_analytics.store.connection import embedded_dir_of

ROOT = Path(__file__).resolve().parents[1]
URL_VARIABLES = ("HTM_DBURL", "HTM_DATABASE__URL", "DATABASE_URL")


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)


def test_every_readme_snippet_runs(database_url: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A memory with a few hundred vectors of the README's model, as the tuning examples ask.
    memories = read_demo()[0].head(400)
    embedder = ha.get_embedder("hashing")
    with ha.LongTermMemory(database_url) as store:
        store.bulk_add(memories["content"].tolist(),
                       robots=[DEMO_ROBOTS[i % len(DEMO_ROBOTS)] for i in range(len(memories))],
                       embeddings=embedder.embed(memories["content"].tolist()),
                       tags=memories["tags"].tolist(),
                       embedding_model=(embedder.name, embedder.model))
    for variable in URL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HTM_DBURL", database_url)
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 6
    for number, block in enumerate(blocks, start=1):
        namespace: dict = {"__name__": f"readme_block_{number}"}
        try:
            exec(compile(block, f"README.md python block {number}", "exec"), namespace)
        finally:
            for value in namespace.values():
                if isinstance(value, ha.LongTermMemory):
                    value.close()
    # The snippets ran against the test database: the HTM example forgot its memory, the store
    # example remembered it again, the report and snapshot were written here.
    with ha.LongTermMemory(database_url) as store:
        assert store.node_ids_by_content(["PostgreSQL is our primary database"])[0]
        models = store.embedding_models()
    assert models["model"].tolist() == [embedder.model]  # one model: later recalls still work
    assert (tmp_path / "report.html").is_file() and (tmp_path / "memory.duckdb").is_file()


def test_search_refuses_a_query_of_another_model(ltm: ha.LongTermMemory) -> None:
    robot = ltm.register_robot("r")
    embedder = ha.get_embedder("hashing")
    ltm.add(content="a test vector", robot_id=robot, embedding=[0.1, 0.2, 0.3])
    with pytest.raises(ha.EmbeddingError, match=r"3-d"):
        ltm.search(query="which database?", embedding_service=embedder)
    with pytest.raises(ha.EmbeddingError, match="384 dimensions but the stored vectors have 3"):
        ltm.search(embedding=embedder.embed("which database?"))
    assert len(ltm.search(embedding=[0.1, 0.2, 0.25])) == 1  # the stored model's dimension


def test_report_file_name_follows_the_format(ltm: ha.LongTermMemory, database_url: str,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    html = runner.invoke(cli, ["--db", database_url, "report", "--no-benchmark"])
    assert html.exit_code == 0, html.output
    before = (tmp_path / "report.html").read_text()
    assert before.startswith("<!DOCTYPE html>")
    markdown = runner.invoke(cli, ["--db", database_url, "report", "--format", "md",
                                   "--no-benchmark"])
    assert markdown.exit_code == 0, markdown.output
    assert (tmp_path / "report.md").read_text().startswith("# Memory report")
    assert (tmp_path / "report.html").read_text() == before  # the HTML report is intact
    clash = runner.invoke(cli, ["--db", database_url, "report", "--format", "md", "--out",
                                "report.html"])
    assert clash.exit_code != 0 and "does not match --format md" in clash.output
    assert (tmp_path / "report.html").read_text() == before


def test_next_command_after_the_demo_finds_its_memory(demo: dict, server_url: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    params = conninfo_to_dict(server_url)
    if embedded_dir_of(server_url) is None:  # the wheel would take a server's socket directory
        pytest.skip("the test server is not the embedded one")
    with psycopg.connect(server_url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('public.nodes')").fetchone()[0]:
            pytest.skip("the test server's default database has a memory schema")
    for variable in URL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    # The test server plays the embedded default server; the demo's database is the fixture's.
    monkeypatch.setenv("HTM_EMBEDDED_DIR", params["host"])
    monkeypatch.setattr(cli_database, "DEMO_DATABASE", conninfo_to_dict(demo["url"])["dbname"])
    result = CliRunner().invoke(cli, ["status", "--no-indexes", "--json"])
    assert result.exit_code == 0, result.output
    assert "holds no memory yet, so the demo's" in result.stderr
    rows = {r["table"]: r["rows"] for r in json.loads(result.stdout)["tables"]}
    with ha.LongTermMemory(demo["url"]) as store:
        assert rows == store.table_counts().set_index("table")["rows"].to_dict()


def test_demo_history_does_not_pile_up_at_the_end() -> None:
    memories = read_demo()[0]
    end = pd.Timestamp("2026-06-30 12:00", tz="UTC")
    events = simulate_remembers(memories, days=180, end=end.to_pydatetime(), seed=0)
    assert events["remembered_at"].max() <= end
    assert (events["remembered_at"] == end).sum() == 0  # nothing pinned to the end
    last_seen = events.groupby("robot")["remembered_at"].max()
    assert last_seen.nunique() == len(last_seen)  # robots were last active at different times
    weekly = events.set_index("remembered_at").resample("W").size()
    # Activity grows towards the end, but the last full week is no spike over the one before.
    assert weekly.iloc[-2] < 1.3 * weekly.iloc[-3]


@settings(max_examples=150, deadline=None)
@given(columns=st.lists(st.lists(st.text(max_size=60), min_size=5, max_size=5),
                        min_size=1, max_size=6),
       width=st.integers(min_value=60, max_value=160),
       rows_per_piece=st.integers(min_value=1, max_value=6))
def test_a_table_is_laid_out_as_if_every_row_were_rendered(columns: list[list[str]],
                                                          width: int,
                                                          rows_per_piece: int) -> None:
    # A long table's layout is chosen on the rows holding each column's longest value (a
    # million rows rendered once per width tried took minutes), and it is printed a few
    # rows at a time: the same text as rendering every row at each width.
    frame = pd.DataFrame({f"column_{i}": values for i, values in enumerate(columns)})
    assert "\n".join(terminal_lines(frame, width, rows_per_piece=rows_per_piece)) == \
        terminal_table(frame, width)
    text, cuttable = _as_text(frame)
    fitting = None
    for text_width in (40, 32, 24, 16):
        rendered = _cut(text, cuttable, text_width).to_string(index=False)
        if max(map(len, rendered.splitlines())) <= width:
            fitting = rendered
            break
    shown = terminal_table(frame, width)
    lines = shown.splitlines()
    if fitting is not None:
        assert shown == fitting and len(lines) == len(frame) + 1
    else:
        assert shown.startswith("-[ RECORD 1 ]") and len(lines) == 5 * (len(columns) + 1)
        assert "-[ RECORD 5 ]" in shown
    assert max(map(len, lines)) <= width  # a value's line break or tab is a space


@pytest.mark.parametrize("rows", [0, 1, 7, 25])
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_csv_and_json_in_pieces_are_one_document(monkeypatch: pytest.MonkeyPatch, fmt: str,
                                                 rows: int) -> None:
    frame = pd.DataFrame({"node_id": range(rows), "content": [f"memory, \"{i}\"\n" for i in
                                                              range(rows)],
                          "at": pd.date_range("2026-01-01", periods=rows, tz="UTC")})
    monkeypatch.setattr("htm_analytics.cli._output.ROWS_PER_PIECE", 3)
    whole = frame.to_csv(index=False) if fmt == "csv" else \
        frame.to_json(orient="records", date_format="iso", indent=2) + "\n"
    assert "".join(_pieces(frame, fmt)) == whole


def test_terminal_tables_are_readable(ltm: ha.LongTermMemory, database_url: str) -> None:
    rng = np.random.default_rng(0)
    robot = ltm.register_robot("reader")
    for i in range(12):
        node = ltm.add(content=f"memory {i}", robot_id=robot, embedding=rng.normal(size=8))
        ltm.add_tag(node_id=node["node_id"], tag=f"topic:{'ab'[i % 2]}")
        ltm.add_tag(node_id=node["node_id"], tag=f"kind:{'xyz'[i % 3]}")
    runner = CliRunner()
    for command in (["health"], ["indexes"], ["robots"], ["tags", "--min-shared", "1"]):
        result = runner.invoke(cli, ["--db", database_url, *command],
                               env={"COLUMNS": "100"})
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert max(map(len, lines)) <= 100, (command, max(map(len, lines)))
        assert not re.search(r"\b(NaT|NaN|<NA>)\b", result.stdout), command
    pairs = json.loads(runner.invoke(cli, ["--db", database_url, "tags", "--min-shared", "1",
                                           "--json"]).stdout)
    npmi = [p["npmi"] for p in pairs]
    assert npmi == sorted(npmi, reverse=True)  # most telling pairs first, not biggest
