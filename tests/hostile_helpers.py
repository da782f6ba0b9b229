"""The strategies and checks of the hostile-input tests (``test_hostile_input.py``,
``test_hostile_store.py`` and the hygiene tests): text and values as users and attackers
send them, the tables a rejected call must leave as they were, and :func:`outcome`, which
takes a result or a ``ValidationError`` naming one of the arguments."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from htm_analytics import ValidationError

FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# Text as users and attackers send it: any code point, lone surrogates and NUL included.
SPECIAL_TEXT = ["", "   ", "\x00", "a\x00b", "\ud800", "ok \udfff", "\u2028", "é" * 3,
                "robot", "PostgreSQL is our primary database", "Ⱥ" * 5]
# Hypothesis draws branches about evenly: the known-bad texts come up in every few examples,
# spliced into random text as well as alone.
hostile_text = st.one_of(
    st.sampled_from(SPECIAL_TEXT),
    st.builds(lambda a, b, c: a + b + c, st.text(max_size=8), st.sampled_from(SPECIAL_TEXT),
              st.text(max_size=8)),
    st.text(st.characters(categories=["L", "N", "P", "S", "Z", "Cc", "Cs", "Co"]),
            max_size=40),
)
big_ints = st.integers(min_value=-(2**70), max_value=2**70)
anything = st.one_of(
    st.none(), st.booleans(), big_ints, st.floats(), hostile_text, st.binary(max_size=8),
    st.lists(st.floats(), max_size=4), st.sets(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.datetimes(), st.decimals(allow_nan=True), st.just(np.int64(3)), st.just(object()),
)
hostile_limit = st.one_of(big_ints, st.just(np.int64(5)), st.floats(), st.booleans(),
                          st.none(), hostile_text)
vector_values = st.one_of(
    st.floats(width=64), st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([1e-30, 1e30, 3.5e38, 1e-45, 0.0]))
# Entries numpy turns into numbers although they are not real numbers.
NOT_REAL = ["1", "2.5", b"1", True, False, 1 + 2j, decimal.Decimal("0.5"), None, np.bool_(True),
            np.complex64(1), object()]
not_real_vector = st.one_of(
    st.lists(st.one_of(st.floats(-1, 1), st.sampled_from(NOT_REAL)), min_size=1, max_size=4),
    st.sampled_from([np.array([1 + 2j, 0.5]), np.array([True, False]),
                     np.array(["1", "2"]), np.array([b"1"]),
                     np.array([0.5, "x"], dtype=object), np.array([0.5, 1], dtype=object),
                     np.array(0.5), np.array([[0.5, 0.1]])]))
hostile_vector = st.one_of(
    st.lists(vector_values, min_size=0, max_size=6),
    st.lists(st.lists(st.floats(-1, 1), max_size=3), max_size=3),  # ragged, nested
    not_real_vector, anything)
hostile_model = st.one_of(
    st.none(), st.tuples(hostile_text, hostile_text), st.lists(hostile_text, max_size=3),
    st.sampled_from([("x\ud800", "m"), ("p\x00", "m"), ("p", "m\x00"), ("", "m"),
                     ("p", "m" * 300), ("ollama", "nomic-embed-text")]), anything)
aware = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                     timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=14)),
                                                dt.timezone(dt.timedelta(hours=-12))]))
hostile_time = st.one_of(aware, st.datetimes(), st.dates(), st.just(pd.NaT),
                         st.just(dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5)))),
                         st.just(dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(
                             dt.timedelta(hours=-5)))), anything)
hostile_timeframe = st.one_of(st.none(), st.tuples(hostile_time, hostile_time), anything,
                              st.from_regex(r"(last|past) [0-9]{1,12} (day|year|week)s?",
                                            fullmatch=True),
                              st.from_regex(r"[0-9]{1,12} (day|year)s ago", fullmatch=True))
hostile_names = st.one_of(hostile_text, st.lists(hostile_text, max_size=3), anything)
TABLES = ("nodes", "robots", "robot_nodes", "tags", "node_tags", "memory_events",
          "memory_query_vectors")

counted = {"cases": 0, "rejected": 0}


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore
                for t in TABLES}


def outcome(call: Callable[[], Any], fields: set[str]) -> Any:
    """Run ``call``: return its result, or None when it raised a ValidationError naming one
    of ``fields`` (any other exception fails the test)."""
    counted["cases"] += 1
    try:
        return call()
    except ValidationError as exc:
        counted["rejected"] += 1
        base = (exc.field or "").split("[")[0]
        assert base in fields, f"{exc!r} names {exc.field!r}, not one of {sorted(fields)}"
        return None


def real_entries(vector: Any) -> bool:
    """Whether ``vector`` is a flat sequence of real numbers (no bools, complex numbers,
    strings, bytes or other objects): the oracle for what a vector argument may hold."""
    if isinstance(vector, np.ndarray):
        return vector.ndim == 1 and (vector.dtype.kind in "iuf" or (
            vector.dtype.kind == "O" and all(map(real_entries, [[v] for v in vector]))))
    if not isinstance(vector, (list, tuple)):
        return False
    return all(isinstance(v, (int, float, np.integer, np.floating))
               and not isinstance(v, (bool, np.bool_)) for v in vector)


def finite_scores(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        for name in ("similarity", "rank", "combined_score", "rrf_score", "tag_boost", "bm25",
                     "score"):
            if row.get(name) is not None:
                assert math.isfinite(row[name]), row
