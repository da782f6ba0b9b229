"""The default search finds the robots a question names among the store's candidates only:
the same robots as testing every robot's name, for names and questions of any characters,
and a robot registered after the store read the names is still found."""

from __future__ import annotations

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htm_analytics import LongTermMemory
from htm_analytics.store.lexical import SPEAKER_BOOST
from htm_analytics.store.speakers import SPEAKER_ROWS, SpeakerIndex, question_words

NAMED = ("SELECT r.id FROM robots r WHERE r.name ~ '[[:alnum:]]' "
         "AND to_tsvector('simple', %(q)s) @@ plainto_tsquery('simple', r.name) {} ORDER BY 1")
# Letters of several scripts and cases, digits, and what the parser splits words on.
CHARACTERS = st.sampled_from(list("abzABZ0179 -+_.,'@/:<>#&?éÉßİıΣς中ﬁＡ\u212a"))
NAMES = st.lists(st.text(CHARACTERS, min_size=1, max_size=10), min_size=1, max_size=10,
                 unique=True)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=NAMES, data=st.data())
def test_the_candidates_hold_every_robot_a_question_names(
        db: psycopg.Connection, names: list[str], data: st.DataObject) -> None:
    db.execute("DELETE FROM robots")
    for name in names:
        db.execute("INSERT INTO robots (name) VALUES (%s)", [name])
    # Questions made of the names' pieces, so that many name a robot.
    pieces = st.one_of(st.sampled_from(names), st.text(CHARACTERS, max_size=6))
    question = " ".join(data.draw(st.lists(pieces, max_size=5)))
    index = SpeakerIndex(db.execute(SPEAKER_ROWS).fetchall())
    named = db.execute(NAMED.format(""), {"q": question}).fetchall()
    found = db.execute(NAMED.format("AND r.id = ANY(%(candidates)s)"),
                       {"q": question, "candidates": index.candidates(question)}).fetchall()
    assert found == named


def test_question_words_are_every_piece_of_the_ascii_runs() -> None:
    words = question_words("Robot-17282 says R2D2's ÉTÉ", 5)
    assert words is not None
    assert {"robot", "17282", "says", "r2d2", "d2", "obot", "s", "ete", "te"} <= words
    assert "robot-" not in words and "r2d2s" not in words and max(map(len, words)) == 5
    assert question_words("x" * 50_000, 5) is None  # a pasted document: every robot


def test_robots_are_filed_under_their_rarest_word() -> None:
    index = SpeakerIndex((n, sorted(["robot", f"robot-{n:05d}", f"{n:05d}"]))
                         for n in range(1, 2001))
    assert index.candidates("What did robot-00017 say?") == [17]
    assert index.candidates("What did the robots say?") == []
    assert index.newest == 2000


def test_a_question_too_long_to_piece_tests_every_robot(ltm: LongTermMemory) -> None:
    ann = ltm.register_robot("Ann")
    node = ltm.add(content="a note", robot_id=ann, embedding=[1.0, 0.0])["node_id"]
    question = "Ann " + "q" * 200_000
    rows = ltm.search_vector_bm25(query=question, embedding=[1.0, 0.0], neighbours=0,
                                  date_boost=0, context=0)
    assert [row["score"] for row in rows if row["id"] == node] == [1.0 + SPEAKER_BOOST]


def test_a_robot_registered_after_the_names_were_read_is_named(ltm: LongTermMemory) -> None:
    vector = [1.0, 0.0, 0.0]
    ann = ltm.register_robot("Ann")
    ltm.add(content="the weather was fine", robot_id=ann, embedding=vector)
    question = "What did Zed say about the weather?"
    ltm.search_vector_bm25(query=question, embedding=vector)  # reads the robots' names
    assert ltm._speakers is not None
    zed = ltm.register_robot("Zed")
    node = ltm.add(content="the weather was cold", robot_id=zed,
                   embedding=[0.0, 1.0, 0.0])["node_id"]

    def score(speaker_boost: float = SPEAKER_BOOST) -> float:
        rows = ltm.search_vector_bm25(query=question, embedding=vector, neighbours=0,
                                      date_boost=0, context=0, speaker_boost=speaker_boost)
        return next(row["score"] for row in rows if row["id"] == node)

    assert abs(score() - score(speaker_boost=0) - SPEAKER_BOOST) < 1e-9


def test_a_cached_search_looks_for_no_robot(ltm: LongTermMemory) -> None:
    ann = ltm.register_robot("Ann")
    ltm.add(content="a note", robot_id=ann, embedding=[1.0, 0.0])
    first = ltm.search_vector_bm25(query="What did Ann note?", embedding=[1.0, 0.0])
    ltm._speakers = None
    again = ltm.search_vector_bm25(query="What did Ann note?", embedding=[1.0, 0.0])
    assert again == first and ltm._speakers is None
