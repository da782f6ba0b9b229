"""Hostile input for the advisor, its gate and the notebook explorers: wrong types for every
argument, names that need quoting or look like patterns, sequences that count down, namesakes
in two schemas. Each call answers or raises ``ValidationError`` naming the argument; every
statement the advisor suggests runs as written on the (throwaway) test database."""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import Any

import numpy as np
import pandas as pd
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from htm_analytics import AdvisorThresholds, LongTermMemory, ValidationError, advise
from htm_analytics.advisor import (
    FINDING_COLUMNS,
    SEVERITIES,
    findings_document,
    gate_exit_code,
    split_statements,
)
from htm_analytics.advisor._common import regclass
from htm_analytics.report.widgets import ef_search_explorer, search_explorer, tag_browser
from htm_analytics.store import quote_identifier, quote_literal

FIELDS = {spec.name: spec.type for spec in dataclasses.fields(AdvisorThresholds)}
FRACTIONS = {"seq_scan_max_share", "cache_hit_min", "dead_min_fraction",
             "sequence_max_fraction", "hot_min_fraction", "hnsw_min_cached_fraction"}


def _run_all(url: str, findings: pd.DataFrame) -> None:
    """Run every suggested statement, one at a time, as psql would."""
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in [s for text in findings["sql"] for s in split_statements(text)]:
            conn.execute(statement)


def _acceptable(name: str, value: Any) -> bool:
    """Whether a threshold value is one the advisor can compare with: a real, finite,
    non-negative number (an integer where the attribute is one), a share at most 1."""
    if isinstance(value, (bool, np.bool_)):
        return False
    kinds = (int, np.integer) if FIELDS[name] == "int" else (int, float, np.integer,
                                                               np.floating)
    if not isinstance(value, kinds) or not math.isfinite(float(value)):
        return False
    return value >= 0 and (name not in FRACTIONS or value <= 1) and (
        FIELDS[name] != "int" or value < 2**63)


@given(name=st.sampled_from(sorted(FIELDS)),
       value=st.one_of(st.booleans(), st.none(), st.text(max_size=5), st.decimals(),
                       st.floats(), st.integers(min_value=-2**70, max_value=2**70),
                       st.integers(0, 10**6).map(np.int64), st.floats(0, 1).map(np.float64),
                       st.just(np.bool_(True))))
def test_every_threshold_is_a_number_in_its_range_or_refused_by_name(name: str, value: Any
                                                                     ) -> None:
    # A NaN made every comparison false: min_statistics_days=nan called minutes-old
    # statistics old enough and advised a DROP for every index; strings and None failed
    # later with a TypeError or a driver error.
    if _acceptable(name, value):
        kept = getattr(AdvisorThresholds(**{name: value}), name)
        kind = int if FIELDS[name] == "int" else float  # a float field keeps float(value)
        assert kept == kind(value) and type(kept) is kind
    else:
        with pytest.raises(ValidationError) as info:
            AdvisorThresholds(**{name: value})
        assert info.value.field == name


def test_no_updates_are_no_share_of_hot_ones(ltm: LongTermMemory) -> None:
    # hot_min_updates=0 on a memory nothing has updated divided 0 HOT updates by 0.
    frame = advise(ltm, thresholds=AdvisorThresholds(hot_min_updates=0))
    assert "hot_updates" not in set(frame["check"])


@given(severities=st.lists(st.one_of(st.sampled_from(SEVERITIES),
                                     st.sampled_from(["CRITICAL", "error", "", "Warning"]),
                                     st.none(), st.just(pd.NA), st.integers(0, 3)),
                           max_size=6),
       fail_on=st.sampled_from([None, "warning", "critical"]))
def test_the_gate_reads_every_severity_or_refuses_them(severities: list[Any],
                                                       fail_on: str | None) -> None:
    # An unknown or missing severity was skipped: ["CRITICAL"] passed a --fail-on gate.
    if not all(isinstance(s, str) and s in SEVERITIES for s in severities):
        for given_as in (severities, pd.Series(severities, dtype=object)):
            with pytest.raises(ValidationError) as info:
                gate_exit_code(given_as, fail_on)
            assert info.value.field == "severities"
        return
    worst = min((SEVERITIES.index(s) for s in severities), default=len(SEVERITIES))
    expected = 0 if fail_on is None else 4 if worst == 0 else \
        3 if worst == 1 and fail_on == "warning" else 0
    for given_as in (severities, pd.Series(severities, dtype="string"),
                     np.array(severities, dtype=object)):
        assert gate_exit_code(given_as, fail_on) == expected


