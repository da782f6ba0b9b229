"""The robots a question may name, found without parsing every robot's name in each search.

The default search boosts the memories of a robot whose name has all its words in the
question (``to_tsvector('simple', question) @@ plainto_tsquery('simple', name)``). Run over
every robot, that test parses each name: among 20,000 robots, 59 ms of a 105 ms search.
The store files each robot under one ASCII word of its name (read from the server once, and
again after ``cache_ttl``); a search runs the same test on the robots filed under a word of
the question, those whose name has no ASCII word, and those added since the read.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["SpeakerIndex", "SPEAKER_ROWS", "question_words"]

SPEAKER_ROWS = """
SELECT r.id, tsvector_to_array(to_tsvector('simple', r.name)) AS words FROM robots r
WHERE r.name ~ '[[:alnum:]]'"""
"""Each robot a question could name, with the words of its name as the search's test reads
them."""

# Any word PostgreSQL's parser reads out of a question is, when it is all ASCII letters and
# digits, one of these runs: whole, or split where letters meet digits.
_RUNS = (re.compile(r"[a-z0-9]+"), re.compile(r"[a-z]+"), re.compile(r"[0-9]+"))
_ASCII_WORD = re.compile(r"[a-z0-9]+")


def question_words(question: str) -> set[str]:
    """Every ASCII word the search's test could find in ``question`` (more, never fewer).

    The server may lower a letter that is not ASCII to one that is (``İ`` to ``i``, the Kelvin
    sign to ``k``), so the question is read a second time with its letters decomposed and
    their accents dropped.
    """
    plain = "".join(c for c in unicodedata.normalize("NFKD", question)
                    if not unicodedata.combining(c))
    return {word for text in (question.lower(), plain.lower())
            for pattern in _RUNS for word in pattern.findall(text)}


@dataclass
class SpeakerIndex:
    """Robot ids by one ASCII word of their name; see the module's description.

    Parameters
    ----------
    rows : iterable of (int, list of str)
        Each robot's id and the words of its name, as :data:`SPEAKER_ROWS` reads them.
    """

    rows: Iterable[tuple[int, list[str]]]
    read_at: float = field(default_factory=time.monotonic)
    by_word: dict[str, list[int]] = field(init=False, default_factory=dict)
    unfiled: list[int] = field(init=False, default_factory=list)  # no ASCII word in the name
    newest: int = field(init=False, default=0)  # robots with a larger id came after the read

    def __post_init__(self) -> None:
        for robot, words in self.rows:
            self.newest = max(self.newest, robot)
            ascii_words = [w for w in words if _ASCII_WORD.fullmatch(w)]
            if ascii_words:  # every word must be in the question: the longest is the rarest
                self.by_word.setdefault(max(ascii_words, key=len), []).append(robot)
            else:
                self.unfiled.append(robot)
        self.rows = ()

    def candidates(self, question: str) -> list[int]:
        """The robots the question may name (all it names, and some it does not); robots
        with an id above :attr:`newest` are to be checked as well."""
        found = list(self.unfiled)
        for word in question_words(question):
            found += self.by_word.get(word, ())
        return found
