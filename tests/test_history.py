"""collect and history: samples of a real memory through a SELECT-only role, usage between
samples exact against the counters read directly (across pg_stat_reset), recall degraded
for real and flagged, growth and unused indexes judged over the history, the history file's
schema version, and what collect and history refuse. The statements between samples:
test_history_statements.py."""

from __future__ import annotations

import json
import time

import duckdb
import numpy as np
import pandas as pd
import psycopg
import pytest
from click.testing import CliRunner
from history_helpers import collect_read_only, finding_statements
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from htm_analytics import HistoryVersionError, LongTermMemory, ValidationError, build_report
from htm_analytics.advisor.collect import collect_sample
from htm_analytics.advisor.history import (
    DriftThresholds,
    MemoryHistory,
    drift_findings,
    history,
)
from htm_analytics.cli import cli
from htm_analytics.store.history import HISTORY_SCHEMA_VERSION, HistoryTable, read_history

INDEX_COUNTERS = """SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes
                    WHERE schemaname = 'public' ORDER BY indexrelname"""


def _settled(db: psycopg.Connection, url: str) -> None:
    """Wait until the sessions of ``url``'s role have ended: a backend flushes its statistics
    as it exits, after its client has gone, and they must not land after a reset."""
    role = conninfo_to_dict(url)["user"]
    deadline = time.monotonic() + 30
    while db.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                     [role]).fetchone()[0] and time.monotonic() < deadline:
        time.sleep(0.02)


def _workload(db: psycopg.Connection, scans: int) -> None:
    """``scans`` index scans of robots_pkey, flushed so that other sessions see them."""
    db.execute("SET enable_seqscan = off")
    for _ in range(scans):
        db.execute("SELECT name FROM robots WHERE id = 1").fetchall()
    db.execute("RESET enable_seqscan")
    db.execute("SELECT pg_stat_force_next_flush()")
    db.execute("SELECT 1")


def _direct(db: psycopg.Connection) -> dict[str, tuple[int, int]]:
    db.execute("SELECT pg_stat_clear_snapshot()")
    return {name: (scans, read) for name, scans, read in db.execute(INDEX_COUNTERS)}


def _evictions(db: psycopg.Connection) -> int:
    return db.execute("SELECT dealloc FROM pg_stat_statements_info").fetchone()[0]


