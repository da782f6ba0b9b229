"""The robots a question may name, found without parsing every robot's name in each search.

The default search boosts the memories of a robot whose name has all its words in the
question (``to_tsvector('simple', question) @@ plainto_tsquery('simple', name)``). Run over
every robot, that test parses each name: among 20,000 robots, 59 ms of a 105 ms search.
The store files each robot under the rarest ASCII word of its name (read from the server once,
and again after ``cache_ttl``); a search runs the same test on the robots filed under a word of
the question, those whose name has no ASCII word, and those added since the read.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable

__all__ = ["SpeakerIndex", "SPEAKER_ROWS", "question_words"]

SPEAKER_ROWS = """
SELECT r.id, tsvector_to_array(to_tsvector('simple', r.name)) AS words FROM robots r
WHERE r.name ~ '[[:alnum:]]'"""
"""Each robot a question could name, with the words of its name as the search's test reads
them."""

_ASCII_RUN = re.compile(r"[a-z0-9]+")
_MOST_PIECES = 100_000  # about 10 ms of pieces to look up


def question_words(question: str, longest: int) -> set[str] | None:
    """Every ASCII word of up to ``longest`` characters the search's test could find in
    ``question``: each piece of its runs of ASCII letters and digits (more, never fewer,
    wherever the server's parser cuts its words); None for a question of more than
    ``_MOST_PIECES`` pieces (a pasted document), whose search then tests every robot.

    The server may lower a letter that is not ASCII to one that is (``İ`` to ``i``, the Kelvin
    sign to ``k``), so the question is read a second time with its letters decomposed and
    their accents dropped.
    """
    plain = "".join(c for c in unicodedata.normalize("NFKD", question)
                    if not unicodedata.combining(c))
    runs = [run for text in (question.lower(), plain.lower())
            for run in _ASCII_RUN.findall(text)]
    if sum(len(run) * min(len(run), longest) for run in runs) > _MOST_PIECES:
        return None
    words: set[str] = set()
    for run in runs:
        for start in range(len(run)):
            words.update(run[start:end]
                         for end in range(start + 1, min(len(run), start + longest) + 1))
    return words


class SpeakerIndex:
    """Robot ids by the rarest ASCII word of their name; see the module's description.

    Parameters
    ----------
    rows : iterable of (int, list of str)
        Each robot's id and the words of its name, as :data:`SPEAKER_ROWS` reads them.
    """

    def __init__(self, rows: Iterable[tuple[int, list[str]]]) -> None:
        self.read_at = time.monotonic()
        self.by_word: dict[str, list[int]] = {}
        self.unfiled: list[int] = []  # no ASCII word in the name: checked in every search
        self.newest = 0  # robots with a larger id came after the read
        self.longest = 0  # characters of the longest word a robot is filed under
        named = [(robot, [w for w in words if _ASCII_RUN.fullmatch(w)]) for robot, words in rows]
        # Every word of a name must be in the question: file it under its rarest word among
        # all the robots' names (the longest of those), so that "robot" in a question does
        # not bring in every robot-17282.
        names_with = Counter(word for _, words in named for word in words)
        for robot, words in named:
            self.newest = max(self.newest, robot)
            if words:
                word = min(words, key=lambda w: (names_with[w], -len(w), w))
                self.by_word.setdefault(word, []).append(robot)
                self.longest = max(self.longest, len(word))
            else:
                self.unfiled.append(robot)

    def candidates(self, question: str) -> list[int] | None:
        """The robots the question may name (all it names, and some it does not), None for
        every robot (see :func:`question_words`); robots with an id above :attr:`newest`
        are to be checked as well."""
        words = question_words(question, self.longest)
        if words is None:
            return None
        found = list(self.unfiled)
        for word in words:
            found += self.by_word.get(word, ())
        return found
