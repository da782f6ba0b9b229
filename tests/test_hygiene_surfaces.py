"""The hygiene checks through their surfaces: the CLI, the report, the advisor, and both gem
eras read through a SELECT-only role."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import given

import htm_analytics as ha
from htm_analytics.cli import cli
from tests.test_existing_databases import as_role, footprint, gem_database, roles  # noqa: F401
from tests.test_hostile_input import FAST, anything
from tests.test_hygiene import DIMENSION, perturbed, random_texts, random_vectors

SECRET = "AKIAIOSFODNN7EXAMPLE"
LEAK = f"the deploy robot used access key {SECRET} for staging"


@pytest.fixture
def planted(database_url: str) -> Iterator[dict[str, Any]]:
    """Forty clean memories, one paraphrase of the first, one credential."""
    with ha.LongTermMemory(database_url) as store:
        texts, vectors = random_texts(40, seed=8), random_vectors(40, seed=9)
        store.bulk_add(texts, robots="alpha", embeddings=vectors)
        store.bulk_add(["a paraphrase of the first memory", LEAK], robots="beta",
                       embeddings=np.vstack([perturbed(vectors[0], 0.98, 1),
                                             random_vectors(1, seed=10)]))
        ids = store.node_ids_by_content([texts[0], "a paraphrase of the first memory", LEAK])
    yield {"url": database_url, "pair": (min(ids[:2]), max(ids[:2])), "leak": ids[2]}


def test_cli_summary_and_each_check(planted: dict[str, Any]) -> None:
    runner = CliRunner()
    url = planted["url"]
    summary = runner.invoke(cli, ["--db", url, "hygiene", "--json"])
    assert summary.exit_code == 0, summary.output
    rows = {r["check"]: r for r in json.loads(summary.stdout)}
    assert rows["near_duplicates"]["findings"] == 1 and rows["sensitive"]["memories"] == 1
    assert "1 group of memories saying nearly the same thing" in \
        rows["near_duplicates"]["what_it_means"]  # not "1 groups"
    assert "leave 1 fewer memory" in rows["near_duplicates"]["what_it_means"]
    every = runner.invoke(cli, ["--db", url, "hygiene", "--json", "--pairs", "all"])
    assert every.exit_code == 0, every.output
    assert [r["findings"] for r in json.loads(every.stdout)] == \
        [r["findings"] for r in rows.values()]
    refused = runner.invoke(cli, ["--db", url, "hygiene", "--pairs", "every"])
    assert refused.exit_code == 2 and "--pairs" in refused.output
    table = runner.invoke(cli, ["hygiene", "--db", url, "--check", "sensitive"])
    assert table.exit_code == 0, table.output
    assert "sensitive: 1 finding, 1 memory, 2.4%" in table.output
    assert "near_duplicates" not in table.output
    pairs = runner.invoke(cli, ["hygiene", "duplicates", "--db", url, "--csv"])
    assert pairs.exit_code == 0, pairs.output
    lines = pairs.stdout.splitlines()
    assert lines[0].startswith("cluster,cluster_size,node_a,node_b,similarity") and len(lines) == 2
    assert lines[1].split(",")[2:4] == [str(i) for i in planted["pair"]]
    tree = runner.invoke(cli, ["hygiene", "duplicates", "--db", url, "--csv", "--pairs", "tree"])
    assert tree.exit_code == 0 and tree.stdout == pairs.stdout, tree.output
    wrong = runner.invoke(cli, ["hygiene", "duplicates", "--db", url, "--pairs", "some"])
    assert wrong.exit_code == 2 and "--pairs" in wrong.output
    found = runner.invoke(cli, ["--db", url, "hygiene", "sensitive", "--json"])
    assert found.exit_code == 0 and SECRET not in found.output
    assert json.loads(found.stdout)[0]["detector"] == "AWS Access Key"
    for command in (["unreachable", "--sample", "20"], ["stale", "--days", "1"],
                    ["growth", "--freq", "D", "--horizon", "2"]):
        done = runner.invoke(cli, ["--db", url, "hygiene", *command, "--csv"])
        assert done.exit_code == 0, (command, done.output)
    unreachable = runner.invoke(cli, ["--db", url, "hygiene", "unreachable", "--json"])
    assert json.loads(unreachable.stdout)[0]["index"] == "idx_nodes_embedding"
    growth = runner.invoke(cli, ["--db", url, "hygiene", "growth", "--json", "--freq", "D"])
    assert {r["kind"] for r in json.loads(growth.stdout)} == {"observed", "forecast"}
    bad = runner.invoke(cli, ["--db", url, "hygiene", "sensitive", "--phone-region", "XX"])
    assert bad.exit_code != 0 and "phone_region" in str(bad.exception or bad.output)
    # The summary's options before a subcommand were dropped: another robot's secret listed.
    for option in (["--robot", "alpha"], ["--json"], ["--min-similarity", "0.5"]):
        misplaced = runner.invoke(cli, ["--db", url, "hygiene", *option, "sensitive"])
        assert misplaced.exit_code == 2, misplaced.output
        assert f"put it after the subcommand: htm-analytics hygiene sensitive {option[0]}" in \
            misplaced.output
    scoped = runner.invoke(cli, ["--db", url, "hygiene", "sensitive", "--robot", "alpha",
                                 "--json"])
    assert scoped.exit_code == 0 and json.loads(scoped.stdout) == []


def test_the_long_checks_show_their_progress(planted: dict[str, Any],
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A bar per check that reads every memory (the vector pairs compared, the memories
    scanned), on standard error; the results are those without it."""
    import tqdm.auto
    import tqdm.std

    # Every update drawn (tqdm draws at most ten a second), so that the last count shows.
    monkeypatch.setattr(tqdm.auto, "tqdm", functools.partial(tqdm.std.tqdm, mininterval=0))

    def without_and_with_a_bar(check: Any) -> tuple[Any, Any, str]:
        with ha.LongTermMemory(planted["url"], cache_size=0) as store:
            quiet = check(store)
            assert capsys.readouterr().err == ""
            shown = check(store, progress=True)
            bars = capsys.readouterr().err
            with pytest.raises(ha.ValidationError) as refused:
                check(store, progress="yes")
        assert refused.value.field == "progress"
        return quiet, shown, bars

    quiet, shown, bars = without_and_with_a_bar(ha.memory_hygiene)
    assert "near-duplicates" in bars and "861/861" in bars  # 42 vectors: 42 * 41 / 2 pairs
    assert "sensitive data" in bars and "42/42" in bars
    pd.testing.assert_frame_equal(shown.summary, quiet.summary)
    # The reachability check: every memory's own search through each index, counted as
    # its batches of 50 are done.
    quiet, shown, bars = without_and_with_a_bar(ha.unreachable_memories)
    searched = int(quiet.attrs["summary"]["checked"].sum())
    assert searched >= 42 and "own-vector searches" in bars and f"{searched}/{searched}" in bars
    pd.testing.assert_frame_equal(shown.attrs["summary"], quiet.attrs["summary"])