def test_collect_history_and_drift(history_reader_url, db, tmp_path, statement_statistics):
    path = tmp_path / "history.duckdb"
    evicted = _evictions(db) if statement_statistics.recorded else None
    first = collect_read_only(history_reader_url, path)
    # pg_stat_statements' evictions as the server counted them (others' statements may
    # evict entries meanwhile); None where it does not record statements.
    recorded = first["samples"]["statements_evicted"].iloc[0]
    if statement_statistics.recorded:
        assert evicted <= recorded <= _evictions(db)
    else:
        assert recorded is None
    assert first["samples"]["sample_id"].tolist() == [1]
    nodes = first["sample_tables"].set_index("table_name").loc["nodes"]
    assert nodes["row_count"] == 120 and nodes["table_bytes"] > 0
    assert first["sample_robots"]["memories"].tolist() == [120]
    assert first["samples"]["ef_search"].iloc[0] == 40
    assert first["samples"]["statements_available"].iloc[0] == statement_statistics.recorded
    # No native index for the 16-d vectors: the recall searched the padded one.
    assert first["samples"]["recall_index"].tolist() == ["idx_nodes_embedding"]

    _settled(db, history_reader_url)
    _workload(db, 3)
    before_second = _direct(db)
    second = collect_read_only(history_reader_url, path)
    stored = {r["index_name"]: (r["idx_scan"], r["idx_tup_read"])
              for r in second["sample_indexes"].to_dict("records")}
    assert stored == before_second  # the sample holds the counters as they were

    _settled(db, history_reader_url)
    db.execute("SELECT pg_stat_reset()")
    _workload(db, 5)
    before_third = _direct(db)
    collect_read_only(history_reader_url, path)

    frames = history(path)
    usage = frames.index_usage.set_index(["sample_id", "index_name"])
    first_counts = first["sample_indexes"].set_index("index_name")
    for name, (scans, read) in before_second.items():
        period = usage.loc[(2, name)]
        assert period["idx_scan"] == scans - first_counts.loc[name, "idx_scan"]
        assert period["idx_tup_read"] == read - first_counts.loc[name, "idx_tup_read"]
        assert not period["counters_reset"]
    assert usage.loc[(2, "robots_pkey"), "idx_scan"] >= 3
    for name, (scans, read) in before_third.items():  # after the reset: the counters
        assert usage.loc[(3, name), "idx_scan"] == scans
        assert usage.loc[(3, name), "idx_tup_read"] == read
        assert usage.loc[(3, name), "counters_reset"]
    assert usage.loc[(3, "robots_pkey"), "idx_scan"] == 5
    assert frames.samples["counters_reset"].tolist() == [False, False, True]
    # Nothing changed the vectors or the setting: recall is the same, nothing flagged.
    assert frames.recall["recall"].nunique() == 1
    assert "recall_drift" not in set(drift_findings(frames)["check"])

    runner = CliRunner()
    shown = runner.invoke(cli, ["history", "--history", str(path), "--what", "recall",
                                "--json", "--plot", str(tmp_path / "history.png")])
    assert shown.exit_code == 0, shown.output
    assert [row["sample_id"] for row in json.loads(shown.stdout)] == [1, 2, 3]
    assert (tmp_path / "history.png").stat().st_size > 0

    db.execute(sql.SQL("ALTER DATABASE {} SET hnsw.ef_search = 1").format(
        sql.Identifier(db.info.dbname)))
    checked = runner.invoke(cli, ["--db", history_reader_url, "collect", "--history", str(path),
                                  "--recall-queries", "40", "--check", "--json"])
    assert checked.exit_code == 4, checked.output
    document = json.loads(checked.stdout)
    assert document["kind"] == "collect" and document["sample"]["sample_id"] == 4
    assert document["sample"]["memories"] == 120  # numbers stay numbers
    # (statements_evicted, an info, when other tests' statements filled pg_stat_statements)
    assert [f["check"] for f in document["findings"]
            if f["check"] != "statements_evicted"] == ["recall_drift"]
    # The rebuild it suggests is of the index the sample searched, schema-qualified.
    assert finding_statements(document["findings"][0]["sql"]) == [
        "SHOW hnsw.ef_search", 'REINDEX INDEX CONCURRENTLY "public"."idx_nodes_embedding"']
    assert document["findings"][0]["object"] == "public.idx_nodes_embedding"
    frames = history(path)
    assert frames.samples["ef_search"].iloc[-1] == 1
    assert frames.recall["recall"].iloc[-1] < frames.recall["baseline_low"].iloc[-1]
    drift = drift_findings(frames)
    assert drift.loc[drift["check"] == "recall_drift", "severity"].tolist() == ["critical"]
    with LongTermMemory(history_reader_url, read_only=True) as store:
        report = build_report(store, benchmark=False, hygiene=False, advice=False,
                              history=path)
    since = next(section for section in report.sections if section.key == "since")
    assert report.sections[0] is since and len(since.figures) == 3
    assert any(line.startswith("CRITICAL recall_drift") for line in since.findings)
    assert "Since last time" in report.to_html()
    # The degraded sample as the approved baseline: the drop is then not drift.
    approved = DriftThresholds(baseline_sample=4)
    assert "recall_drift" not in set(drift_findings(history(path, thresholds=approved),
                                                    approved)["check"])
    # A baseline that is no sample would turn the check off without a word.
    with pytest.raises(ValidationError, match="those are: 1, 2, 3, 4") as raised:
        history(path, thresholds=DriftThresholds(baseline_sample=9))
    assert raised.value.field == "baseline_sample"
    with pytest.raises(ValidationError, match="those are: 1, 2, 3, 4") as raised:
        drift_findings(history(path), DriftThresholds(baseline_sample=9))  # as history's
    assert raised.value.field == "baseline_sample"
    past = runner.invoke(cli, ["history", "--history", str(path), "--what", "recall",
                               "--baseline", "9"])
    assert isinstance(past.exception, ValidationError) and past.exception.field == \
        "baseline_sample"
    # collect --check with such a baseline refuses before it writes a sample (a cron job
    # given it added one at every failing run).
    for _ in range(2):
        wrong = runner.invoke(cli, ["--db", history_reader_url, "collect", "--history",
                                    str(path), "--recall-queries", "5", "--check",
                                    "--baseline", "9"])
        assert wrong.exit_code == 2 and "--baseline" in wrong.output, wrong.output
        assert "those are: 1, 2, 3, 4" in wrong.output
    assert len(history(path).samples) == 4