def test_the_gate_and_the_document_refuse_what_they_cannot_read() -> None:
    # A string was read letter by letter: "critical" passed the gate.
    for severities in ("critical", None, 3, {"severity": "critical"}):
        with pytest.raises(ValidationError) as info:
            gate_exit_code(severities, "warning")
        assert info.value.field == "severities"
    with pytest.raises(ValidationError) as info:
        gate_exit_code(["critical"], ["warning"])
    assert info.value.field == "fail_on"
    findings = pd.DataFrame([{"check": "x", "severity": "critical", "object": "o",
                              "evidence": "e", "recommendation": "r", "sql": "SELECT 1;"}]
                            ).astype(FINDING_COLUMNS)
    document = findings_document(findings, kind="advise", database="db", fail_on="warning",
                                 note="kept")
    assert document["exit_code"] == 4 and document["note"] == "kept"
    # An extra field named like one of the document's replaced it: exit_code 0 beside a
    # critical finding.
    for clash in ({"exit_code": 0}, {"schema_version": 9}, {"counts": {}}):
        with pytest.raises(ValidationError) as info:
            findings_document(findings, kind="advise", database="db", **clash)
        assert info.value.field == next(iter(clash))
    for bad, field in ((None, "findings"), ([], "findings"),
                       (findings.drop(columns="severity"), "findings")):
        with pytest.raises(ValidationError) as info:
            findings_document(bad, kind="advise", database="db")
        assert info.value.field == field
    for name in ("kind", "database"):
        with pytest.raises(ValidationError) as info:
            findings_document(findings, **{"kind": "advise", "database": "db", name: 3})
        assert info.value.field == name


def test_advise_refuses_results_of_other_functions(ltm: LongTermMemory,
                                                   database_url: str) -> None:
    # These failed with an AttributeError, after the checks had run.
    for name in ("ef_search_advice", "hygiene"):
        for value in ("x", {}, 3, pd.DataFrame()):
            with pytest.raises(ValidationError) as info:
                advise(ltm, **{name: value})
            assert info.value.field == name
    # Read-only, on an empty memory and then on one of a single memory: nothing written.
    robot = ltm.register_robot("one")
    for _ in range(2):
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_force_next_flush()")
        with LongTermMemory(database_url, read_only=True) as reader:
            before = reader.table_counts()
            assert set(advise(reader)["severity"]) <= set(SEVERITIES)
            pd.testing.assert_frame_equal(reader.table_counts(), before)
        ltm.add(content="the only memory", robot_id=robot, embedding=np.ones(4))


def test_column_names_that_are_patterns_and_quoted_index_names(
        ltm_one_connection: LongTermMemory, database_url: str) -> None:
    # Each column's name was matched as a regular expression in the expressions' text:
    # a column "a(" beside any expression index made advise fail (parentheses not
    # balanced); the index's dependencies name its columns exactly.
    store = ltm_one_connection
    index = 'Recall "count" é'
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute('CREATE TABLE "Odd ""t""" ("a(" int, "b|c" int)')
        conn.execute('CREATE INDEX odd_expression ON "Odd ""t""" (("b|c" + 1)) '
                     'WHERE "a(" > 0')
        conn.execute(psycopg.sql.SQL("CREATE INDEX {} ON nodes ((access_count + 1))").format(
            psycopg.sql.Identifier(index)))
    robot = store.register_robot("recaller")
    ids = [store.add(content=f"memory {i}", robot_id=robot)["node_id"] for i in range(5)]
    for _ in range(3):  # updates of access_count, made non-HOT by its indexes
        store.track_access(ids, robot_id=robot)
    frame = advise(store, thresholds=AdvisorThresholds(hot_min_updates=1))
    hot = frame[frame["check"] == "hot_updates"]
    assert len(hot) == 1 and f"{index} (" in hot["evidence"].iloc[0]
    _run_all(database_url, hot)
    with psycopg.connect(database_url, autocommit=True) as conn:
        left = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes").fetchall()}
    assert index not in left and "idx_nodes_access_count" not in left


def test_an_index_flagged_in_one_schema_leaves_its_namesake_unused(
        ltm: LongTermMemory, database_url: str) -> None:
    # Flagged indexes were kept by name alone: the duplicate "ix_b" of one schema hid the
    # unused "ix_b" of another.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute('CREATE SCHEMA "A ""s"""; CREATE SCHEMA b')
        conn.execute('CREATE TABLE "A ""s""".t (x int); CREATE INDEX ix_a ON "A ""s""".t (x);'
                     'CREATE INDEX ix_b ON "A ""s""".t (x)')
        conn.execute("CREATE TABLE b.t (x int); CREATE INDEX ix_b ON b.t (x)")
    old = advise(ltm, thresholds=AdvisorThresholds(min_statistics_days=0))
    found = set(zip(old["check"], old["object"]))
    assert {("duplicate_index", 'A "s".ix_b'), ("unused_index", 'A "s".ix_a'),
            ("unused_index", "b.ix_b")} <= found
    assert ("unused_index", 'A "s".ix_b') not in found
    # Young statistics: the statement lists exactly the indexes counted, by schema.
    young = advise(ltm)
    question = young[young["check"] == "unused_index"]
    with psycopg.connect(database_url, autocommit=True) as conn:
        listed = conn.execute(split_statements(question["sql"].iloc[0])[0]).fetchall()
    assert sorted((r[0], r[2]) for r in listed if r[0] != "public") == [
        ("A \"s\"", "ix_a"), ("b", "ix_b")]