def test_the_summary_runs_its_one_long_statement_before_reading_every_memory(
        planted: dict[str, Any]) -> None:
    """The supersession statement (seconds at a million memories, and what a tight
    query_timeout stops) runs before the checks that read every memory for minutes; the
    summary and details keep their order."""
    statements: list[str] = []
    with ha.LongTermMemory(planted["url"], cache_size=0,
                           tracer=lambda sql, *_: statements.append(str(sql))) as store:
        result = ha.memory_hygiene(store)

    def first(marker: str) -> int:
        return next(i for i, text in enumerate(statements) if marker in text)

    supersession = first("specific AS")
    assert supersession < first("LEFT JOIN LATERAL")  # the vectors compared
    assert supersession < first("AS has_vector")  # the texts scanned
    order = ["near_duplicates", "sensitive", "supersession"]
    assert result.summary["check"].tolist() == order and list(result.details) == order


def test_report_section_and_advice(planted: dict[str, Any]) -> None:
    with ha.LongTermMemory(planted["url"], cache_size=0) as store:
        report = ha.build_report(store, benchmark=False)
        keys = [s.key for s in report.sections]
        assert keys[:3] == ["advice", "hygiene", "overview"]
        html = report.to_html()
        assert SECRET not in html and "[credential]" in html
        assert any(f.startswith("Hygiene: 1 group of near-duplicate memories")
                   for f in report.findings), report.findings
        advice = report.sections[0].data["findings"].set_index("check")
        assert advice.loc["credential_in_memory", "severity"] == "critical"
        assert f"DELETE FROM nodes WHERE id IN ({planted['leak']})" in \
            advice.loc["credential_in_memory", "sql"]
        assert advice.loc["near_duplicates", "severity"] == "info"
        assert "hygiene" not in [s.key for s in ha.build_report(
            store, benchmark=False, hygiene=False).sections]


