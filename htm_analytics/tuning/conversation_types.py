"""The one shape every conversational benchmark is read into: conversations of turns, and
questions whose evidence is a set of those turns (:mod:`.conversation_formats` reads them,
:mod:`.conversation_checks` checks them)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

__all__ = ["Turn", "Question", "Conversation"]


@dataclass(frozen=True)
class Turn:
    """One message: ``text`` holds the image caption too, when the turn shared one."""

    turn_id: str
    session: str
    speaker: str
    text: str
    time: dt.datetime


@dataclass(frozen=True)
class Question:
    """A question and the ids of the turns that answer it (none for an abstention question)."""

    question_id: str
    question: str
    category: str
    evidence: tuple[str, ...]
    answer: str | None = None
    abstention: bool = False


@dataclass(frozen=True)
class Conversation:
    """Turns in the order they were said, and the questions asked about them."""

    conversation_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    unresolved: int = field(default=0)  # questions dropped: no evidence id names a turn
