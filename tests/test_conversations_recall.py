"""The default recall on a conversation: the neighbour, speaker and date terms of
``search_vector_bm25``, and BM25 reading a turn with the turn before it, on turns
remembered as a conversation; and the dates a question names."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import htm_analytics as ha
from htm_analytics.agent.embeddings import HashingEmbedder
from htm_analytics.errors import ValidationError

_SESSION = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)
_TURNS = [  # (robot, text, minutes after the session's start)
    ("Ann", "Ann: I adopted a greyhound last week.", 0),
    ("Ben", "Ben: Lovely! What did you call the greyhound?", 1),
    ("Ann", "Ann: Pixel, after my first phone.", 2),
    ("Ben", "Ben: I practise the cello every evening.", 3),
    ("Ann", "Ann: My sister visits in June.", 60 * 24 * 9),
    ("Ann", "Ann: The museum trip was fun.", 60 * 24 * 9 + 1),
]


def _conversation(store: ha.LongTermMemory, *, same_instant: bool = False) -> list[int]:
    times = [_SESSION if same_instant else _SESSION + dt.timedelta(minutes=m)
             for _, _, m in _TURNS]
    texts = [text for _, text, _ in _TURNS]
    return store.bulk_add(texts, robots=[robot for robot, _, _ in _TURNS],
                          embeddings=HashingEmbedder().embed(texts),
                          remembered_at=times)["node_id"].tolist()


def _scores(store: ha.LongTermMemory, query: str, **options: Any) -> dict[int, float]:
    rows = store.search_vector_bm25(query=query, embedding=HashingEmbedder().embed([query])[0],
                                    limit=10, **options)
    return {row["id"]: row["score"] for row in rows}


def test_the_default_recall_reads_turns_in_their_conversation(ltm: ha.LongTermMemory) -> None:
    from htm_analytics.store.lexical import DATE_BOOST, NEIGHBOUR_WEIGHT, SPEAKER_BOOST

    ids = _conversation(ltm)
    # The neighbour, speaker and date terms, each with the others off (BM25 of each turn
    # alone: the context is tested below).
    question = "What name did Ann give the greyhound?"
    alone = _scores(ltm, question, neighbours=0, speaker_boost=0, date_boost=0, context=0)
    # The answer holds no word of the question: on its own it is not the first of Ann's turns.
    assert max(alone, key=alone.__getitem__) != ids[2]
    with_neighbours = _scores(ltm, question, speaker_boost=0, date_boost=0, context=0)
    # A turn gains NEIGHBOUR_WEIGHT x the best own score of the turn before or after it, in
    # the same session (a week later is not a neighbour).
    for turn, around in ((2, (1, 3)), (4, (5,))):
        expected = alone[ids[turn]] + NEIGHBOUR_WEIGHT * max(alone[ids[i]] for i in around)
        assert with_neighbours[ids[turn]] == pytest.approx(expected)
    def rank(scores: dict[int, float]) -> int:
        return sorted(scores, key=scores.__getitem__, reverse=True).index(ids[2])

    assert rank(with_neighbours) < rank(alone)
    # Ann is named: her memories gain SPEAKER_BOOST, Ben's nothing.
    named = _scores(ltm, question, neighbours=0, date_boost=0, context=0)
    for turn, (robot, _, _) in enumerate(_TURNS):
        gain = SPEAKER_BOOST if robot == "Ann" else 0
        assert named[ids[turn]] == pytest.approx(alone[ids[turn]] + gain)
    # A date the question names: the memories remembered that day gain DATE_BOOST.
    dated_question = "What did Ann say on 8 May, 2023?"
    plain = _scores(ltm, dated_question, neighbours=0, speaker_boost=0, date_boost=0,
                    context=0)
    dated = _scores(ltm, dated_question, neighbours=0, speaker_boost=0, context=0)
    for turn, (_, _, minutes) in enumerate(_TURNS):
        gain = DATE_BOOST if minutes < 60 * 24 else 0
        assert dated[ids[turn]] == pytest.approx(plain[ids[turn]] + gain)
    with pytest.raises(ValidationError) as error:
        _scores(ltm, question, neighbour_gap=5)
    assert error.value.field == "neighbour_gap"


def _bm25(store: ha.LongTermMemory, query: str, **options: Any) -> dict[int, float]:
    rows = store.search_vector_bm25(query=query, embedding=HashingEmbedder().embed([query])[0],
                                    limit=10, neighbours=0, speaker_boost=0, date_boost=0,
                                    **options)
    return {row["id"]: row["bm25"] for row in rows}


def test_bm25_reads_a_turn_with_the_turn_before_it(ltm: ha.LongTermMemory) -> None:
    ids = _conversation(ltm)
    question = "What name did Ann give the greyhound?"
    alone, in_context = _bm25(ltm, question, context=0), _bm25(ltm, question)
    # Ben's cello turn holds no word of the question, the turn before it ("Ann: Pixel...")
    # holds "Ann": read with it, the cello turn matches.
    assert alone[ids[3]] == 0 < in_context[ids[3]]
    # The answer gains "greyhound" from Ben's question before it.
    assert in_context[ids[2]] > alone[ids[2]] > 0
    # Nothing comes before the first turn of a session (the next session is nine days later).
    for first in (0, 4):
        assert in_context[ids[first]] == pytest.approx(alone[ids[first]])
    # Twice the weight: the words before count more, so the cello turn scores higher still.
    assert _bm25(ltm, question, context=1.0)[ids[3]] > in_context[ids[3]]
    with pytest.raises(ValidationError) as error:
        _bm25(ltm, question, context=-0.5)
    assert error.value.field == "context"


def test_a_turn_after_a_lexical_match_is_a_candidate(ltm: ha.LongTermMemory) -> None:
    filler = [f"Ben: weather note number {i} about clouds and rain" for i in range(30)]
    texts = ["Ann: the harbour regatta starts at noon", "Ben: see you there then",
             *filler]
    times = [_SESSION + dt.timedelta(seconds=i) for i in range(len(texts))]
    vectors = HashingEmbedder().embed(texts)
    ids = ltm.bulk_add(texts, robots=["Ann", "Ben", *["Ben"] * 30], embeddings=vectors,
                       remembered_at=times)["node_id"].tolist()
    query = "When is the regatta?"
    # Only the first turn holds "regatta"; the query's vector is near the filler, so the
    # vector candidates are filler and the turn after the regatta is found only as the
    # follower of a lexical candidate (alpha 5: BM25 decides the order).
    near_filler = HashingEmbedder().embed(["clouds and rain"])[0]
    options: dict[str, Any] = {"limit": 3, "depth": 3, "alpha": 5.0, "neighbours": 0,
                               "speaker_boost": 0, "date_boost": 0}
    found = [row["id"] for row in ltm.search_vector_bm25(query=query, embedding=near_filler,
                                                          **options)]
    assert found[:2] == ids[:2]
    alone = [row["id"] for row in ltm.search_vector_bm25(query=query, embedding=near_filler,
                                                          context=0, **options)]
    assert alone[0] == ids[0] and ids[1] not in alone


def test_memories_of_one_instant_are_nobodys_neighbours(ltm: ha.LongTermMemory) -> None:
    _conversation(ltm, same_instant=True)  # one bulk import: no order between the turns
    question = "What name did Ann give the greyhound?"
    assert _scores(ltm, question) == _scores(ltm, question, neighbours=0, context=0)


@given(st.text(max_size=60))
def test_dates_named_in_a_question(text: str) -> None:
    from htm_analytics.store._dates import mentioned_dates

    for first, last in mentioned_dates(text):
        assert first.tzinfo is dt.UTC and first < last
    found = mentioned_dates(f"{text} on 3 June, 2023 or in December 2023 ({text})")
    assert (dt.datetime(2023, 6, 3, tzinfo=dt.UTC), dt.datetime(2023, 6, 4, tzinfo=dt.UTC)) \
        in found
    assert (dt.datetime(2023, 12, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 1, tzinfo=dt.UTC)) \
        in found