def test_clean_memory_gives_no_hygiene_advice(database_url: str) -> None:
    with ha.LongTermMemory(database_url) as store:
        store.bulk_add(random_texts(30, seed=11), robots="alpha",
                       embeddings=random_vectors(30, seed=12))
        result = ha.memory_hygiene(store)
        assert result.summary["findings"].tolist() == [0, 0, 0] and result.total == 30
        findings = ha.advise(store, hygiene=result)
        assert not {"credential_in_memory", "personal_in_memory", "near_duplicates"} & \
            set(findings["check"])
        # A scope without a memory: nothing was checked, so no share (not 0%).
        for sample in (None, 10):
            empty = ha.memory_hygiene(store, robots="nobody", sample=sample)
            assert empty.total == 0 and empty.summary["checked"].tolist() == [0, 0, 0]
            assert empty.summary[["share", "share_low", "share_high"]].isna().all().all()
            assert empty.describe_sample() == "No memory to check in this scope."
    shown = CliRunner().invoke(cli, ["--db", database_url, "hygiene", "--robot", "nobody"])
    assert shown.exit_code == 0 and "nan" not in shown.stdout.lower()
    assert "near_duplicates: 0 findings, 0 memories\n" in shown.stdout


@pytest.mark.parametrize("era", ["seed", "gem"])
def test_both_eras_through_a_select_only_role(era: str, server_url: str,
                                              roles: dict[str, str]) -> None:  # noqa: F811
    with gem_database(server_url, era, roles) as url:
        with psycopg.connect(as_role(url, roles["writer"]), autocommit=True) as conn:
            vector = "[" + ",".join(["0.5"] * 8 + ["0"] * 1992) + "]"
            for content in ("Kafka carries the ORDER events, between services!", LEAK):
                conn.execute("INSERT INTO nodes (content, content_hash, embedding, "
                             "embedding_dimension) VALUES (%s, md5(%s), %s::vector, 8)",
                             (content, content, vector))
            if era == "gem":  # a soft-deleted twin is forgotten: not a finding
                conn.execute("UPDATE nodes SET deleted_at = now() WHERE content = %s",
                             (LEAK,))
        before = footprint(url)
        with ha.LongTermMemory(as_role(url, roles["reader"]), cache_size=0) as store:
            result = ha.memory_hygiene(store)
            pairs = result.details["near_duplicates"]
            twins = pairs[pairs["text_twin"]]
            assert len(twins) == 1
            assert "kafka carries the order events" in \
                (twins["content_a"].iloc[0] + twins["content_b"].iloc[0]).lower()
            assert len(result.details["sensitive"]) == (0 if era == "gem" else 1)
            findings = ha.advise(store, hygiene=result)
            statements = " ".join(findings["sql"])
            if era == "seed":
                assert "DELETE FROM nodes WHERE id IN" in statements
            # Two days on every memory is stale (no event log in either era), but the twin
            # forgotten in the gem's.
            import datetime as dt

            later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)
            stale = ha.stale_memories(store, not_recalled_for=1, now=later)
            cut = ha.stale_memories(store, not_recalled_for=1, now=later, limit=1)
            with psycopg.connect(as_role(url, roles["writer"])) as conn:
                live = conn.execute("SELECT count(*) FROM nodes" + (
                    " WHERE deleted_at IS NULL" if era == "gem" else "")).fetchone()
            assert live is not None and len(stale) == stale.attrs["stale_total"] == live[0]
            assert cut.attrs["stale_total"] == live[0] and len(cut) == 1
            assert "Kafka carries the ORDER events, between services!" in set(stale["content"])
            assert (LEAK in set(stale["content"])) == (era == "seed")
        assert footprint(url) == before


