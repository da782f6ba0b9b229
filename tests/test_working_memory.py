"""Working memory and timeframe phrases: in-process logic, against a fixed clock."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import threading

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from htm_analytics import ValidationError, WorkingMemory, parse_timeframe
from htm_analytics.agent.working_memory import entry_value

NOW = dt.datetime(2026, 11, 18, 15, 30, tzinfo=dt.UTC)  # a Wednesday


def fixed() -> dt.datetime:
    return NOW


def test_eviction_removes_the_least_valuable_first() -> None:
    # Reference case 32, with the documented intent (the lowest value goes first).
    wm = WorkingMemory(1000, clock=fixed)
    wm.add("n1", "content 1", token_count=300, access_count=1)
    wm.add("n2", "content 2", token_count=300, access_count=5)
    wm.add("n3", "content 3", token_count=300, access_count=2)
    assert entry_value(1, NOW, NOW) == pytest.approx(math.log(2) + 1)
    assert wm.evict_to_make_space(200) == [{"key": "n1", "value": "content 1"}]
    assert wm.token_count == 600 and wm.node_count == 2 and wm.has_space(200)


def test_eviction_frees_only_what_is_needed_and_prefers_stale_entries() -> None:
    clock = [NOW - dt.timedelta(hours=10)]
    wm = WorkingMemory(1000, clock=lambda: clock[0])
    wm.add("old", "a", token_count=300)
    clock[0] = NOW
    wm.add("new", "b", token_count=300)
    wm.add("newer", "c", token_count=300)
    assert wm.evict_to_make_space(100) == []  # 100 tokens are free already
    assert [e["key"] for e in wm.evict_to_make_space(101)] == ["old"]  # idle for 10 hours
    assert wm.token_count == 600
    assert [e["key"] for e in wm.evict_to_make_space(1000)] == ["new", "newer"]
    assert wm.evict_to_make_space(10) == []  # empty


def test_budget_boundaries_and_sizes() -> None:
    # Reference case 33.
    wm = WorkingMemory(1000)
    wm.add(1, "x", token_count=900)
    assert wm.has_space(100) and not wm.has_space(101)
    wm.remove(1)
    wm.add(2, "y", token_count=250)
    assert wm.utilization == 25.0
    wm.add(3, "z", token_count=10)
    wm.add(3, "z", token_count=20)
    assert wm.node_count == 2 and wm.token_count == 270 and 3 in wm
    assert wm.remove(3) and not wm.remove(3)


def test_overflow_is_an_error_not_a_silent_overrun() -> None:
    wm = WorkingMemory(100)
    with pytest.raises(ValidationError, match="do not fit a working memory of 100"):
        wm.add("big", "...", token_count=101)
    with pytest.raises(ValidationError):
        wm.evict_to_make_space(101)
    wm.add("a", "a", token_count=60)
    with pytest.raises(ValidationError, match="evict_to_make_space first"):
        wm.add("b", "b", token_count=50)
    assert wm.token_count == 60 and wm.node_count == 1
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(ValidationError):
            wm.add("c", "c", token_count=bad)
    with pytest.raises(ValidationError):
        WorkingMemory(0)


def test_assemble_context_strategies() -> None:
    # Reference case 34.
    wm = WorkingMemory(10_000, clock=fixed)
    wm.add("first", "first content", token_count=400, access_count=1)
    wm.add("second", "second content", token_count=400, access_count=9)
    wm.add("third", "third content", token_count=400, access_count=3)
    assert wm.assemble_context("recent", max_tokens=500) == "third content"
    assert wm.assemble_context("frequent").split("\n\n") == [
        "second content", "third content", "first content"]
    assert wm.assemble_context("balanced", max_tokens=800) == \
        "second content\n\nthird content"
    wm.touch("first")
    assert wm.assemble_context("recent", max_tokens=400) == "first content"
    with pytest.raises(ValidationError):
        wm.assemble_context("random")


def test_thread_safety_keeps_the_books_balanced() -> None:
    wm = WorkingMemory(5_000)

    def worker(offset: int) -> None:
        for i in range(300):
            key = (offset, i % 20)
            if not wm.has_space(7):
                wm.evict_to_make_space(7)
            # another thread may fill the space between the check and the add
            with contextlib.suppress(ValidationError):
                wm.add(key, "v", token_count=7)
            if i % 3 == 0:
                wm.remove(key)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wm.token_count == 7 * wm.node_count <= 5_000


def _state(wm: WorkingMemory) -> tuple[object, ...]:
    """What a working memory holds and would give, each strategy's context included."""
    return (wm.keys(), wm.token_count, wm.node_count,
            [wm.assemble_context(s) for s in ("recent", "frequent", "balanced")])