def test_history_schema_version(tmp_path, history_reader_url):
    path = tmp_path / "history.duckdb"
    collect_read_only(history_reader_url, path)
    assert len(read_history(path)["samples"]) == 1
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE history_meta SET value = ? WHERE key = 'schema_version'",
                    [str(HISTORY_SCHEMA_VERSION + 1)])
    with pytest.raises(HistoryVersionError, match="upgrade htm-analytics"):
        read_history(path)
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    with pytest.raises(HistoryVersionError, match="not a history"):
        read_history(other)


def test_history_in_a_schema_of_your_choice(database_url, db):
    """--history-schema keeps the history in PostgreSQL tables: same frames, same version
    check, and nothing of the memory's own schema changes."""
    tables_before = db.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                               ).fetchone()[0]
    runner = CliRunner()
    for _ in range(2):
        done = runner.invoke(cli, ["--db", database_url, "collect", "--history-schema",
                                   "memory history", "--history-db", database_url])
        assert done.exit_code == 0, done.output
        # An empty memory: nothing to sample, and why.
        assert ": 0 memories," in done.stdout
        assert "no sampled recall (10 or fewer stored vectors)" in done.stdout
        assert "no logged queries (none in the log of the stored vectors' dimension)" in \
            done.stdout  # the log is there (init-db made it), and empty
    target = HistoryTable(database_url, "memory history")
    frames = history(target)
    assert frames.samples["sample_id"].tolist() == [1, 2]
    assert frames.samples["collected_at"].dt.tz is not None
    assert set(frames.index_usage["sample_id"]) == {2}
    assert db.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                      ).fetchone()[0] == tables_before
    shown = runner.invoke(cli, ["--db", database_url, "history", "--history-schema",
                                "memory history", "--json"])
    assert [row["sample_id"] for row in json.loads(shown.stdout)] == [1, 2]
    db.execute('UPDATE "memory history".history_meta SET value = %s', [str(
        HISTORY_SCHEMA_VERSION + 1)])
    with pytest.raises(HistoryVersionError, match="upgrade htm-analytics"):
        read_history(target)
    # A schema shared with other tables, or a name PostgreSQL would cut, is refused.
    for shared in ("public", "pg_temp", "information_schema", "h" * 64):
        with pytest.raises(ValidationError) as raised:
            HistoryTable(database_url, shared)
        assert raised.value.field == "history_schema"
    # Options that would not be used are refused, not ignored.
    for pointless in (["collect", "--history-db", database_url],
                      ["history", "--history-schema", "memory history", "--history", "x.duckdb"],
                      ["history", "--history-schema", "memory history", "--history-format",
                       "parquet"],
                      ["collect", "--history-schema", "memory history", "--baseline", "1"],
                      ["history", "--history-schema", "memory history", "--what", "growth",
                       "--unused-samples", "3"],
                      ["history", "--history-schema", "memory history", "--what", "samples",
                       "--baseline", "2"]):
        refused = runner.invoke(cli, ["--db", database_url, *pointless])
        assert refused.exit_code == 2 and "has no effect" in refused.output, pointless