def test_unreachable_memories_and_the_ef_search_that_finds_them(ltm: ha.LongTermMemory) -> None:
    rng = np.random.default_rng(21)
    centres = random_vectors(8, seed=22)
    vectors = np.vstack([perturbed(centres[i % 8], rng.uniform(0.85, 0.95), i)
                         for i in range(1600)])
    texts = random_texts(1600, seed=23)
    ltm.bulk_add(texts, robots="alpha", embeddings=vectors)
    ltm.create_native_index(32)
    # A region of the graph deleted and reinserted: one cluster's memories go and come back.
    region = [t for i, t in enumerate(texts) if i % 8 == 3]
    for node in ltm.node_ids_by_content(region):
        assert node is not None and ltm.delete(node)
    ltm.bulk_add(region, robots="alpha", embeddings=vectors[3::8])

    # Searches at ef_search 1 and k 1 leave memories unfound (the graphs are built at random,
    # so how many each index misses varies): the problem to find.
    lost = ha.unreachable_memories(ltm, k=1, ef_search=1)
    summary = lost.attrs["summary"].set_index("index")
    assert list(summary.index) == ["idx_nodes_embedding_32", "idx_nodes_embedding"]
    assert summary["unreachable"].sum() > 0
    for index, row in summary.iterrows():
        mine = lost[lost["index"] == index]
        assert row["checked"] == row["memories"] == 1600
        assert row["unreachable"] == len(mine)
        assert row["share_low"] <= row["share"] == row["unreachable"] / 1600 \
            <= row["share_high"]
        assert row["still_unreachable"] == mine["found_at_ef_search"].isna().sum()
        if row["still_unreachable"] == 0:
            assert row["ef_search_finding_all"] == mine["found_at_ef_search"].max()
            assert f"SET hnsw.ef_search = {row['ef_search_finding_all']}" in row["what_to_do"]
    # Checked independently: the ef_search named does return each memory for its own vector.
    native = lost[(lost["index"] == "idx_nodes_embedding_32")
                  & lost["found_at_ef_search"].notna()].head(5)
    by_id = {n: i for i, n in enumerate(ltm.node_ids_by_content(texts))}
    with ltm.tuning_session() as session:
        for row in native.itertuples():
            found = session.knn(vectors[[by_id[row.node_id]]], dimension=32, k=1,
                                ef_search=int(row.found_at_ef_search))
            assert found["ids"][0].tolist() == [row.node_id] and found["used_index"]
    # At the default setting (ef_search 40, k 10) few are missed; a sample says how sure
    # that is.
    fine = ha.unreachable_memories(ltm, sample=100, seed=1)
    summary = fine.attrs["summary"]
    assert summary["checked"].tolist() == [100, 100] and len(fine) <= 5
    assert (summary["share_low"] <= summary["share"]).all()
    assert (summary["share_high"] < 0.15).all()


def test_wider_searches_go_fewer_to_a_statement(database_url: str) -> None:
    """The retries at wider ef_search cost more per search: at a million memories, 50 of
    them at 1000 in one statement outran the 30 s query_timeout. Each statement carries at
    most as many searches as its ef_search allows (50 at 40, 2 at 1000)."""
    from htm_analytics.analysis.reachability import _search_own
    from htm_analytics.store.hygiene import searches_per_statement

    assert [searches_per_statement(ef) for ef in (1, 40, 80, 100, 1000)] == [50, 50, 25, 20, 2]
    batches = []

    def tracer(text: str, params: Any, seconds: float) -> None:
        if isinstance(params, dict) and "ids" in params and "LATERAL" in text:
            batches.append(len(params["ids"]))

    with ha.LongTermMemory(database_url, tracer=tracer) as store:
        ids = store.bulk_add(random_texts(120, seed=41), robots="alpha",
                             embeddings=random_vectors(120, seed=42))["node_id"].tolist()
        for ef_search, expected in ((40, [50, 50, 20]), (100, [20] * 6), (1000, [2] * 60)):
            batches.clear()
            assert _search_own(store, ids, DIMENSION, 10, ef_search, padded=True) == []
            assert batches == expected


def test_vectors_of_a_named_model_are_checked_too(ltm: ha.LongTermMemory) -> None:
    """Every vector of the index's dimension is checked, whichever model made it (the
    toolkit's own writes name theirs)."""
    ltm.bulk_add(random_texts(30, seed=31), robots="alpha",
                 embeddings=random_vectors(30, seed=32), embedding_model=("test", "one"))
    ltm.bulk_add(random_texts(10, seed=33), robots="beta",
                 embeddings=random_vectors(10, seed=34))
    summary = ha.unreachable_memories(ltm).attrs["summary"]
    assert summary["memories"].tolist() == summary["checked"].tolist() == [40]
    assert ha.unreachable_memories(ltm, robots="beta").attrs["summary"]["checked"].tolist() \
        == [10]


@pytest.mark.parametrize("arguments, field", [
    ({"k": 0}, "k"), ({"k": True}, "k"), ({"ef_search": 1001}, "ef_search"),
    ({"sample": 0}, "sample"), ({"sample": 1.5}, "sample"), ({"seed": -1}, "seed"),
    ({"robots": 3}, "robots")])
def test_unreachable_arguments_are_checked(ltm: ha.LongTermMemory, arguments: dict[str, Any],
                                           field: str) -> None:
    with pytest.raises(ha.ValidationError) as caught:
        ha.unreachable_memories(ltm, **arguments)
    assert caught.value.field == field


