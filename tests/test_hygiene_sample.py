"""The hygiene checks on a seeded sample: the sample is chosen in the database and repeats,
each sampled check finds exactly what the full check finds for the sampled memories, the
estimates are the sample's shares with their interval, the report says what it checked, and
bad sample arguments name their field."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from fixtures_db import temporary_database
from hypothesis import assume, given

import htm_analytics as ha
from htm_analytics import LongTermMemory, ValidationError
from htm_analytics.analysis._common import wilson_interval
from htm_analytics.cli import cli
from htm_analytics.report import hygiene_section
from tests.test_hostile_input import FAST, anything
from tests.test_hygiene import perturbed, random_texts, random_vectors

DIMENSION = 32
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SAMPLE, SEED = 60, 5


@pytest.fixture(scope="module")
def memory(server_url: str) -> Iterator[dict[str, Any]]:
    """120 memories: groups of two and three near-duplicates, a case twin, memories without
    a vector (one nearly equal to another's text), leaked credentials and e-mail addresses,
    and subjects whose later memories change an earlier fact (shared specific tags)."""
    with temporary_database(server_url, "htm_sample") as url, \
            LongTermMemory(url, cache_size=0) as store:
        texts, vectors = random_texts(90, seed=21), random_vectors(90, seed=22)
        tags = [[f"subject:s{i % 12}", "fleet:team-01" if i % 2 else "fleet:team-02"]
                for i in range(90)]
        store.bulk_add(texts, robots=["alpha", "beta", "gamma"] * 30, embeddings=vectors,
                       tags=tags, remembered_at=[START + dt.timedelta(hours=i)
                                                 for i in range(90)])
        extra_texts, extra_vectors = [], []
        for i in range(0, 20, 2):  # near-duplicates: pairs, and a third for some
            extra_texts.append(f"again: {texts[i]}")
            extra_vectors.append(perturbed(vectors[i], 0.98, 100 + i))
            if i % 4 == 0:
                extra_texts.append(f"once more: {texts[i]}")
                extra_vectors.append(perturbed(vectors[i], 0.97, 200 + i))
        extra_texts.append(texts[30].upper() + "!")  # a text twin, vector far away
        extra_vectors.append(random_vectors(1, seed=23)[0])
        for i in range(40, 48):  # leaks
            extra_texts.append(f"deploy key AKIAIOSFODNN7EXAMPL{i % 10} used by ops {i}"
                               if i % 2 else f"write to person{i}@example.org about it")
            extra_vectors.append(random_vectors(1, seed=300 + i)[0])
        store.bulk_add(extra_texts, robots="delta", embeddings=np.vstack(extra_vectors),
                       tags=[[f"subject:s{i % 12}"] for i in range(len(extra_texts))],
                       remembered_at=[START + dt.timedelta(days=10, hours=i)
                                      for i in range(len(extra_texts))])
        bare = [texts[50].replace(" ", "  ") + "!", "a memory without any vector at all",
                "another memory kept without a vector"]
        store.bulk_add(bare, robots="alpha")
        yield {"url": url, "bare": [int(i) for i in store.node_ids_by_content(bare)
                                    if i is not None]}


@pytest.fixture(scope="module")
def store(memory: dict[str, Any]) -> Iterator[LongTermMemory]:
    with LongTermMemory(memory["url"], cache_size=0) as live:
        yield live


def pairs_of(frame: pd.DataFrame, a: str, b: str) -> set[tuple[int, int]]:
    return {(int(x), int(y)) for x, y in zip(frame[a], frame[b])}


def touching(pairs: set[tuple[int, int]], ids: set[int]) -> set[tuple[int, int]]:
    return {p for p in pairs if p[0] in ids or p[1] in ids}


def test_the_sample_is_chosen_in_the_database_and_repeats(store: LongTermMemory,
                                                          memory: dict[str, Any]) -> None:
    every = {int(i) for batch in store.iter_contents() for i in batch["id"]}
    ids = store.sample_ids(SAMPLE, seed=SEED)
    assert len(ids) == SAMPLE and set(ids.tolist()) <= every
    assert np.all(np.diff(ids) > 0)
    assert ids.tolist() == store.sample_ids(SAMPLE, seed=SEED).tolist()
    assert ids.tolist() != store.sample_ids(SAMPLE, seed=SEED + 1).tolist()
    # a smaller sample of the same seed is part of the larger one (lowest hashes first)
    assert set(store.sample_ids(20, seed=SEED).tolist()) <= set(ids.tolist())
    beta = store.sample_ids(10, seed=SEED, scope=ha.frames.scope_params(robots="beta"))
    robots = store.describe_nodes(beta.tolist())["robots"]
    assert len(beta) == 10 and robots.str.contains("beta").all()
    assert len(store.sample_ids(10_000, seed=SEED)) == len(every)
    # Of one dimension's vectors only (the reachability check's sample of an index): the
    # memories without a vector are never drawn, and a large enough sample is all of them.
    vectors = store.vector_ids(DIMENSION)
    drawn = store.sample_ids(20, seed=SEED, dimension=DIMENSION)
    assert len(drawn) == 20 and set(drawn.tolist()) <= set(vectors.tolist())
    assert set(drawn.tolist()) <= set(store.sample_ids(30, seed=SEED, dimension=DIMENSION))
    assert store.sample_ids(10_000, seed=SEED, dimension=DIMENSION).tolist() == \
        vectors.tolist() and len(vectors) < len(every)
    statements: list[str] = []
    with LongTermMemory(memory["url"], cache_size=0,
                        tracer=lambda sql, *_: statements.append(str(sql))) as traced:
        summary = ha.unreachable_memories(traced, sample=20, seed=SEED).attrs["summary"]
    assert summary["checked"].tolist() == [20] * len(summary)
    assert summary["memories"].tolist() == [len(vectors)] * len(summary)
    assert any("hashint8extended" in text for text in statements)  # the same kind of sample


def test_each_sampled_check_finds_what_the_full_check_finds_for_the_sample(
        store: LongTermMemory, memory: dict[str, Any]) -> None:
    full = ha.memory_hygiene(store, pairs="all")
    sampled = ha.memory_hygiene(store, sample=SAMPLE, seed=SEED, pairs="all")
    ids = set(store.sample_ids(SAMPLE, seed=SEED).tolist())
    assert not full.sampled and sampled.sampled
    assert (sampled.checked, sampled.total, sampled.seed) == (SAMPLE, full.total, SEED)

    whole, part = full.details["near_duplicates"], sampled.details["near_duplicates"]
    # A text twin whose vectors are far apart is found by the full check only (a sample
    # searches by vector, and by text only for memories without one).
    by_text = pairs_of(whole[whole["basis"] == "text"], "node_a", "node_b")
    assert touching(by_text, ids)  # the planted one is in the sample
    expected = touching(pairs_of(whole, "node_a", "node_b"), ids) - by_text
    assert pairs_of(part, "node_a", "node_b") == expected
    assert "vector" in set(part["basis"])
    assert len(expected) >= 4  # the sample holds some of every kind of pair
    merged = part.merge(whole, on=["node_a", "node_b"], suffixes=("", "_full"))
    np.testing.assert_allclose(merged["similarity"], merged["similarity_full"], atol=1e-5)
    assert (merged["text_twin"] == merged["text_twin_full"]).all()
    assert (merged["basis"] == merged["basis_full"]).all()

    found, leaks = sampled.details["sensitive"], full.details["sensitive"]
    assert len(found) > 0
    assert_frame_rows_equal(found, leaks[leaks["node_id"].isin(ids)])

    # memories without a vector: through the trigram index, the same pairs as the full check
    trigram = pairs_of(whole[whole["basis"] == "trigram"], "node_a", "node_b")
    bare = set(memory["bare"])
    assert touching(trigram, bare)
    assert pairs_of(store.sampled_trigram_pairs(sorted(bare), min_similarity=0.95),
                    "node_a", "node_b") == touching(trigram, bare)

    newer, every = sampled.details["supersession"], full.details["supersession"]
    expected = touching(pairs_of(every, "node_old", "node_new"), ids)
    assert len(expected) > 0
    assert pairs_of(newer, "node_old", "node_new") == expected
    merged = newer.merge(every, on=["node_old", "node_new"], suffixes=("", "_full"))
    assert (merged["shared_tags"] == merged["shared_tags_full"]).all()


def assert_frame_rows_equal(left: pd.DataFrame, right: pd.DataFrame) -> None:
    columns = ["node_id", "kind", "detector", "excerpt"]
    pd.testing.assert_frame_equal(left[columns].sort_values(columns).reset_index(drop=True),
                                  right[columns].sort_values(columns).reset_index(drop=True))


def test_the_estimates_are_the_sample_shares_with_their_interval(
        store: LongTermMemory) -> None:
    full = ha.memory_hygiene(store)
    sampled = ha.memory_hygiene(store, sample=SAMPLE, seed=SEED)
    ids = set(store.sample_ids(SAMPLE, seed=SEED).tolist())
    duplicates = full.details["near_duplicates"]
    involved = {
        "near_duplicates": {n for p in pairs_of(duplicates[duplicates["basis"] != "text"],
                                                "node_a", "node_b") for n in p},
        "sensitive": set(full.details["sensitive"]["node_id"].astype(int)),
        "supersession": {n for p in pairs_of(full.details["supersession"],
                                             "node_old", "node_new") for n in p},
    }
    for row in sampled.summary.itertuples():
        hits = len(involved[str(row.check)] & ids)
        assert (row.memories, row.checked) == (hits, SAMPLE)
        assert row.share == pytest.approx(hits / SAMPLE)
        assert (row.share_low, row.share_high) == pytest.approx(wilson_interval(hits, SAMPLE))
        assert f"{hits:,} of the {SAMPLE:,} sampled memories" in row.what_it_means
    assert (full.summary["share_low"] == full.summary["share"]).all()
    assert (full.summary["checked"] == full.total).all()
    assert sampled.describe_sample().startswith(
        f"Checked {SAMPLE:,} of {full.total:,} memories, chosen by seed {SEED}")


def test_near_duplicates_can_search_a_sample_of_the_sample(store: LongTermMemory) -> None:
    full = ha.memory_hygiene(store, checks="near_duplicates")
    nested = ha.memory_hygiene(store, sample=SAMPLE, duplicates_sample=25, seed=SEED)
    first = set(store.sample_ids(25, seed=SEED).tolist())
    whole = full.details["near_duplicates"]
    expected = touching(pairs_of(whole[whole["basis"] != "text"], "node_a", "node_b"), first)
    assert pairs_of(nested.details["near_duplicates"], "node_a", "node_b") == expected
    rows = nested.summary.set_index("check")["checked"].to_dict()
    assert rows == {"near_duplicates": 25, "sensitive": SAMPLE, "supersession": SAMPLE}
    assert (nested.checked, nested.duplicates_checked) == (SAMPLE, 25)
    assert f"of {full.total:,} memories (near-duplicates: the first 25 of them" in \
        nested.describe_sample()
    # on its own: the other checks read every memory
    alone = ha.memory_hygiene(store, duplicates_sample=25, seed=SEED)
    assert alone.sampled and alone.checked == full.total
    assert alone.summary.set_index("check")["checked"].to_dict()["sensitive"] == full.total
    # ...and are said to: counts, not estimates, for them; only near-duplicates sampled.
    assert alone.describe_sample().startswith(
        f"Checked every one of the {full.total:,} memories; near-duplicates on the first 25")
    from htm_analytics.report.hygiene import _headline

    finding = _headline(alone)
    assert finding.startswith(f"Hygiene, on all {full.total:,} memories (seed {SEED}, "
                              "near-duplicates on 25 of them): an estimated ")
    assert finding.count("an estimated") == 1 and finding.count("interval") == 1


def test_sampled_searches_go_a_few_memories_per_statement(memory: dict[str, Any]) -> None:
    # A cold padded index at a million memories took 110-150 ms a search: a thousand in one
    # statement outran the 30 s query_timeout and cost the report its whole run.
    searched: list[list[int]] = []

    def tracer(sql: str, params: Any, seconds: float) -> None:
        if "sampled memories' near-duplicates" in str(sql):
            searched.append(list(params["ids"]))

    with LongTermMemory(memory["url"], cache_size=0, tracer=tracer) as traced:
        found = ha.near_duplicates(traced, sample=SAMPLE, seed=SEED)
        drawn = traced.sample_ids(SAMPLE, seed=SEED).tolist()
    # at the sampled searches' ef_search of 100, 20 to a statement: 60 in three
    assert len(found) > 0 and list(map(len, searched)) == [20, 20, 20]
    assert [i for ids in searched for i in ids] == drawn


def test_a_sample_as_large_as_the_memory_is_the_full_check(store: LongTermMemory) -> None:
    full = ha.memory_hygiene(store)
    again = ha.memory_hygiene(store, sample=full.total, seed=3)
    assert not again.sampled and again.seed is None
    pd.testing.assert_frame_equal(again.summary, full.summary)
    assert "sample" not in ha.near_duplicates(store, sample=full.total).attrs


def test_the_report_and_the_advice_say_what_was_sampled(store: LongTermMemory) -> None:
    report = ha.build_report(store, benchmark=False, hygiene_sample=SAMPLE)
    section = next(s for s in report.sections if s.key == "hygiene")
    total = store.count_in_scope()
    assert f"Checked {SAMPLE:,} of {total:,} memories, chosen by seed 0" in section.text
    assert any(f.startswith(f"Hygiene, on a sample of {SAMPLE:,} of {total:,} memories")
               for f in report.findings)
    advice = next(s for s in report.sections if s.key == "advice").data["findings"]
    hygiene = advice[advice["check"].isin(["credential_in_memory", "personal_in_memory",
                                            "near_duplicates", "supersession_candidates"])]
    assert len(hygiene) and hygiene["evidence"].str.contains(
        f"among {SAMPLE:,} sampled of {total:,} memories").all()
    section, _ = hygiene_section(store, sample=None)
    assert f"Checked every one of the {total:,} memories." in section.text


def test_the_report_runs_the_detectors_in_the_workers_asked(
        store: LongTermMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_report(workers=2)`` hands its detectors to two processes, with the findings of
    one; the command's ``--workers`` is checked before any work."""
    from htm_analytics.analysis import sensitive

    asked: list[int] = []

    def recording(function: Any, items: Any, *, workers: int) -> Iterator[Any]:
        asked.append(workers)
        return real(function, items, workers=workers)

    real = sensitive.ordered_map
    monkeypatch.setattr(sensitive, "ordered_map", recording)
    monkeypatch.setattr(sensitive, "_PARALLEL_FROM", 0)
    built = {workers: ha.build_report(store, benchmark=False, advice=False, hygiene_sample=None,
                                      workers=workers) for workers in (1, 2)}
    assert asked == [1, 2]
    found = [next(s for s in report.sections if s.key == "hygiene").data["sensitive"]
             for report in built.values()]
    assert len(found[0])
    pd.testing.assert_frame_equal(found[1], found[0])
    refused = CliRunner().invoke(cli, ["report", "--workers", "0"])
    assert refused.exit_code == 2 and "--workers" in refused.output


def test_the_commands_take_a_sample(memory: dict[str, Any], store: LongTermMemory) -> None:
    runner = CliRunner()
    total = store.count_in_scope()
    table = runner.invoke(cli, ["--db", memory["url"], "hygiene", "--sample", str(SAMPLE),
                                "--seed", str(SEED)])
    assert table.exit_code == 0, table.output
    assert f"Checked {SAMPLE:,} of {total:,} memories, chosen by seed {SEED}" in table.output
    assert "95% interval" in table.output
    rows = json.loads(runner.invoke(cli, ["--db", memory["url"], "hygiene", "--sample",
                                          str(SAMPLE), "--seed", str(SEED), "--json"]).stdout)
    expected = ha.memory_hygiene(store, sample=SAMPLE, seed=SEED).summary
    assert [r["memories"] for r in rows] == expected["memories"].tolist()
    advice = runner.invoke(cli, ["--db", memory["url"], "advise", "--no-sweep",
                                 "--hygiene-sample", str(SAMPLE), "--json"])
    assert advice.exit_code == 0, advice.output
    assert f"among {SAMPLE:,} sampled of {total:,} memories" in advice.stdout
    refused = runner.invoke(cli, ["--db", memory["url"], "hygiene", "--sample", "0"])
    assert refused.exit_code != 0 and "--sample" in refused.output
    # Each check's own command takes the same sample, and says so on stderr.
    checks = {"duplicates": lambda: ha.near_duplicates(store, sample=SAMPLE, seed=SEED),
              "sensitive": lambda: ha.sensitive_memories(store, sample=SAMPLE, seed=SEED),
              "supersession": lambda: ha.supersession_candidates(store, sample=SAMPLE,
                                                                 seed=SEED)}
    for command, check in checks.items():
        done = runner.invoke(cli, ["--db", memory["url"], "hygiene", command, "--sample",
                                   str(SAMPLE), "--seed", str(SEED), "--json"])
        assert done.exit_code == 0, done.output
        expected = check()
        assert len(json.loads(done.stdout)) == len(expected) > 0
        drawn = expected.attrs["sample"]
        assert (f"checked a sample of {SAMPLE:,} of {total:,} memories (--seed {SEED}): "
                f"{drawn['involved']:,} involved") in done.stderr
        refused = runner.invoke(cli, ["--db", memory["url"], "hygiene", command, "--sample",
                                      "0"])
        assert refused.exit_code == 2 and "--sample" in refused.output
    unseeded = runner.invoke(cli, ["--db", memory["url"], "hygiene", "unreachable",
                                   "--sample", "20", "--seed", "-1"])
    assert unseeded.exit_code == 2 and "--seed" in unseeded.output


@FAST
@given(sample=anything, seed=anything, duplicates=anything)
def test_bad_sample_arguments_name_their_field(store: LongTermMemory, sample: Any,
                                               seed: Any, duplicates: Any) -> None:
    for check in (ha.memory_hygiene, ha.near_duplicates, ha.sensitive_memories,
                  ha.supersession_candidates):
        try:
            check(store, sample=sample, seed=seed)
        except ValidationError as exc:
            assert exc.field in {"sample", "seed"}
    try:
        ha.memory_hygiene(store, sample=sample, duplicates_sample=duplicates, seed=seed)
    except ValidationError as exc:
        assert exc.field in {"sample", "duplicates_sample", "seed"}


@FAST
@given(hygiene_sample=anything)
def test_a_bad_report_sample_is_refused_before_any_work(store: LongTermMemory,
                                                        hygiene_sample: Any) -> None:
    assume(hygiene_sample is not None and not (
        isinstance(hygiene_sample, (int, np.integer)) and not isinstance(hygiene_sample, bool)
        and 1 <= hygiene_sample <= 2**63 - 1))
    with pytest.raises(ValidationError) as caught:
        ha.build_report(store, hygiene_sample=hygiene_sample)
    assert caught.value.field == "hygiene_sample"


@FAST
@given(workers=anything)
def test_bad_report_workers_are_refused_before_any_work(store: LongTermMemory,
                                                        workers: Any) -> None:
    assume(not (isinstance(workers, int) and not isinstance(workers, bool)
                and 1 <= workers <= 64))
    with pytest.raises(ValidationError) as caught:
        ha.build_report(store, workers=workers)
    assert caught.value.field == "workers"