def test_sequences_counting_down_run_out_at_their_minimum(ltm: LongTermMemory,
                                                          database_url: str) -> None:
    # last_value / max_value: a descending sequence with MAXVALUE 0 divided by zero, and
    # one at its start (100 of a MAXVALUE 100) was called critical.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE at_zero (id int)")
        conn.execute("CREATE SEQUENCE at_zero_seq INCREMENT -1 MAXVALUE 0 START 0 "
                     "OWNED BY at_zero.id")
        conn.execute("CREATE TABLE at_start (id int)")
        conn.execute("CREATE SEQUENCE at_start_seq INCREMENT -1 MAXVALUE 100 START 100 "
                     "OWNED BY at_start.id")
        conn.execute('CREATE TABLE "Down ""é""" ("Id ""x""" int)')
        conn.execute('CREATE SEQUENCE "down seq" AS integer INCREMENT -1 MAXVALUE 0 '
                     'OWNED BY "Down ""é"""."Id ""x"""')
        conn.execute("""SELECT setval('"down seq"', -2140000000)""")
        conn.execute("CREATE TABLE up (id smallint GENERATED BY DEFAULT AS IDENTITY)")
        conn.execute("SELECT setval(pg_get_serial_sequence('up', 'id'), 32000)")
    frame = advise(ltm)
    found = frame[frame["check"] == "sequence_near_max"].set_index("object")
    assert sorted(found.index) == ["public.down seq", "public.up_id_seq"]
    assert found.loc["public.down seq", "severity"] == "critical"
    assert "at -2,140,000,000 of -2,147,483,648 (99.7%)" in \
        found.loc["public.down seq", "evidence"]
    assert "at 32,000 of 32,767 (97.7%) for up.id (smallint)" in \
        found.loc["public.up_id_seq", "evidence"]
    _run_all(database_url, found)
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute("SELECT sequencename, data_type::text, min_value, max_value "
                            "FROM pg_sequences WHERE sequencename IN ('down seq', "
                            "'up_id_seq') ORDER BY 1").fetchall()
        assert rows == [("down seq", "bigint", -2**63, 0), ("up_id_seq", "bigint", 1,
                                                              2**63 - 1)]
        conn.execute('INSERT INTO "Down ""é""" SELECT nextval(\'"down seq"\')')
        conn.execute("INSERT INTO up DEFAULT VALUES")


def test_explorers_check_their_arguments(ltm: LongTermMemory) -> None:
    robot = ltm.register_robot("explorer")
    rng = np.random.default_rng(0)
    for i in range(12):
        ltm.add(content=f"memory {i} about cats", robot_id=robot, tags=["pets:cats"],
                embedding=rng.normal(size=8))
    # The widgets raised traitlets' TraitError for these.
    for value in (3, None, b"cats"):
        with pytest.raises(ValidationError) as info:
            search_explorer(ltm, query=value)
        assert info.value.field == "query"
        with pytest.raises(ValidationError) as info:
            tag_browser(ltm, prefix=value)
        assert info.value.field == "prefix"
    # The slider clamped 1000 to 400, 0 and True to 1, 2.5 to 2: a setting not asked for
    # was measured; NaN raised a TraitError; k=0 only showed in the pane.
    for name, value in (("ef_search", 0), ("ef_search", True), ("ef_search", 2.5),
                        ("ef_search", float("nan")), ("ef_search", 1001),
                        ("ef_search", decimal.Decimal(40)), ("k", 0), ("k", "10"),
                        ("k", np.bool_(True))):
        with pytest.raises(ValidationError) as info:
            ef_search_explorer(ltm, queries=4, **{name: value})
        assert info.value.field == name
    # A bad number of queries only showed in the results pane, each time the slider moved.
    for value in ("x", 0, -3, 2.5, True):
        with pytest.raises(ValidationError) as info:
            ef_search_explorer(ltm, queries=value)
        assert info.value.field == "queries"
    explorer = ef_search_explorer(ltm, queries=4, k=3, ef_search=np.int64(1000))
    assert explorer.controls["ef_search"].value == 1000
    assert "<td>1000</td>" in explorer.results.value


# Names PostgreSQL keeps whole: no NUL, at most 63 bytes.
NAMES = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                min_size=1, max_size=20).filter(
    lambda name: len(name.encode()) <= 63)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES, other=NAMES)
