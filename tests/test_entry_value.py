"""entry_value and the moment a working memory is given: in-process, against fixed clocks."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from htm_analytics import ValidationError, WorkingMemory
from htm_analytics.agent import entry_value

NOW = dt.datetime(2026, 11, 18, 15, 30, tzinfo=dt.UTC)
MAX_COUNT = 2**63 - 1  # a bigint, as the store's access counts

_OFFSETS = st.builds(dt.timezone, st.timedeltas(min_value=dt.timedelta(hours=-23),
                                                max_value=dt.timedelta(hours=23)))
_AWARE = st.datetimes(timezones=_OFFSETS)
_COUNTS = st.integers(min_value=0, max_value=MAX_COUNT)


class _FailingZone(dt.tzinfo):
    def utcoffset(self, moment: dt.datetime | None) -> dt.timedelta:
        raise RuntimeError("no offset")

    def dst(self, moment: dt.datetime | None) -> dt.timedelta:
        return dt.timedelta(0)

    def tzname(self, moment: dt.datetime | None) -> str:
        return "failing"


_BAD_COUNTS = st.one_of(
    st.booleans(), st.integers(max_value=-1), st.integers(min_value=MAX_COUNT + 1),
    st.floats(), st.just(1.0), st.text(max_size=3), st.none(), st.just(pd.NaT),
    st.just(np.float64("nan")), st.lists(st.integers(), max_size=2), st.just(NOW))
_BAD_MOMENTS = st.one_of(
    st.datetimes(), st.dates(), st.none(), st.integers(), st.floats(), st.text(max_size=5),
    st.just(pd.NaT), st.just(NOW.isoformat()), st.just(pd.Timestamp(2026, 11, 18)))


@given(count=_COUNTS, last_used=_AWARE, now=_AWARE)
def test_entry_value_is_finite_positive_and_bounded(count: int, last_used: dt.datetime,
                                                    now: dt.datetime) -> None:
    value = entry_value(count, last_used, now)
    assert isinstance(value, float) and math.isfinite(value)
    frequency = math.log1p(count)
    # the recency term is at least 1e-8 (the longest idle time is under 10**8 hours), far
    # above the rounding of ln(1 + count) <= 44
    assert value > 0.0 and frequency < value <= frequency + 1.0
    if now <= last_used:  # no time idle: full recency
        assert value == frequency + 1.0


@given(count=st.integers(min_value=0, max_value=MAX_COUNT - 1), more=_COUNTS,
       last_used=_AWARE, now=_AWARE)
def test_entry_value_grows_with_use(count: int, more: int, last_used: dt.datetime,
                                    now: dt.datetime) -> None:
    higher = min(count + 1 + more, MAX_COUNT)
    assert entry_value(higher, last_used, now) >= entry_value(count, last_used, now)


@given(count=_COUNTS, last_used=_AWARE, now=_AWARE, later=st.timedeltas(
    min_value=dt.timedelta(0), max_value=dt.timedelta(days=3650)))
def test_entry_value_shrinks_as_time_passes(count: int, last_used: dt.datetime,
                                            now: dt.datetime, later: dt.timedelta) -> None:
    try:
        then = now + later
    except OverflowError:
        return  # past the last datetime: no later moment to compare with
    assert entry_value(count, last_used, then) <= entry_value(count, last_used, now)


def test_entry_value_formula_and_equivalent_inputs() -> None:
    ten_hours = NOW - dt.timedelta(hours=10)
    assert entry_value(0, ten_hours, NOW) == pytest.approx(1 / 11)
    assert entry_value(3, NOW, NOW) == pytest.approx(math.log(4) + 1)
    # a NumPy count, a pandas timestamp and another zone for the same moment are the same
    tokyo = NOW.astimezone(dt.timezone(dt.timedelta(hours=9)))
    same = entry_value(np.int64(3), pd.Timestamp(ten_hours), tokyo)  # type: ignore[arg-type]
    assert same == entry_value(3, ten_hours, NOW)


@given(count=_BAD_COUNTS)
def test_a_bad_access_count_is_refused_by_name(count: object) -> None:
    with pytest.raises(ValidationError) as info:
        entry_value(count, NOW, NOW)  # type: ignore[arg-type]
    assert info.value.field == "access_count"


@given(moment=_BAD_MOMENTS, which=st.sampled_from(["last_used", "now"]))
def test_a_bad_moment_is_refused_by_name(moment: object, which: str) -> None:
    arguments: dict[str, object] = {"access_count": 1, "last_used": NOW, "now": NOW,
                                    which: moment}
    with pytest.raises(ValidationError) as info:
        entry_value(**arguments)  # type: ignore[arg-type]
    assert info.value.field == which


@pytest.mark.parametrize("which", ["last_used", "now"])
def test_a_moment_whose_zone_fails_is_refused_by_name(which: str) -> None:
    # a plain test: hashing such a datetime (as hypothesis may) raises too
    arguments: dict[str, object] = {"access_count": 1, "last_used": NOW, "now": NOW,
                                    which: dt.datetime(2026, 11, 18, tzinfo=_FailingZone())}
    with pytest.raises(ValidationError) as info:
        entry_value(**arguments)  # type: ignore[arg-type]
    assert info.value.field == which


class _Clock:
    """A clock that counts its readings."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> dt.datetime:
        self.readings += 1
        return NOW


def _state(wm: WorkingMemory) -> tuple[object, ...]:
    return (wm.keys(), wm.token_count,
            [wm.assemble_context(s) for s in ("recent", "frequent", "balanced")])


def test_a_given_moment_is_used_instead_of_a_reading() -> None:
    clock = _Clock()  # always NOW
    wm = WorkingMemory(8, clock=clock)
    read = clock.readings
    ten_hours_before = NOW - dt.timedelta(hours=10)
    wm.add("late", "added now", token_count=4, now=NOW)
    wm.add("early", "added ten hours before", token_count=4, now=ten_hours_before)
    # valued now, the early one has been idle ten hours: it goes first
    assert [e["key"] for e in wm.evict_to_make_space(4, now=NOW)] == ["early"]
    wm.add("early", "added ten hours before", token_count=4, now=ten_hours_before)
    # valued ten hours before, neither has been idle: the least recently added goes first
    assert [e["key"] for e in wm.evict_to_make_space(4, now=ten_hours_before)] == ["late"]
    assert clock.readings == read


@pytest.mark.parametrize("now", [dt.datetime(2026, 11, 18), "2026-11-18T00:00:00+00:00",
                                 pd.NaT, dt.date(2026, 11, 18), 0])
def test_a_bad_moment_changes_nothing(now: object) -> None:
    wm = WorkingMemory(10, clock=_Clock())
    wm.add("a", "first", token_count=4)
    wm.add("b", "second", token_count=4)
    before = _state(wm)
    for call in (lambda: wm.add("c", "third", token_count=2, now=now),  # type: ignore[arg-type]
                 lambda: wm.evict_to_make_space(5, now=now)):  # type: ignore[arg-type]
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == "now"
    assert _state(wm) == before
