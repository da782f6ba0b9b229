"""Stale memories: the list, cut or not, equals one worked out here from the planted recalls
(access columns, the event log, both, neither), in scope and out; ``stale_total`` counts what a
limit leaves out; texts are shown as :func:`shorten_text` shows the whole text, from their first
characters only; bad limits are refused before any query; the CLI's ``--limit``."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

import htm_analytics as ha
from htm_analytics.analysis import STALE_COLUMNS
from htm_analytics.cli import cli
from htm_analytics.store.display import shorten_beginning, shorten_text
from tests.test_hostile_input import FAST, anything, hostile_limit

DAY = dt.timedelta(days=1)
# The planted times are relative to the real clock, so that the CLI (which measures from the
# server's clock) sees the same list as the library measuring from NOW.
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
START = NOW - 100 * DAY
IDLE = 30  # days: the cutoff is START + 70 days
LONG = ("The deploy robot restarted nginx on web-03 after the TLS certificate renewal failed "
        "twice; the on-call engineer approved the rollback at 02:14 and asked for a "
        "post-mortem by Friday, with the timeline and the alert thresholds attached.")
SPACES = "word" + " " * 300 + "\n\t" * 60 + "after much whitespace, the rest of the memory"
UNICODE = "Überprüfung der Datenbank 日本語のメモ 🚀 — " * 12 + "fin"
ODD_SPACES = ("non\xa0breaking\u2028line\u3000ideographic\x1cfile " * 6) + "end"


def _planted() -> list[dict[str, Any]]:
    """Each memory: text, robots, day created, access column (count, day) and recall and
    retrieve event days."""
    rows = [
        ("short and never recalled", ["alpha"], 0, (0, None), [], []),
        (LONG, ["alpha", "beta"], 5, (2, 60), [], []),
        ("recalled by the log after the cutoff", ["alpha"], 1, (0, None), [10, 80], []),
        # the schema sets last_accessed at creation: with access_count 0 it is no recall
        ("accessed column set but never counted", ["beta"], 2, (0, 90), [], []),
        ("both: the log's recall is the later", ["alpha"], 3, (1, 20), [40], [85]),
        ("two logged recalls, no access count", ["gamma"], 4, (0, None), [50, 65], []),
        ("created after the cutoff", ["alpha"], 75, (0, None), [], []),
        (SPACES, ["beta"], 3, (0, None), [], []),
        (UNICODE, ["beta", "gamma"], 4, (0, None), [], []),
        ("x" * 120, ["alpha"], 6, (0, None), [], []),
        ("y" * 121, ["alpha"], 6, (0, None), [], []),
        (ODD_SPACES, ["gamma"], 2, (0, None), [], []),
        ("recalled through the access columns after the cutoff", ["alpha"], 0, (3, 75), [],
         []),
        ("access column after the cutoff, log before", ["beta"], 1, (1, 71), [69], []),
        ("only a retrieve event", ["alpha"], 2, (0, None), [], [30]),
        # zeta is registered first: its name sorts last but its id first
        ("remembered by zeta and alpha", ["zeta", "alpha"], 3, (0, None), [], []),
    ]
    return [{"text": t, "robots": r, "created": START + c * DAY, "access": a, "recalls": e,
             "retrieves": g} for t, r, c, a, e, g in rows]


@pytest.fixture
def planted(ltm: ha.LongTermMemory, db: psycopg.Connection) -> Iterator[list[dict[str, Any]]]:
    memories = _planted()
    ltm.register_robot("zeta")
    texts = [m["text"] for m in memories for _ in m["robots"]]
    ltm.bulk_add(texts, robots=[r for m in memories for r in m["robots"]],
                 remembered_at=[m["created"] for m in memories for _ in m["robots"]])
    ids = ltm.node_ids_by_content([m["text"] for m in memories])
    for memory, node in zip(memories, ids):
        memory["id"] = int(node)
        count, day = memory["access"]
        db.execute("UPDATE nodes SET access_count = %s, last_accessed = %s WHERE id = %s",
                   (count, START + (day if day is not None else 95) * DAY, node))
        for kind in ("recall", "retrieve"):
            for day in memory[kind + "s"]:
                db.execute("INSERT INTO memory_events (occurred_at, kind, node_id) "
                           "VALUES (%s, %s, %s)", (START + day * DAY, kind, node))
    yield memories


def expected(memories: list[dict[str, Any]], *, robots: set[str] | None = None,
             timeframe: tuple[dt.datetime, dt.datetime] | None = None) -> pd.DataFrame:
    """The list worked out from the planted facts: stale when created before the cutoff and
    the later of the counted access and the last logged recall (if any) is before it."""
    cutoff = NOW - IDLE * DAY
    rows = []
    for m in memories:
        if robots is not None and not robots & set(m["robots"]):
            continue
        if timeframe is not None and not timeframe[0] <= m["created"] <= timeframe[1]:
            continue
        count, day = m["access"]
        times = [START + d * DAY for d in m["recalls"]]
        if count > 0:
            times.append(START + day * DAY)
        last = max(times) if times else None
        if m["created"] >= cutoff or (last is not None and last >= cutoff):
            continue
        since = last or m["created"]
        rows.append({"node_id": m["id"], "created_at": m["created"], "last_recalled": last,
                     "never_recalled": last is None,
                     "idle_days": (NOW - since).total_seconds() / 86400,
                     "access_count": count, "recalls_logged": len(m["recalls"]),
                     "content": shorten_text(m["text"], 120),
                     "robots": ", ".join(sorted(m["robots"])), "_since": since})
    frame = pd.DataFrame(rows, columns=[*STALE_COLUMNS, "_since"])
    frame = frame.sort_values(["_since", "node_id"]).drop(columns="_since")
    frame["last_recalled"] = pd.to_datetime(frame["last_recalled"], utc=True)
    return frame.astype(STALE_COLUMNS).reset_index(drop=True)


SCOPES: list[dict[str, Any]] = [
    {}, {"robots": "beta"}, {"robots": ["gamma", "beta"]},
    {"timeframe": (START + 2 * DAY, START + 4 * DAY)},
    {"robots": "alpha", "timeframe": (START, START + 5 * DAY)},
]


@pytest.mark.parametrize("scope", SCOPES)
def test_the_list_with_and_without_a_limit_is_the_one_worked_out(
        ltm: ha.LongTermMemory, planted: list[dict[str, Any]], scope: dict[str, Any]) -> None:
    robots = scope.get("robots")
    want = expected(planted, robots=None if robots is None else set(
        [robots] if isinstance(robots, str) else robots), timeframe=scope.get("timeframe"))
    assert len(want) >= 2, want  # every scope lists something, so the limits cut
    found = ha.stale_memories(ltm, not_recalled_for=IDLE, now=NOW, **scope)
    pd.testing.assert_frame_equal(found, want)
    assert found.attrs["stale_total"] == len(want)
    assert found.attrs["cutoff"] == NOW - IDLE * DAY
    for limit in (1, 2, len(want) - 1, len(want), len(want) + 5):
        cut = ha.stale_memories(ltm, not_recalled_for=IDLE, now=NOW, limit=limit, **scope)
        pd.testing.assert_frame_equal(cut, want.head(limit))
        assert cut.attrs["stale_total"] == len(want)


def test_the_planted_cases_are_where_they_belong(ltm: ha.LongTermMemory,
                                                 planted: list[dict[str, Any]]) -> None:
    """The worked-out list itself, read case by case (what the helper is held to above)."""
    by_text = {m["text"]: m["id"] for m in planted}
    found = ha.stale_memories(ltm, not_recalled_for=IDLE, now=NOW).set_index("node_id")
    assert len(found) == 12
    for text in ("recalled by the log after the cutoff", "created after the cutoff",
                 "recalled through the access columns after the cutoff",
                 "access column after the cutoff, log before"):
        assert by_text[text] not in found.index, text
    never = found.loc[by_text["accessed column set but never counted"]]
    assert never["never_recalled"] and pd.isna(never["last_recalled"])
    both = found.loc[by_text["both: the log's recall is the later"]]
    assert both["last_recalled"] == START + 40 * DAY and both["recalls_logged"] == 1
    assert found.loc[by_text["only a retrieve event"], "never_recalled"]
    assert found.loc[by_text[SPACES], "content"] == "word after much whitespace, the rest " \
                                                    "of the memory"
    assert found.loc[by_text["x" * 120], "content"] == "x" * 120
    assert found.loc[by_text["y" * 121], "content"] == "y" * 119 + "…"
    assert found.loc[by_text[LONG], "robots"] == "alpha, beta"
    assert found.loc[by_text["remembered by zeta and alpha"], "robots"] == "alpha, zeta"
    assert found.index[0] == by_text["short and never recalled"]  # idle since day 0


def test_the_texts_are_read_no_further_than_needed(database_url: str,
                                                   planted: list[dict[str, Any]]) -> None:
    """The statement cuts each text on the server; only a beginning that is mostly spaces
    is read further (SPACES here), in the same transaction."""
    statements: list[tuple[str, Any]] = []
    with ha.LongTermMemory(database_url, cache_size=0,
                           tracer=lambda text, params, _: statements.append((text, params))
                           ) as traced:
        found = ha.stale_memories(traced, not_recalled_for=IDLE, now=NOW)
    assert len(found) == 12
    longer = [params for _, params in statements if isinstance(params, dict) and "ids" in params]
    by_text = {m["text"]: m["id"] for m in planted}
    assert [p["ids"] for p in longer] == [[by_text[SPACES]]]
    assert [p["head"] for p in longer] == [8 * 200]
    assert found.set_index("node_id").loc[by_text[SPACES], "content"] == shorten_text(SPACES, 120)


def test_an_empty_list_has_the_columns_and_a_zero_total(ltm: ha.LongTermMemory,
                                                        planted: list[dict[str, Any]]) -> None:
    for limit in (None, 3):
        found = ha.stale_memories(ltm, not_recalled_for=500, now=NOW, limit=limit)
        assert found.empty and found.attrs["stale_total"] == 0
        assert dict(found.dtypes.astype(str)) == {
            c: str(pd.Series(dtype=t).dtype) for c, t in STALE_COLUMNS.items()}


def _is_limit(value: Any) -> bool:
    import numpy as np

    return value is None or (isinstance(value, (int, np.integer))
                             and not isinstance(value, (bool, np.bool_))
                             and 1 <= value <= 2**63 - 1)


@pytest.fixture
def traced(database_url: str) -> Iterator[tuple[ha.LongTermMemory, list[str]]]:
    """A store and the statements it runs."""
    statements: list[str] = []
    with ha.LongTermMemory(database_url, cache_size=0,
                           tracer=lambda text, *_: statements.append(text)) as store:
        yield store, statements


@FAST
@given(limit=st.one_of(anything, hostile_limit, st.integers(max_value=0)).filter(
    lambda v: not _is_limit(v)))
def test_a_bad_limit_is_refused_before_any_query(
        traced: tuple[ha.LongTermMemory, list[str]], limit: Any) -> None:
    store, statements = traced
    statements.clear()
    with pytest.raises(ha.ValidationError) as caught:
        ha.stale_memories(store, limit=limit)
    assert caught.value.field == "limit"
    assert statements == []


# Words and whitespace of every kind str.split knows, in runs long enough to fill a beginning.
texts = st.lists(st.sampled_from(["a", "word", "é日🚀", "x" * 50, " ", " " * 60, "\n", "\t",
                                  "\xa0", "\u2028", "\x1c", "\u3000", "\x85", "\x00"]),
                 max_size=80).map("".join)


@given(text=texts, cut=st.integers(min_value=0, max_value=450),
       width=st.integers(min_value=1, max_value=150))
@example(text="word ", cut=5, width=4)  # a space just past the width, then nothing
@example(text="x" * 120 + " \n\t", cut=200, width=120)
@example(text="x" * 120 + " " * 100 + "y", cut=200, width=120)  # the rest not at hand
@example(text="  x" + " " * 30, cut=10, width=1)
def test_shortening_a_beginning_is_shortening_the_whole_text(text: str, cut: int,
                                                             width: int) -> None:
    whole = cut >= len(text)
    shown = shorten_beginning(text[:cut], width, whole=whole)
    assert shown == shorten_text(text, width) or (shown is None and not whole)
    if len(" ".join(text[:cut].split())) > width:
        assert shown is not None  # the beginning's words run past the width: enough


def test_cli_limit_says_what_it_left_out(database_url: str,
                                         planted: list[dict[str, Any]]) -> None:
    want = expected(planted)
    url = database_url
    runner = CliRunner()
    full = runner.invoke(cli, ["--db", url, "hygiene", "stale", "--days", str(IDLE), "--json"])
    assert full.exit_code == 0, full.output
    assert [r["node_id"] for r in json.loads(full.stdout)] == want["node_id"].tolist()
    assert "left out" not in full.stderr
    cut = runner.invoke(cli, ["--db", url, "hygiene", "stale", "--days", str(IDLE),
                              "--limit", "3", "--csv"])
    assert cut.exit_code == 0, cut.output
    lines = cut.stdout.splitlines()
    assert len(lines) == 4 and lines[0].startswith("node_id,")
    assert [int(line.split(",")[0]) for line in lines[1:]] == want["node_id"].tolist()[:3]
    assert f"{len(want) - 3} more stale memories left out by --limit 3 " \
           f"({len(want)} in all)" in cut.stderr
    everything = runner.invoke(cli, ["--db", url, "hygiene", "stale", "--days", str(IDLE),
                                     "--limit", str(len(want)), "--csv"])
    assert everything.exit_code == 0 and "left out" not in everything.stderr
    assert len(everything.stdout.splitlines()) == len(want) + 1
    bad = runner.invoke(cli, ["--db", url, "hygiene", "stale", "--limit", "0"])
    assert bad.exit_code == 2 and "--limit" in bad.output


@FAST
@given(contents=st.lists(texts.filter(lambda t: t.strip() and "\x00" not in t), min_size=1,
                         max_size=4),
       width=st.integers(min_value=1, max_value=150))
@example(contents=["x" * 120 + " " * 100 + "y"], width=120)  # the rest read further
def test_described_texts_at_a_width_are_the_whole_texts_shortened(
        traced: tuple[ha.LongTermMemory, list[str]], contents: list[str], width: int) -> None:
    """``describe_nodes(width=)`` reads each text's beginning, and further only where that
    is mostly whitespace, and shows what shortening the whole text shows."""
    store, _ = traced
    ids = store.bulk_add(contents, robots="describer")["node_id"].tolist()
    whole = store.describe_nodes(ids).set_index("id")["content"]
    shown = store.describe_nodes(ids, width=width).set_index("id")["content"]
    assert shown.to_dict() == {i: shorten_text(text, width) for i, text in whole.items()}