UNHASHABLE_KEYS = (["k"], {"k": 1}, {"k"}, ("k", ["nested"]), np.array([1]))
BAD_FIELDS = {
    "access_count": ("x", float("nan"), None, float("inf"), -1, 1.5, True, 10**30,
                     np.float64("nan")),
    "last_accessed": ("yesterday", dt.datetime(2026, 11, 18), pd.NaT, pd.Timestamp(0), 5,
                      dt.date(2026, 11, 18), np.datetime64("2026-11-18")),
}


@pytest.mark.parametrize(("field", "bad"), [
    *[("key", key) for key in UNHASHABLE_KEYS],
    *[(field, value) for field, values in BAD_FIELDS.items() for value in values]])
def test_bad_entries_are_refused_and_leave_the_memory_as_it_was(field: str,
                                                                bad: object) -> None:
    wm = WorkingMemory(1000, clock=fixed)
    wm.add("held", "held content", token_count=10, access_count=2)
    before = _state(wm)
    arguments: dict[str, object] = {"key": "c", "access_count": 0, "last_accessed": None}
    arguments[field] = bad
    key = arguments.pop("key")
    with pytest.raises(ValidationError) as info:
        wm.add(key, "v", token_count=1, **arguments)  # type: ignore[arg-type]
    assert info.value.field == field
    assert _state(wm) == before
    assert wm.evict_to_make_space(995) == [{"key": "held", "value": "held content"}]


@pytest.mark.parametrize("key", UNHASHABLE_KEYS)
def test_unhashable_keys_are_refused_by_every_method(key: object) -> None:
    wm = WorkingMemory(100, clock=fixed)
    wm.add("held", "x", token_count=1)
    for call in (lambda: wm.touch(key), lambda: wm.remove(key),
                 lambda: key in wm):
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == "key"
    assert wm.keys() == ["held"] and wm.token_count == 1


@pytest.mark.parametrize("clock", [5, "now", lambda: dt.datetime(2026, 11, 18),
                                   lambda: "2026-11-18T00:00:00+00:00", lambda: None,
                                   lambda: pd.NaT, lambda: 1 / 0])
def test_a_clock_that_is_not_one_is_refused_when_made(clock: object) -> None:
    with pytest.raises(ValidationError) as info:
        WorkingMemory(10, clock=clock)  # type: ignore[arg-type]
    assert info.value.field == "clock"


def test_a_clock_going_wrong_later_changes_nothing() -> None:
    readings: list[object] = [NOW]
    wm = WorkingMemory(10, clock=lambda: readings[-1])  # type: ignore[arg-type, return-value]
    wm.add("a", "first", token_count=4)
    wm.add("b", "second", token_count=4)
    before = _state(wm)
    readings.append(dt.datetime(2026, 11, 18))  # naive
    for call in (lambda: wm.add("c", "third", token_count=1), lambda: wm.touch("a"),
                 lambda: wm.evict_to_make_space(5), lambda: wm.assemble_context()):
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == "clock"
    readings.append(NOW)
    assert _state(wm) == before
    assert [e["key"] for e in wm.evict_to_make_space(5)] == ["a"]


_OFFSETS = st.builds(dt.timezone, st.timedeltas(min_value=dt.timedelta(hours=-23),
                                                max_value=dt.timedelta(hours=23)))
_VALUES = st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=5),
                    st.datetimes(), st.datetimes(timezones=_OFFSETS), st.lists(st.integers()),
                    st.just(pd.NaT), st.dates())


@given(key=st.one_of(st.text(max_size=3), st.integers(), st.lists(st.integers())),
       tokens=st.one_of(st.integers(), st.floats(), st.none()),
       access_count=_VALUES, last_accessed=_VALUES)
def test_any_add_is_accepted_whole_or_refused_whole(key: object, tokens: object,
                                                    access_count: object,
                                                    last_accessed: object) -> None:
    wm = WorkingMemory(50, clock=fixed)
    wm.add("held", "held content", token_count=20, access_count=1)
    before = _state(wm)
    try:
        wm.add(key, "new content", token_count=tokens,  # type: ignore[arg-type]
               access_count=access_count, last_accessed=last_accessed)  # type: ignore[arg-type]
    except ValidationError:
        assert _state(wm) == before
    else:
        assert key in wm
    # whatever happened, the working memory still works
    _state(wm)
    wm.touch("held")
    wm.evict_to_make_space(50)
    assert wm.token_count == 0  # an entry of 0 tokens may stay: it fits


# -- timeframes ------------------------------------------------------------------------------

DAY = dt.timedelta(days=1)
TICK = dt.timedelta(microseconds=1)
MIDNIGHT = dt.datetime(2026, 11, 18, tzinfo=dt.UTC)