def _scan_created_at(db: psycopg.Connection) -> None:
    """One scan of idx_nodes_created_at (a non-unique index), flushed for other sessions."""
    db.execute("SET enable_seqscan = off")
    db.execute("SELECT id FROM nodes WHERE created_at > now() - interval '1 day'").fetchall()
    db.execute("RESET enable_seqscan")
    db.execute("SELECT pg_stat_force_next_flush()")
    db.execute("SELECT 1")


def test_unused_indexes_and_fast_growth_are_verdicts_over_the_history(
        history_reader_url, database_url, db, tmp_path):
    """unused_index needs --unused-samples periods without a scan (an index scanned in one
    of them is not unused); fast_growth flags a period that added memories at more than
    twice the rate of the periods before it, and not a period that added none."""
    path = tmp_path / "history.duckdb"
    thresholds = DriftThresholds(unused_samples=2)

    def drift() -> pd.DataFrame:
        return drift_findings(history(path, thresholds=thresholds), thresholds)

    def unused() -> set[str]:
        found = drift()
        return set(found.loc[found["check"] == "unused_index", "object"])

    collect_read_only(history_reader_url, path)
    _scan_created_at(db)
    collect_read_only(history_reader_url, path)
    assert not unused()  # one period: too few for a verdict
    collect_read_only(history_reader_url, path)
    # Unused: the non-unique indexes whose cumulative scans did not move over both periods.
    raw = read_history(path)["sample_indexes"]
    raw = raw[~raw["is_unique"]].set_index(["index_name", "sample_id"])["idx_scan"].unstack()
    expected = {f"public.{name}" for name in raw.index[raw[3] == raw[1]]}
    assert expected and unused() == expected
    assert "public.idx_nodes_created_at" not in expected  # scanned in the first period
    assert "fast_growth" not in set(drift()["check"])  # nothing was added

    rng = np.random.default_rng(8)
    with LongTermMemory(database_url) as store:
        robot = store.register_robot("grower")
        for i in range(150):
            store.add(content=f"new memory {i}", robot_id=robot, embedding=rng.normal(size=16))
    collect_read_only(history_reader_url, path)
    found = drift().set_index("check")
    # Not scanned in either of the last two periods: now unused.
    assert "public.idx_nodes_created_at" in unused()
    growth = found.loc[["fast_growth"]]
    assert growth["severity"].tolist() == ["warning"]
    assert growth["evidence"].iloc[0].startswith("150 memories in the last period")
    assert "270 where the trend said 120" in growth["evidence"].iloc[0]

    collect_read_only(history_reader_url, path)  # a period that added nothing
    assert "fast_growth" not in set(drift()["check"])


def test_steady_growth_is_not_flagged(history_reader_url, database_url, tmp_path):
    """Two periods adding 150 memories each, the second at most as fast as the first (it
    lasts at least as long): growth at the trend's rate, not flagged."""
    path = tmp_path / "history.duckdb"
    rng = np.random.default_rng(9)

    def grow(store: LongTermMemory, robot: int) -> None:
        for _ in range(150):
            store.add(content=f"steady memory {rng.integers(1 << 62)}", robot_id=robot,
                      embedding=rng.normal(size=16))

    with LongTermMemory(database_url) as store:
        robot = store.register_robot("steady")
        first = collect_read_only(history_reader_url, path)["samples"]["collected_at"].iloc[0]
        grow(store, robot)
        second = collect_read_only(history_reader_url, path)["samples"]["collected_at"].iloc[0]
        grow(store, robot)
        time.sleep((second - first).total_seconds())  # the second period lasts longer
        collect_read_only(history_reader_url, path)
    frames = history(path)
    assert frames.growth.query("table_name == 'nodes'")["row_count"].tolist() == [120, 270, 420]
    assert "fast_growth" not in set(drift_findings(frames)["check"])
    # The same periods judged by a stricter factor: the last one's rate is flagged.
    strict = DriftThresholds(growth_factor=0.1)
    assert "fast_growth" in set(drift_findings(frames, strict)["check"])


