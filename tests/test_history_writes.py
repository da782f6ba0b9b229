"""The history as collect writes it and as history and drift_findings read it back: drift
judged against the baseline the call names, a history collect cannot write to or one that
lost a table refused by name before anything is written, and the default view of the
history command showing the periods in which pg_stat_statements evicted entries."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from test_history_formats import _blank_sample

from htm_analytics import HistoryVersionError, LongTermMemory, NotAHistoryError, ValidationError
from htm_analytics.advisor import collect_sample
from htm_analytics.advisor.history import DriftThresholds, MemoryHistory, drift_findings, history
from htm_analytics.cli import cli
from htm_analytics.store.history import (
    HISTORY_TABLES,
    HistoryFolder,
    HistoryTable,
    append_sample,
    read_history,
)

# --- drift against the baseline the call names ----------------------------------------------

Measured = tuple[float, float, float] | None  # (low, recall, high), or no recall measured


def _history_of(path: Path, stored: list[Measured], logged: list[Measured]) -> None:
    """A history file of one blank sample per entry, with these recalls."""
    if not path.exists():
        for _ in stored:
            append_sample(path, _blank_sample())
    with duckdb.connect(str(path)) as con:
        for sample_id, (mine, asked) in enumerate(zip(stored, logged), start=1):
            values = [*(mine or (None,) * 3), 40 if mine else 0,
                      *(asked or (None,) * 3), 40 if asked else 0, sample_id]
            con.execute("UPDATE samples SET recall_low = ?, recall = ?, recall_high = ?, "
                        "recall_queries = ?, logged_recall_low = ?, logged_recall = ?, "
                        "logged_recall_high = ?, logged_recall_queries = ?, "
                        "logged_queries = 40, ef_search = 40, recall_k = 10 "
                        "WHERE sample_id = ?", values)


def _drifts(recalls: list[Measured], baseline: int | None) -> bool:
    """Whether the last measured recall's interval lies wholly below the baseline's (sample
    ``baseline``, else the first measured), worked out here from the figures alone."""
    measured = [(i, r) for i, r in enumerate(recalls, start=1) if r is not None]
    if len(measured) < 2:
        return False
    base = dict(measured).get(baseline) if baseline is not None else measured[0][1]
    return base is not None and measured[-1][1][2] < base[0]


def _checks(memory_history: MemoryHistory, thresholds: DriftThresholds | None) -> set[str]:
    found = set(drift_findings(memory_history, thresholds)["check"])
    return found & {"recall_drift", "logged_recall_drift"}


def _expected(stored: list[Measured], logged: list[Measured], baseline: int | None) -> set[str]:
    return {check for check, recalls in (("recall_drift", stored),
                                         ("logged_recall_drift", logged))
            if _drifts(recalls, baseline)}


def test_drift_is_judged_against_the_baseline_the_call_names(tmp_path):
    """A history read with one baseline (the first measured sample by default) and judged
    by drift_findings with another: the verdict is against the one drift_findings names."""
    path = tmp_path / "history.duckdb"
    high, low = (0.93, 0.95, 0.97), (0.45, 0.50, 0.55)
    _history_of(path, [high, low, low], [high, low, low])
    read_plain, read_at_2 = history(path), history(path, thresholds=DriftThresholds(
        baseline_sample=2))
    for frames in (read_plain, read_at_2):  # whichever it was read with
        assert not _checks(frames, DriftThresholds(baseline_sample=2))
        assert _checks(frames, DriftThresholds(baseline_sample=1)) == {
            "recall_drift", "logged_recall_drift"}
        assert _checks(frames, DriftThresholds()) == {"recall_drift", "logged_recall_drift"}
    # Without thresholds: against the baseline the history was read with, as always.
    assert _checks(read_plain, None) == {"recall_drift", "logged_recall_drift"}
    assert not _checks(read_at_2, None)
    # The figures quoted are the named baseline's.
    evidence = drift_findings(read_plain, DriftThresholds(baseline_sample=1)).set_index(
        "check").loc["recall_drift", "evidence"]
    assert "against the baseline 0.950 (0.930-0.970)" in evidence
    with pytest.raises(ValidationError) as raised:  # sample 4 is none of them
        drift_findings(read_plain, DriftThresholds(baseline_sample=4))
    assert raised.value.field == "baseline_sample"


_TRIPLE = st.lists(st.floats(0, 1), min_size=3, max_size=3).map(
    lambda values: tuple(sorted(values)))


def test_drift_findings_agree_with_the_figures_for_any_baseline(tmp_path):
    """For any recalls (measured or not, on stored vectors and on logged queries) and any
    baseline the call names, the drift verdict is the one the figures give, whichever
    baseline the history was read with."""
    path = tmp_path / "history.duckdb"

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.tuples(st.one_of(st.none(), _TRIPLE), st.one_of(st.none(), _TRIPLE)),
                    min_size=4, max_size=4), st.data())
    def check(recalls: list[tuple[Measured, Measured]], data: st.DataObject) -> None:
        stored, logged = [mine for mine, _ in recalls], [asked for _, asked in recalls]
        _history_of(path, stored, logged)
        measured = [i for i, mine in enumerate(stored, start=1) if mine is not None]
        baseline = data.draw(st.one_of(st.none(), st.sampled_from(measured))
                             if measured else st.none())
        read_with = data.draw(st.one_of(st.none(), st.sampled_from(measured))
                              if measured else st.none())
        frames = history(path, thresholds=DriftThresholds(baseline_sample=read_with))
        assert _checks(frames, DriftThresholds(baseline_sample=baseline)) == \
            _expected(stored, logged, baseline)
        assert _checks(frames, None) == _expected(stored, logged, read_with)

    check()


# --- what collect cannot write to is refused by name, before anything is written --------------

def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tables(path: Path) -> list[str]:
    with duckdb.connect(str(path), read_only=True) as con:
        return sorted(row[0] for row in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall())


def _not_a_history(call, match: str) -> NotAHistoryError:
    with pytest.raises(NotAHistoryError, match=match) as raised:
        call()
    assert isinstance(raised.value, HistoryVersionError)  # as these errors always were
    assert raised.value.field == "history" and "\n" not in str(raised.value)
    return raised.value


def test_collect_into_a_file_without_one_of_its_tables_is_refused(history_reader_url,
                                                                  tmp_path):
    """A history file from which sample_statements was dropped is refused by collect as
    reading refuses it, and the file is left as it was (not given the table again)."""
    path = tmp_path / "history.duckdb"
    with LongTermMemory(history_reader_url, read_only=True) as store:
        collect_sample(store, path, recall_queries=5)
        with duckdb.connect(str(path)) as con:
            con.execute("DROP TABLE sample_statements")
        before, tables = _digest(path), _tables(path)
        _not_a_history(lambda: history(path), "incomplete.*sample_statements")
        _not_a_history(lambda: collect_sample(store, path, recall_queries=5),
                       "incomplete.*sample_statements")
    assert _digest(path) == before and _tables(path) == tables
    assert "sample_statements" not in tables


@pytest.mark.parametrize("table", HISTORY_TABLES)
def test_a_history_without_one_of_its_tables_takes_no_sample(tmp_path, table):
    """Each table dropped from a file, or each file of a committed sample lost from a
    folder: append_sample refuses the history as read_history does, writing nothing."""
    file, folder = tmp_path / "history.duckdb", HistoryFolder(tmp_path / "history")
    for where in (file, folder):
        append_sample(where, _blank_sample())
    with duckdb.connect(str(file)) as con:
        con.execute(f"DROP TABLE {table}")
    before = _digest(file)
    _not_a_history(lambda: append_sample(file, _blank_sample()), f"incomplete.*{table}")
    assert _digest(file) == before
    if table == "samples":  # without samples.parquet a sample is not committed: not lost
        return
    (folder.path / "sample_000001" / f"{table}.parquet").unlink()
    listing = sorted(str(p.relative_to(folder.path)) for p in folder.path.rglob("*"))
    _not_a_history(lambda: read_history(folder), f"incomplete.*{table}")
    _not_a_history(lambda: append_sample(folder, _blank_sample()), f"incomplete.*{table}")
    assert sorted(str(p.relative_to(folder.path)) for p in folder.path.rglob("*")) == listing


def test_a_history_schema_without_one_of_its_tables_takes_no_sample(database_url, db):
    target = HistoryTable(database_url, "kept")
    append_sample(target, _blank_sample())
    db.execute("DROP TABLE kept.sample_robots")
    _not_a_history(lambda: append_sample(target, _blank_sample()), "incomplete.*sample_robots")
    assert db.execute("SELECT to_regclass('kept.sample_robots')").fetchone()[0] is None
    assert db.execute("SELECT count(*) FROM kept.samples").fetchone()[0] == 1


def test_a_file_collect_cannot_write_the_sample_to_is_refused_by_name(history_reader_url,
                                                                      tmp_path):
    """A history file whose table was changed so that the sample no longer fits: the
    DuckDB error is a NotAHistoryError naming history, and nothing is written."""
    path = tmp_path / "history.duckdb"
    append_sample(path, _blank_sample())
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE sample_robots ALTER memories TYPE DATE")
    before = _digest(path)
    with LongTermMemory(history_reader_url, read_only=True) as store:
        _not_a_history(lambda: collect_sample(store, path, recall_queries=5),
                       "could not write to the history .*memories")
    assert _digest(path) == before
    assert len(read_history(path)["samples"]) == 1


def test_a_sample_that_cannot_be_written_is_refused_by_name(tmp_path):
    """A sample whose values a table cannot take, in a file or a folder: a NotAHistoryError
    naming history, and no sample written."""
    sample = _blank_sample()
    sample["sample_robots"] = pd.DataFrame([{"robot": "r", "memories": "many"}])
    file, folder = tmp_path / "history.duckdb", HistoryFolder(tmp_path / "history")
    for where in (file, folder):
        append_sample(where, _blank_sample())
        _not_a_history(lambda where=where: append_sample(where, sample),
                       "could not write to the history")
        assert len(read_history(where)["samples"]) == 1
    assert sorted(p.name for p in folder.path.iterdir()) == ["history_meta.parquet",
                                                             "sample_000001"]


# --- the history command's default view -------------------------------------------------------

def test_the_samples_view_shows_the_periods_with_evictions(tmp_path, monkeypatch):
    """entries_evicted is in the default table beside counters_reset, true where
    pg_stat_statements' eviction count rose since the previous sample."""
    monkeypatch.setenv("COLUMNS", "200")  # one line per row
    path = tmp_path / "history.duckdb"
    for _ in range(3):
        append_sample(path, _blank_sample())
    with duckdb.connect(str(path)) as con:
        for sample_id, count in ((1, 2), (2, 2), (3, 9)):
            con.execute("UPDATE samples SET statements_evicted = ? WHERE sample_id = ?",
                        [count, sample_id])
    shown = CliRunner().invoke(cli, ["history", "--history", str(path)])
    assert shown.exit_code == 0, shown.output
    header, *rows = shown.stdout.splitlines()
    columns = header.split()
    assert columns[-2:] == ["counters_reset", "entries_evicted"]
    assert [row.split()[-1] for row in rows] == ["False", "False", "True"]
