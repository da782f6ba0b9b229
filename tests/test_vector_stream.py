"""Vectors and ids streamed through one binary COPY, and bigint columns packed by the server,
equal what a plain SELECT returns, in batches of the size asked, and a row of another shape
is refused; node-id pages cover every id once."""

from __future__ import annotations

import time
from itertools import pairwise

import numpy as np
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pgvector.psycopg import register_vector
from psycopg import sql

from htm_analytics import DatabaseError, LongTermMemory
from htm_analytics.frames import node_id_pages
from htm_analytics.store.vector_stream import (
    copy_ids,
    copy_vector_batches,
    fetch_bigint_columns,
    one_snapshot,
)
from tests.test_hygiene import random_texts, random_vectors

VECTORS = ("SELECT id::bigint AS id, subvector(embedding, 1, 5) FROM nodes WHERE {} "
           "ORDER BY id")


def test_copied_vectors_equal_the_selected_ones(ltm: LongTermMemory,
                                                database_url: str) -> None:
    ltm.bulk_add(random_texts(50, seed=3), robots="alpha",
                 embeddings=random_vectors(50, seed=4, dimension=5))
    with psycopg.connect(database_url) as conn:
        register_vector(conn)
        rows = conn.execute(VECTORS.format("true")).fetchall()
        expected_ids = np.array([r[0] for r in rows])
        expected = np.vstack([r[1].to_numpy() for r in rows]).astype(np.float32)
        with conn.cursor() as cur:
            batches = list(copy_vector_batches(cur, sql.SQL(VECTORS.format("true")), None,
                                               5, batch_rows=7))
            assert [len(ids) for ids, _ in batches] == [7] * 7 + [1]
            np.testing.assert_array_equal(np.concatenate([i for i, _ in batches]),
                                          expected_ids)
            np.testing.assert_array_equal(np.vstack([v for _, v in batches]), expected)
            assert batches[0][1].dtype == np.float32 and batches[0][0].dtype == np.int64
            # whole batches only, bound parameters, and nothing at all
            exact = list(copy_vector_batches(cur, sql.SQL(VECTORS.format("id <= %(last)s")),
                                             {"last": int(expected_ids[9])}, 5, batch_rows=5))
            assert [len(ids) for ids, _ in exact] == [5, 5]
            assert list(copy_vector_batches(cur, sql.SQL(VECTORS.format("false")), None, 5,
                                            batch_rows=5)) == []
            ids = copy_ids(cur, sql.SQL("SELECT id::bigint AS id FROM nodes"), None)
            np.testing.assert_array_equal(ids, expected_ids)
            with pytest.raises(DatabaseError, match=r"stream ended|not \(bigint"):
                list(copy_vector_batches(cur, sql.SQL(VECTORS.replace("::bigint", "::int")
                                                      .format("true")), None, 5, 5))


def test_the_time_between_pages_is_not_a_statement(ltm: LongTermMemory,
                                                   database_url: str) -> None:
    """Each page is its own statement, in one snapshot: a caller working longer than
    ``statement_timeout`` between pages is not cancelled, and rows added meanwhile are not
    seen."""
    ltm.bulk_add(random_texts(30, seed=5), robots="alpha",
                 embeddings=random_vectors(30, seed=6, dimension=5))
    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        cur.execute("SET statement_timeout = '200ms'")
        conn.commit()
        one_snapshot(cur)
        seen = []
        for ids, _ in copy_vector_batches(cur, sql.SQL(VECTORS.format("true")), None, 5,
                                          batch_rows=10):
            seen += ids.tolist()
            if len(seen) == 10:
                ltm.bulk_add(["a memory added while the pages are read"], robots="alpha",
                             embeddings=random_vectors(1, seed=7, dimension=5))
            time.sleep(0.3)
        assert len(seen) == 30


@given(low=st.integers(-10**12, 10**12), span=st.integers(0, 10**6),
       nodes=st.integers(1, 10**6), page=st.integers(1, 10**5))
def test_node_id_pages_cover_the_ids_once(low: int, span: int, nodes: int, page: int) -> None:
    high = low + span
    pages = list(node_id_pages(low, high, min(nodes, span + 1), page))
    assert pages[0][0] == low and pages[-1][1] == high + 1
    assert all(a < b for a, b in pages)
    assert all(b == c for (_, b), (c, _) in pairwise(pages))  # contiguous, disjoint
    assert len(pages) <= min(nodes, span + 1) // page + 2


def test_no_node_no_page() -> None:
    assert list(node_id_pages(None, None, 0)) == []


def test_bigint_columns_are_fetched_whole_and_nulls_refused(ltm: LongTermMemory) -> None:
    query = sql.SQL("SELECT g AS a, g * -3 + (1::bigint << 40) AS b "
                    "FROM generate_series(%(n)s::bigint, %(m)s::bigint) AS g WHERE g <> 7")
    with ltm._transaction() as cur:
        got = fetch_bigint_columns(cur, query, {"n": -5000, "m": 20000}, ["a", "b"])
        order = np.argsort(got["a"])
        expected = np.array([g for g in range(-5000, 20001) if g != 7], dtype=np.int64)
        assert (got["a"][order] == expected).all()
        assert (got["b"][order] == expected * -3 + 2**40).all()
        assert got["a"].dtype == np.int64
        empty = fetch_bigint_columns(cur, query, {"n": 1, "m": 0}, ["a", "b"])
        assert len(empty["a"]) == len(empty["b"]) == 0
        with pytest.raises(DatabaseError, match=r"not \(bigint, bigint\)"):
            fetch_bigint_columns(cur, sql.SQL("SELECT 1::bigint AS a, NULL::bigint AS b"),
                                 None, ["a", "b"])