def test_quoted_names_and_values_stay_on_one_line_and_mean_themselves(
        db: psycopg.Connection, name: str, other: str) -> None:
    # A line break inside a quoted name made ";" + line break, where split_statements and
    # the findings document's "statements" end a statement.
    written = [quote_identifier(name, other), quote_literal(name), regclass(name, other)]
    assert not any("\n" in text or "\r" in text for text in written)
    row = db.execute(f"SELECT {quote_literal(name)} AS {quote_identifier(other)}")
    assert row.fetchone() == (name,) and row.description[0].name == other
    # the relation's name as regclass reads it: the same two parts
    relation = regclass(name, other).removesuffix("::regclass")
    assert db.execute(f"SELECT parse_ident({relation})").fetchone()[0] == [name, other]


def test_a_name_holding_a_statement_is_never_run_as_one(ltm: LongTermMemory,
                                                        database_url: str) -> None:
    # Each statement here split in two at the name's ";" + line break, the second a DROP:
    # run one at a time, the first failed and the second dropped the table.
    evil = 'x;\nDROP TABLE victim;\n-- \\ \'"'
    table = sql.Identifier(evil, evil)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE victim (x int)")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(evil)))
        conn.execute(sql.SQL("CREATE TABLE {} (x int, y int) WITH (autovacuum_enabled = off)"
                             ).format(table))
        for suffix, column in (("1", "x"), ("2", "x"), ("3", "y")):
            conn.execute(sql.SQL("CREATE INDEX {} ON {} ({})").format(
                sql.Identifier(evil + suffix), table, sql.Identifier(column)))
        conn.execute(sql.SQL("INSERT INTO {} SELECT i, i FROM generate_series(1, 3000) i"
                             ).format(table))
        conn.execute(sql.SQL("DELETE FROM {} WHERE x > 1000").format(table))
        for _ in range(5):
            conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE x + 0 = 3").format(table))
        conn.execute("SELECT pg_stat_force_next_flush()")
    limits = AdvisorThresholds(seq_scan_min_rows=100, min_statistics_days=0)
    young, old = advise(ltm), advise(ltm, thresholds=limits)
    ours = old[old["object"].str.startswith(evil)]
    assert set(ours["check"]) == {"dead_rows", "duplicate_index", "sequential_scans",
                                  "unused_index"}
    document = findings_document(pd.concat([young, ours]), kind="advise", database="db")
    with psycopg.connect(database_url, autocommit=True) as conn:
        for record in document["findings"]:
            for statement in record["statements"]:
                conn.execute(statement)
        assert conn.execute("SELECT to_regclass('victim')").fetchone()[0] == "victim"
        left = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE "
                                           "schemaname = %s", [evil]).fetchall()}
    assert left <= {evil + "1"}  # the duplicate and the unused ones dropped


def test_namesake_vector_indexes_are_judged_apart(ltm: LongTermMemory,
                                                  database_url: str) -> None:
    # Residency was kept by index name: of two "idx_nodes_embedding", one's share of pages
    # in shared buffers stood for both.
    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = "
                        "'pg_buffercache'").fetchone():
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        if conn.execute("SELECT to_regproc('pg_buffercache_evict_relation')"
                        ).fetchone()[0] is None:
            pytest.skip("needs pg_buffercache_evict_relation (PostgreSQL 18)")
        conn.execute("CREATE SCHEMA copy")
        conn.execute("CREATE TABLE copy.nodes (id int, embedding vector(3))")
        conn.execute("INSERT INTO copy.nodes SELECT i, ARRAY[i, 1, 2]::vector "
                     "FROM generate_series(1, 50) i")
        conn.execute("CREATE INDEX idx_nodes_embedding ON copy.nodes "
                     "USING hnsw (embedding vector_cosine_ops)")
        conn.execute("SELECT count(*) FROM copy.nodes")
        conn.execute("SELECT pg_buffercache_evict_relation('public.idx_nodes_embedding')")
        shares = dict(conn.execute(
            "SELECT n.nspname, count(b.bufferid) FROM pg_class c JOIN pg_namespace n ON "
            "n.oid = c.relnamespace LEFT JOIN pg_buffercache b ON b.relfilenode = "
            "pg_relation_filenode(c.oid) AND b.reldatabase = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()) WHERE c.relname = 'idx_nodes_embedding' "
            "GROUP BY 1").fetchall())
    assert shares["public"] == 0 and shares["copy"] > 0  # as pg_buffercache tells them
    cache = advise(ltm).query("check == 'hnsw_cache'")
    assert cache["object"].tolist() == ["public.idx_nodes_embedding"]
    assert cache["evidence"].iloc[0].startswith("0% of the")