@pytest.mark.parametrize(("phrase", "expected"), [
    ("today", (MIDNIGHT, NOW)),
    ("Yesterday", (MIDNIGHT - DAY, MIDNIGHT - TICK)),
    ("recently", (NOW - 3 * DAY, NOW)),
    ("last 7 days", (NOW - 7 * DAY, NOW)),
    ("past 3 hours", (NOW - dt.timedelta(hours=3), NOW)),
    ("in the last two weeks", (NOW - 14 * DAY, NOW)),
    ("last few days", (NOW - 3 * DAY, NOW)),
    ("last hour", (NOW - dt.timedelta(hours=1), NOW)),
    ("last week", (MIDNIGHT - 9 * DAY, MIDNIGHT - 2 * DAY - TICK)),  # Mon 9 .. Sun 15
    ("this week", (MIDNIGHT - 2 * DAY, NOW)),
    ("this month", (dt.datetime(2026, 11, 1, tzinfo=dt.UTC), NOW)),
    ("last month", (dt.datetime(2026, 10, 1, tzinfo=dt.UTC),
                    dt.datetime(2026, 11, 1, tzinfo=dt.UTC) - TICK)),
    ("last year", (dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
                   dt.datetime(2026, 1, 1, tzinfo=dt.UTC) - TICK)),
    ("3 days ago", (MIDNIGHT - 3 * DAY, MIDNIGHT - 2 * DAY - TICK)),
    (dt.date(2026, 11, 1), (dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
                            dt.datetime(2026, 11, 2, tzinfo=dt.UTC) - TICK)),
    ((dt.date(2026, 1, 1), dt.date(2026, 2, 1)),  # a date ending a range: its whole day
     (dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 2, tzinfo=dt.UTC) - TICK)),
    ((dt.date(2026, 1, 1), dt.datetime(2026, 2, 1)),
     (dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, tzinfo=dt.UTC))),
    # written as text, as a tool call (MCP) must: ISO dates and times, alone or as a range
    ("2026-11-01", (dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
                    dt.datetime(2026, 11, 2, tzinfo=dt.UTC) - TICK)),
    ("2026-01-01..2026-02-01",
     (dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 2, tzinfo=dt.UTC) - TICK)),
    (" 2026-01-01 .. 2026-02-01T12:00:00+02:00 ",
     (dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, 10, tzinfo=dt.UTC))),
    (None, None),
])
def test_timeframe_phrases(phrase: object, expected: object) -> None:
    assert parse_timeframe(phrase, now=NOW) == expected


@pytest.mark.parametrize("phrase", ["someday", "last fortnight", "next week", "", "7 days",
                                    42, ("2026-01-01",), "2026-13-01", "2026-02-01..",
                                    "2026-02-01..2026-01-01", "2026-01-01..last week",
                                    "2026-01-01T10:00", "2026-W01", "20260101", "2026-001"])
def test_unreadable_timeframes_are_errors(phrase: object) -> None:
    with pytest.raises(ValidationError) as info:
        parse_timeframe(phrase, now=NOW)
    assert info.value.field == "timeframe"


@pytest.mark.parametrize("missing", [
    pd.NaT, float("nan"), np.float64("nan"), pd.NA, np.datetime64("NaT"),
    (None, None), (pd.NaT, NOW), (NOW, float("nan")), (pd.NA, NOW), [None, NOW]])
def test_missing_timeframes_are_refused_alike(missing: object) -> None:
    with pytest.raises(ValidationError, match="missing value") as info:
        parse_timeframe(missing, now=NOW)
    assert info.value.field == "timeframe"


@pytest.mark.parametrize("now", ["2026-01-01", pd.NaT, 5, 0, "", float("nan"),
                                 dt.datetime(1, 1, 1, tzinfo=dt.UTC)])
def test_a_bad_now_is_refused_by_name(now: object) -> None:
    with pytest.raises(ValidationError) as info:
        parse_timeframe("today", now=now)  # type: ignore[arg-type]
    assert info.value.field == "now"


def test_now_is_read_as_other_datetimes_are() -> None:
    # naive is UTC, a date its first moment, a pandas Timestamp a datetime (validate_datetime)
    assert parse_timeframe("today", now=NOW.replace(tzinfo=None)) == (MIDNIGHT, NOW)
    assert parse_timeframe("today", now=MIDNIGHT.date()) == (MIDNIGHT, MIDNIGHT)
    assert parse_timeframe("today", now=pd.Timestamp(NOW)) == (MIDNIGHT, NOW)


def test_an_aware_pandas_timestamp_is_a_time_of_access() -> None:
    wm = WorkingMemory(10, clock=lambda: pd.Timestamp(NOW) + pd.Timedelta(nanoseconds=1))
    wm.add("a", "x", token_count=1, last_accessed=pd.Timestamp("2026-11-18 12:00:00.000000001Z"))
    assert wm.assemble_context() == "x" and wm.evict_to_make_space(10) == [
        {"key": "a", "value": "x"}]
