"""HTM and a clock that goes wrong in the middle of a call, on the real database.

A call that writes reads its clock once, before anything is written, and uses that moment
throughout: a clock that goes bad later can no longer fail the call after the write (the
caller would be told nothing was stored while it was, and working memory would disagree
with the database's flags)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pandas as pd
import psycopg
import pytest

import htm_analytics as ha
from htm_analytics import HTM, ValidationError

NOW = dt.datetime(2026, 11, 18, 15, 30, tzinfo=dt.UTC)


def _raise() -> object:
    raise RuntimeError("the time service is down")


BAD_READINGS: dict[str, Callable[[], object]] = {
    "none": lambda: None,
    "naive": lambda: NOW.replace(tzinfo=None),
    "text": lambda: "2026-11-18T15:30:00+00:00",
    "missing": lambda: pd.NaT,
    "out of range": lambda: dt.datetime(3000, 1, 1, tzinfo=dt.UTC),
    "raises": _raise,
}


class CountingClock:
    """A clock that counts its readings, each a second later; after
    :meth:`go_wrong_after` it gives that many more good readings, then bad ones."""

    def __init__(self) -> None:
        self.readings = 0
        self._good_left: int | None = None
        self._bad: Callable[[], object] = _raise

    def go_wrong_after(self, good: int, bad: Callable[[], object]) -> None:
        self._good_left, self._bad = good, bad

    def __call__(self) -> object:
        self.readings += 1
        if self._good_left is not None:
            if self._good_left == 0:
                return self._bad()
            self._good_left -= 1
        return NOW + dt.timedelta(seconds=self.readings)


def _database(db: psycopg.Connection) -> tuple[object, ...]:
    """What a call may write: rows, counts, flags and logged query vectors."""
    row = db.execute("""SELECT (SELECT count(*) FROM nodes),
                               (SELECT count(*) FROM robot_nodes),
                               (SELECT coalesce(sum(remember_count), 0) FROM robot_nodes),
                               (SELECT count(*) FROM node_tags),
                               (SELECT count(*) FROM memory_events),
                               (SELECT coalesce(sum(access_count), 0) FROM nodes),
                               (SELECT count(*) FROM nodes WHERE in_working_memory)""")
    logged = db.execute("SELECT to_regclass('memory_query_vectors') IS NOT NULL").fetchone()
    vectors = db.execute("SELECT count(*) FROM memory_query_vectors").fetchone() \
        if logged and logged[0] else (0,)
    counts = row.fetchone()
    assert counts is not None and vectors is not None
    return (*counts, *vectors)


def _held(robot: HTM) -> tuple[object, ...]:
    return (tuple(robot.working_memory.keys()), robot.working_memory.token_count)


def _flagged(db: psycopg.Connection) -> set[int]:
    return {i for (i,) in db.execute("SELECT id FROM nodes WHERE in_working_memory")}


def _robot(ltm: ha.LongTermMemory, clock: CountingClock) -> HTM:
    """A robot whose working memory of 10 tokens (one per word) is full: the next memory
    held evicts one, so a call reads the clock more than once unless it reuses a moment."""
    robot = HTM("ticking", store=ltm, working_memory_size=10, clock=clock,  # type: ignore[arg-type]
                token_counter=lambda text: len(text.split()))
    for words in ("alpha beta gamma delta", "epsilon zeta eta theta", "iota kappa lambda mu"):
        robot.remember(words, tags=["greek"])
    return robot


OPERATIONS: dict[str, Callable[[HTM, int], object]] = {
    "remember": lambda robot, n: robot.remember(f"new memory number {n}", tags=["new"]),
    "remember_many": lambda robot, n: robot.remember_many(
        [f"batch memory number {n}", f"second batch memory {n}"]),
    "recall vector": lambda robot, n: robot.recall("alpha beta gamma delta", limit=3,
                                                   strategy="vector"),
    "recall fulltext": lambda robot, n: robot.recall("alpha", strategy="fulltext"),
}


@pytest.mark.parametrize("bad", BAD_READINGS, ids=list(BAD_READINGS))
@pytest.mark.parametrize("operation", OPERATIONS, ids=list(OPERATIONS))
def test_a_clock_going_bad_during_a_call_is_refused_whole_or_not_read(
        ltm: ha.LongTermMemory, db: psycopg.Connection, operation: str, bad: str) -> None:
    """Whatever reading goes bad, a call either raises ValidationError naming ``clock``
    with the database and working memory as they were, or succeeds with them in step."""
    clock = CountingClock()
    robot = _robot(ltm, clock)
    for good in range(4):
        robot.flush()
        before, held = _database(db), _held(robot)
        clock.go_wrong_after(good, BAD_READINGS[bad])
        try:
            OPERATIONS[operation](robot, good)
        except ValidationError as exc:
            assert exc.field == "clock", exc
            robot.flush()
            assert _database(db) == before, f"written, then refused ({good} good readings)"
            assert _held(robot) == held
        else:
            robot.flush()
            assert _flagged(db) == set(robot.working_memory.keys())
        finally:
            clock.go_wrong_after(10**6, BAD_READINGS[bad])  # right again for the set-up
    robot.close()


@pytest.mark.parametrize("operation", OPERATIONS, ids=list(OPERATIONS))
def test_each_call_reads_the_clock_once_and_uses_that_moment(
        ltm: ha.LongTermMemory, db: psycopg.Connection, operation: str) -> None:
    clock = CountingClock()
    robot = _robot(ltm, clock)
    before = clock.readings
    OPERATIONS[operation](robot, 0)
    assert clock.readings == before + 1
    robot.flush()
    assert _flagged(db) == set(robot.working_memory.keys())


def test_a_clock_bad_from_the_start_of_a_call_writes_nothing(
        ltm: ha.LongTermMemory, db: psycopg.Connection) -> None:
    clock = CountingClock()
    robot = _robot(ltm, clock)
    robot.flush()
    before, held = _database(db), _held(robot)
    for bad in BAD_READINGS.values():
        clock.go_wrong_after(0, bad)
        for n, call in enumerate(OPERATIONS.values()):
            with pytest.raises(ValidationError) as info:
                call(robot, n)
            assert info.value.field == "clock"
    robot.flush()
    assert _database(db) == before and _held(robot) == held