def test_identical_vectors_crowding_out_a_memory_are_a_tie_not_a_fault(
        ltm: ha.LongTermMemory) -> None:
    same = np.repeat(random_vectors(1, seed=30), 3, axis=0)
    ltm.bulk_add([*random_texts(50, seed=31), "one", "two", "three"], robots="alpha",
                 embeddings=np.vstack([random_vectors(50, seed=32), same]))
    lost = ha.unreachable_memories(ltm, k=2)
    summary = lost.attrs["summary"]
    assert lost.empty and summary["unreachable"].tolist() == [0]
    assert summary["tied"].iloc[0] >= 1


def test_stale_memories(ltm: ha.LongTermMemory) -> None:
    import datetime as dt

    texts = random_texts(6, seed=40)
    now = dt.datetime.now(dt.UTC)
    ltm.bulk_add(texts, robots="alpha", remembered_at=[now - dt.timedelta(days=30)] * 6)
    ids = ltm.node_ids_by_content(texts)
    robot = ltm.register_robot("alpha")
    ltm.update_working_memory(robot, recalled=[ids[0], ids[1]])
    # Remembered a month ago: nothing is stale after 60 days.
    assert ha.stale_memories(ltm, not_recalled_for=60).empty
    later = ha.stale_memories(ltm, not_recalled_for=dt.timedelta(days=10))
    assert sorted(later["node_id"]) == sorted(ids[2:])
    assert later["never_recalled"].all() and (later["idle_days"] > 10).all()
    # Asked from further on, the recalled ones are stale too, with their last recall.
    much_later = ha.stale_memories(ltm, not_recalled_for=10, now=now + dt.timedelta(days=40))
    recalled = much_later.set_index("node_id").loc[[ids[0], ids[1]]]
    assert not recalled["never_recalled"].any() and recalled["last_recalled"].notna().all()
    assert set(recalled["recalls_logged"]) == {1}
    for bad in (0, -1, "90", dt.timedelta(0), True):
        with pytest.raises(ha.ValidationError) as caught:
            ha.stale_memories(ltm, not_recalled_for=bad)
        assert caught.value.field == "not_recalled_for"


@FAST
@given(k=anything, ef_search=anything, sample=anything, days=anything, now=anything)
def test_hostile_arguments_of_the_slower_checks(ltm: ha.LongTermMemory, k: Any, ef_search: Any,
                                                sample: Any, days: Any, now: Any) -> None:
    try:
        ha.unreachable_memories(ltm, k=k, ef_search=ef_search, sample=sample)
    except ha.ValidationError as exc:
        assert exc.field in {"k", "ef_search", "sample"}
    try:
        ha.stale_memories(ltm, not_recalled_for=days, now=now)
    except ha.ValidationError as exc:
        assert exc.field in {"not_recalled_for", "now"}


def test_memory_growth_forecasts_a_steady_rise(ltm: ha.LongTermMemory) -> None:
    import datetime as dt

    # 10, 20, ..., 50 new memories in five months: the next month's line says 60.
    months = [dt.datetime(2026, m, 15, tzinfo=dt.UTC) for m in range(1, 6)]
    texts = random_texts(150, seed=50)
    when = [month for i, month in enumerate(months) for _ in range(10 * (i + 1))]
    ltm.bulk_add(texts, robots="alpha", remembered_at=when)
    growth = ha.memory_growth(ltm, horizon=2, freq="M")
    total = growth[growth["robot"] == "(all robots)"]
    assert total["kind"].tolist() == ["observed"] * 5 + ["forecast"] * 2
    assert total["memories"].tolist() == [10, 30, 60, 100, 150, 210, 280]
    assert total["new"].iloc[5:].tolist() == pytest.approx([60, 70])
    # A perfect line leaves no spread: the interval closes on the forecast.
    assert total["memories_low"].iloc[5:].tolist() == pytest.approx([210, 280])
    assert total["bytes"].iloc[4] == sum(len(t.encode()) for t in texts)
    alpha = growth[growth["robot"] == "alpha"]
    assert alpha["memories"].iloc[4] == 150
    # The 90 memories of the last two months cost the index what any 90 do: it was the
    # whole index's size over them.
    window = ha.memory_growth(ltm, horizon=1, freq="M",
                              timeframe=(months[3], dt.datetime(2026, 6, 1, tzinfo=dt.UTC)))
    in_window = window[window["robot"] == "(all robots)"]
    assert in_window["memories"].iloc[1] == 90 and total["index_bytes"].iloc[4] > 0
    assert in_window["index_bytes"].iloc[1] == pytest.approx(
        total["index_bytes"].iloc[4] * 90 / 150)
    for arguments, field in (({"horizon": 0}, "horizon"), ({"freq": "h"}, "freq"),
                             ({"confidence": 1.0}, "confidence"), ({"freq": "x"}, "freq")):
        with pytest.raises(ha.ValidationError) as caught:
            ha.memory_growth(ltm, **arguments)
        assert caught.value.field == field


