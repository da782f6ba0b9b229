"""Items read ahead in a thread come in order; the producer's error reaches the caller; a
caller that stops early closes the producer in the producer's own thread; and a snapshot
export that fails while writing leaves nothing and releases its connection."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from htm_analytics import DatabaseError, LongTermMemory, export_snapshot
from htm_analytics.store import snapshot as snapshot_module
from htm_analytics.store.read_ahead import read_ahead


@given(items=st.lists(st.integers()), depth=st.integers(1, 4))
def test_items_come_in_order(items: list[int], depth: int) -> None:
    assert list(read_ahead(iter(items), depth)) == items


def test_the_producers_error_reaches_the_caller() -> None:
    def failing() -> Iterator[int]:
        yield 1
        raise DatabaseError("the server went away")

    seen = []
    with pytest.raises(DatabaseError, match="went away"):
        for item in read_ahead(failing()):
            seen.append(item)
    assert seen == [1]


def test_stopping_early_closes_the_producer_in_its_thread() -> None:
    closed_in: list[str] = []
    produced: list[int] = []

    def endless() -> Iterator[int]:
        try:
            n = 0
            while True:
                produced.append(n)
                yield n
                n += 1
        finally:
            closed_in.append(threading.current_thread().name)

    for item in read_ahead(endless(), depth=2):
        if item == 3:
            break
    assert closed_in == ["htm_analytics-read-ahead"]
    assert len(produced) <= 3 + 1 + 2 + 1  # the item taken, then at most depth + 1 ahead


def test_the_next_item_is_taken_while_the_caller_holds_this_one() -> None:
    second_taken = threading.Event()

    def items() -> Iterator[int]:
        yield 0
        second_taken.set()
        yield 1

    for item in read_ahead(items()):
        if item == 0:  # the caller still at work on the first item
            assert second_taken.wait(timeout=30)


def test_a_failed_write_leaves_no_snapshot(ltm: LongTermMemory, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(3):
        ltm.add(content=f"memory {n}", robot_id=ltm.register_robot("r"), tags=["t"])

    def broken(vectors: object) -> object:
        raise DatabaseError("the disk is full")

    monkeypatch.setattr(snapshot_module, "_arrow_vectors", broken)
    with pytest.raises(DatabaseError, match="disk is full"):
        export_snapshot(ltm, tmp_path / "memory.duckdb")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    export_snapshot(ltm, tmp_path / "memory.duckdb")  # the store's connections still serve
    assert ltm.count_in_scope() == 3
