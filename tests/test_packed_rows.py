"""Rows of fixed-width columns read packed equal what was stored: every value, NULL and
infinity, over pages of ids with gaps, in ascending id; the links' export chunks and a DuckDB
snapshot keep them (PostgreSQL's infinity as DuckDB's)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from htm_analytics import LongTermMemory, Snapshot, export_snapshot
from htm_analytics.store.packed_rows import packed_pages

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST = np.iinfo(np.int64).max
NAT = np.iinfo(np.int64).min
TIMES = st.one_of(
    st.none(), st.sampled_from(["infinity", "-infinity"]),
    st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(9999, 1, 1),
                 timezones=st.just(dt.UTC)))
ROWS = st.dictionaries(
    st.integers(-10**12, 10**12),
    st.tuples(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
              st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)), TIMES),
    max_size=30)


def _microseconds(value: dt.datetime | str | None) -> int:
    """What the packed column holds for a stored time, as int64 microseconds since 1970."""
    if value is None:
        return int(NAT)
    if isinstance(value, str):
        return int(LATEST) if value == "infinity" else -int(LATEST)
    return (value - EPOCH) // dt.timedelta(microseconds=1)


def _as_text(value: dt.datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, dt.datetime) else value


def _integers(column: pd.Series) -> list[int | None]:
    return [None if pd.isna(v) else int(v) for v in column]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, page_rows=st.integers(1, 8))
def test_packed_pages_equal_the_stored_rows(ltm: LongTermMemory,
                                            rows: dict[int, tuple], page_rows: int) -> None:
    stored = list(rows)  # in no particular order
    relation = sql.SQL("(SELECT * FROM unnest({}::bigint[], {}::bigint[], {}::integer[], "
                       "{}::text[]::timestamptz[]) AS u(id, big, small, at))").format(
        sql.Literal(stored), sql.Literal([rows[i][0] for i in stored]),
        sql.Literal([rows[i][1] for i in stored]),
        sql.Literal([_as_text(rows[i][2]) for i in stored]))
    columns = {"id": "bigint", "big": "bigint", "small": "integer", "at": "timestamptz"}
    with ltm._transaction() as cur:
        pages = list(packed_pages(cur, relation, columns, page_rows=page_rows))
    assert all(len(page) for page in pages)
    frame = pd.concat(pages, ignore_index=True) if pages else None
    if frame is None:
        assert not rows
        return
    ids = sorted(rows)
    assert frame["id"].tolist() == ids
    assert frame["id"].dtype == np.int64
    assert _integers(frame["big"]) == [rows[i][0] for i in ids]
    assert _integers(frame["small"]) == [rows[i][1] for i in ids]
    assert str(frame["small"].dtype) in ("int32", "Int32")
    assert str(frame["at"].dtype) == "datetime64[us, UTC]"
    times = frame["at"].dt.tz_localize(None).to_numpy().view(np.int64).tolist()
    assert times == [_microseconds(rows[i][2]) for i in ids]


def test_link_chunks_and_snapshots_keep_nulls_and_infinity(ltm: LongTermMemory,
                                                           db: psycopg.Connection,
                                                           tmp_path: Path) -> None:
    for n in range(7):
        ltm.add(content=f"memory {n}", robot_id=ltm.register_robot(f"robot {n % 3}"),
                tags=[f"topic:{n % 2}", f"kind:{n}"])
    db.execute("UPDATE node_tags SET created_at = NULL WHERE id % 3 = 0")
    db.execute("UPDATE node_tags SET created_at = 'infinity' WHERE id % 3 = 1")
    db.execute("UPDATE robot_nodes SET last_remembered_at = '-infinity' WHERE id % 2 = 0")
    db.execute("DELETE FROM node_tags WHERE id % 4 = 2")  # gaps in the ids
    node_tags = db.execute("SELECT id, node_id, tag_id, created_at::text FROM node_tags "
                           "ORDER BY id").fetchall()
    robot_nodes = db.execute("SELECT id, robot_id, node_id, remember_count, "
                             "last_remembered_at::text FROM robot_nodes ORDER BY id").fetchall()
    chunks = list(ltm.iter_table_chunks("node_tags", chunk_rows=4))
    assert [len(c) for c in chunks] == [4] * (len(node_tags) // 4) + (
        [len(node_tags) % 4] if len(node_tags) % 4 else [])
    tags = pd.concat(chunks, ignore_index=True)
    assert tags[["id", "node_id", "tag_id"]].values.tolist() == [list(r[:3]) for r in node_tags]
    times = tags["created_at"].dt.tz_localize(None).to_numpy().view(np.int64).tolist()
    assert [t if t in (NAT, LATEST) else "a time" for t in times] == \
        [NAT if r[3] is None else LATEST if r[3] == "infinity" else "a time" for r in node_tags]
    assert any(r[3] is None for r in node_tags) and any(r[3] == "infinity" for r in node_tags)
    links = pd.concat(ltm.iter_table_chunks("robot_nodes", chunk_rows=2), ignore_index=True)
    assert links[["id", "robot_id", "node_id", "remember_count"]].values.tolist() == \
        [list(r[:4]) for r in robot_nodes]
    last = links["last_remembered_at"].dt.tz_localize(None).to_numpy().view(np.int64)
    assert [v == -LATEST for v in last] == [r[4] == "-infinity" for r in robot_nodes]

    path = export_snapshot(ltm, tmp_path / "links.duckdb")
    with Snapshot(path) as snap, snap._con.cursor() as cur:
        kept = cur.execute("SELECT id, created_at IS NULL, isinf(created_at) FROM node_tags "
                           "ORDER BY id").fetchall()
        ends = cur.execute("SELECT id, isinf(last_remembered_at) AND last_remembered_at < "
                           "TIMESTAMPTZ '2000-01-01' FROM robot_nodes ORDER BY id").fetchall()
    assert kept == [(r[0], r[3] is None, r[3] == "infinity" if r[3] is not None else None)
                    for r in node_tags]
    assert ends == [(r[0], r[4] == "-infinity") for r in robot_nodes]