@pytest.mark.parametrize("freq", ["W", "M"])
def test_memory_growth_per_robot_lines_match_the_one_robot_fit(freq: str) -> None:
    # The all-robots-at-once fit must give what fitting each robot alone gives: robots
    # with one, two and many periods, gaps, and robots starting and ending at different times.
    import pandas as pd

    from htm_analytics.analysis.growth import _robot_series, _series
    from htm_analytics.frames import period_unit

    pandas_freq = period_unit(freq)[1]
    grid = pd.date_range("2025-01-01", periods=14, freq=pandas_freq, tz="UTC")
    rng = np.random.default_rng(7)
    rows = []
    for robot, (start, stop) in enumerate([(0, 14), (3, 4), (5, 7), (2, 12), (9, 14), (0, 3)]):
        for index in range(start, stop):
            if stop - start < 4 or rng.random() > 0.3:
                rows.append({"robot": f"r{robot}", "period": grid[index],
                             "new": int(rng.integers(1, 40))})
    counts = pd.DataFrame(rows)
    together = _robot_series(counts, pandas_freq, 3, 0.9)
    alone = pd.concat([_series(part, str(robot), pandas_freq, 3, 0.9, None)
                       for robot, part in counts.groupby("robot", sort=False)],
                      ignore_index=True)
    pd.testing.assert_frame_equal(together.astype(alone.dtypes.to_dict()), alone,
                                  check_exact=False, rtol=1e-9, atol=1e-9)


def test_a_report_shows_no_credential_wherever_its_memory_appears(
        database_url: str, tmp_path: Path) -> None:
    """A credential held by memories that are also near-duplicates, supersession candidates
    and the most reinforced: every text a report shows is masked as the sensitive excerpts
    are, and one cut where the key begins loses the cut word, which the detectors could no
    longer recognise."""
    later = "x" * 128 + f" {SECRET} and more words after it"  # cut inside the key at 140
    with ha.LongTermMemory(database_url) as store:
        base = random_vectors(1, seed=21)[0]
        older, newer = LEAK, f"now the deploy robot uses access key {SECRET} for prod"
        store.bulk_add(random_texts(30, seed=22), robots="alpha",
                       embeddings=random_vectors(30, seed=23))
        store.bulk_add([older], robots="alpha", embeddings=base[None, :],
                       tags=[["deploy:staging"]],
                       remembered_at=[pd.Timestamp("2026-01-01", tz="UTC")])
        store.bulk_add([newer, later, f"copied: {LEAK}"], robots="beta",
                       embeddings=np.vstack([perturbed(base, 0.9, 2),
                                             random_vectors(1, seed=24),
                                             perturbed(base, 0.99, 3)]),
                       tags=[["deploy:staging"], [], []])
        for robot in ("gamma", "delta", "epsilon"):  # the most reinforced memories
            store.bulk_add([older, later], robots=robot,
                           embeddings=np.vstack([base, random_vectors(1, seed=24)]))
        report = ha.build_report(store, benchmark=False)
    hygiene = next(s for s in report.sections if s.key == "hygiene")
    assert len(hygiene.data["near_duplicates"]) and len(hygiene.data["supersession"])
    reinforced = next(s.data["most_reinforced"] for s in report.sections
                      if "most_reinforced" in s.data)
    assert reinforced["content"].str.contains("[credential]", regex=False).sum() == 1
    assert reinforced["content"].str.endswith("x…").sum() == 1  # the cut key left out
    shown = report.to_html() + report.write_markdown(tmp_path / "r.md").read_text()
    assert SECRET not in shown and SECRET[:8] not in shown
    assert shown.count("[credential]") >= 3
    for section in report.sections:
        for name, frame in section.data.items():
            if isinstance(frame, pd.DataFrame):
                assert not frame.astype(str).apply(
                    lambda column: column.str.contains(SECRET[:8], regex=False)).any().any(), \
                    (section.key, name)