URL = "postgresql://reader@localhost/memory"


@settings(max_examples=300)
@given(schema=st.text(max_size=70), url=st.one_of(st.just(URL), st.text(max_size=40)))
@example(schema="public\0x", url=URL).via("PostgreSQL ends a name at a NUL: public")
@example(schema="a\0b", url=URL).via("would write the schema a")
@example(schema="x\ud800", url=URL).via("a lone surrogate")
@example(schema="x", url=URL + "\0").via("a NUL in the URL")
@example(schema="x", url=URL + "\ud800").via("a lone surrogate in the URL")
def test_history_table_takes_only_a_schema_of_its_own(schema, url):
    try:
        target = HistoryTable(url, schema)
    except ValidationError as exc:
        assert exc.field in (("history_db",) if schema == "x" else ("history_schema",
                                                                    "history_db"))
        return
    assert "\0" not in target.schema and "\0" not in target.url
    assert 0 < len(target.schema.encode()) <= 63
    assert target.schema not in ("public", "information_schema")
    assert not target.schema.startswith("pg_")


_ANY = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**20),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
                 st.sampled_from(["1", "2", np.int64(3), np.float64(2.5)]))


@settings(max_examples=400)
@given(field=st.sampled_from(["unused_samples", "growth_factor", "growth_min_rows",
                              "baseline_sample"]), value=_ANY)
def test_drift_thresholds_are_checked_by_name(field, value):
    """A threshold that would flag every index (unused_samples=0), none (NaN), or fail
    later with a TypeError is refused when made, naming it."""
    try:
        thresholds = DriftThresholds(**{field: value})
    except ValidationError as exc:
        assert exc.field == field
        return
    kept = getattr(thresholds, field)
    if field == "growth_factor":
        assert type(kept) is float and np.isfinite(kept) and kept > 0
    elif field == "baseline_sample" and kept is None:
        return
    else:
        assert type(kept) is int and kept >= (0 if field == "growth_min_rows" else 1)


def test_history_and_drift_findings_refuse_what_they_cannot_use(tmp_path):
    empty = MemoryHistory(*[pd.DataFrame()] * 6)
    for call, field in ((lambda: history(tmp_path / "h.duckdb", thresholds="x"), "thresholds"),
                        (lambda: history(tmp_path / "h.duckdb", thresholds=7), "thresholds"),
                        (lambda: drift_findings("x"), "memory_history"),
                        (lambda: drift_findings(None), "memory_history"),
                        (lambda: drift_findings(empty, "x"), "thresholds")):
        with pytest.raises(ValidationError) as raised:
            call()
        assert raised.value.field == field


def test_collect_refuses_a_history_it_cannot_use_before_sampling(history_reader_url, db,
                                                                 monkeypatch):
    """A history path the system cannot use, or a schema name PostgreSQL would cut at a NUL
    (to public), is refused naming it, before the memory is sampled or anything written."""
    public = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
    before = db.execute(public).fetchone()[0]
    with LongTermMemory(history_reader_url, read_only=True) as store:
        monkeypatch.setattr(LongTermMemory, "server_vitals",
                            lambda self: pytest.fail("sampled before the history was checked"))
        for where, field in ((f"/tmp/{'x' * 300}.duckdb", "history"),
                             ("~no-such-user-of-htm/history.duckdb", "history"),
                             (lambda: HistoryTable(history_reader_url, "public\0x"),
                              "history_schema"),
                             (lambda: HistoryTable(history_reader_url + "\0", "x"),
                              "history_db")):
            with pytest.raises(ValidationError) as raised:
                collect_sample(store, where() if callable(where) else where,
                               recall_queries=2)
            assert raised.value.field == field
    assert db.execute(public).fetchone()[0] == before
