"""Supersession candidates: a newer memory about the same subject as an older one that says
something different ("the user prefers tea" then "the user now prefers coffee").

HTM never forgets, so both stay and both are recalled; which one holds is a person's call.
The heuristic (its precision measured on a hand-labelled set in
``benchmarks/bench_hygiene.py --only supersession``; see docs/hygiene.md):

1. **same subject**: the two memories share a *specific* tag: the deepest of a memory's
   colon hierarchy (not an ancestor attached with it) that at most
   ``max_tag_memories`` memories in scope hold (``user:drink``, not ``role:program``), and
   their stored vectors (same model) reach cosine ``min_similarity``;
2. **not the same statement**: their cosine stays below ``max_similarity`` (the
   near-duplicate threshold: above it, :func:`near_duplicates` reports the pair);
3. **says something different**: the newer memory drops at least one content word of the
   older one (a replaced value), rather than only adding words (an elaboration).

Nothing is merged or hidden: the pairs are for review.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..frames import scope_params
from ..store import LongTermMemory
from ._common import draw_sample, live_store, shorten_text, validate_fraction
from .hygiene import normalise_text

__all__ = ["SUPERSESSION_COLUMNS", "supersession_candidates", "content_words"]

SUPERSESSION_COLUMNS = {
    "node_old": "int64", "node_new": "int64", "created_old": "datetime64[us, UTC]",
    "created_new": "datetime64[us, UTC]", "shared_tags": "string", "similarity": "float64",
    "dropped_words": "string", "added_words": "string", "content_old": "string",
    "content_new": "string", "robots_old": "string", "robots_new": "string"}
# Function words: dropping or adding one does not change what a memory says.
# (negations are content: "no" and "not" are left in)
_STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "had",
    "has", "have", "he", "her", "his", "i", "if", "in", "into", "is", "it", "its", "me", "my",
    "now", "of", "on", "or", "our", "she", "since", "so", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "to", "was", "we", "were", "what",
    "when", "which", "while", "who", "will", "with", "you", "your"})


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry its content: normalised as the text-twin check does
    (:func:`normalise_text`), function words left out (negations kept)."""
    return {w for w in normalise_text(text).split() if w not in _STOP_WORDS}


def supersession_candidates(store: LongTermMemory, *, min_similarity: float = 0.5,
                            max_similarity: float = 0.95, max_tag_memories: int = 100,
                            robots: str | list[str] | None = None, timeframe: Any = None,
                            content_width: int = 120, sample: int | None = None,
                            seed: int = 0) -> pd.DataFrame:
    """Pairs where a newer memory may supersede an older one about the same subject.

    Parameters
    ----------
    store : LongTermMemory
        The live store; only read.
    min_similarity : float
        Least cosine similarity of the two stored vectors (same model), in (0, 1].
    max_similarity : float
        Cosine similarity from which a pair is a near-duplicate instead (the default is
        :func:`near_duplicates`' threshold); above ``min_similarity``.
    max_tag_memories : int
        A shared tag counts as the same subject only when at most this many memories in
        scope hold it (at least 2).
    robots, timeframe : optional
        Only memories in this scope.
    content_width : int
        Characters of each memory's text shown.
    sample : int, optional
        Only the pairs touching one of this many memories in scope, chosen by a hash of
        their id and ``seed`` (the same pairs the full check gives for those memories, read
        through the tags' index); every memory when None or when the scope holds no more.
    seed : int
        Chooses the sample; the same seed gives the same memories.

    Returns
    -------
    pandas.DataFrame
        One row per pair, most similar first: ``node_old``, ``node_new`` (int64: the older
        and the newer memory by ``created_at``, then id), ``created_old``, ``created_new``
        (datetime64[us, UTC]), ``shared_tags`` (string, comma-separated), ``similarity``
        (float64: cosine), ``dropped_words`` and ``added_words`` (string: content words of
        the older one missing from the newer, and the reverse), ``content_old``,
        ``content_new`` (string, shortened) and ``robots_old``, ``robots_new`` (string).
        With a sample, ``attrs["sample"]`` holds ``checked``, ``memories`` (in scope),
        ``seed``, ``involved`` (sampled memories in a pair), ``share`` and its 95% interval
        ``share_low``/``share_high``.
    """
    store = live_store(store)
    low = validate_fraction(min_similarity, field="min_similarity")
    high = validate_fraction(max_similarity, field="max_similarity")
    if high <= low:
        raise ValidationError(f"must be above min_similarity ({low:g}), got {high:g}",
                              field="max_similarity")
    if isinstance(max_tag_memories, bool) or not isinstance(max_tag_memories, int) \
            or not 2 <= max_tag_memories <= 1_000_000:
        raise ValidationError(f"must be an integer from 2 to 1000000, got "
                              f"{max_tag_memories!r}", field="max_tag_memories")
    if isinstance(content_width, bool) or not isinstance(content_width, int) \
            or not 10 <= content_width <= 10_000:
        raise ValidationError(f"must be an integer from 10 to 10000, got {content_width!r}",
                              field="content_width")
    scope = scope_params(timeframe=timeframe, robots=robots)
    drawn = draw_sample(store, sample, seed, scope)
    if drawn is None:
        pairs = store.shared_tag_pairs(min_similarity=low, max_tag_memories=max_tag_memories,
                                       scope=scope)
    else:
        pairs = store.sampled_tag_pairs(drawn.ids, min_similarity=low,
                                        max_tag_memories=max_tag_memories, scope=scope)
    pairs = pairs[pairs["similarity"] < high]
    described = store.describe_nodes(sorted(set(pairs["node_a"]) | set(pairs["node_b"]))) \
        .set_index("id")
    created = pd.to_datetime(described["created_at"], utc=True)
    rows = []
    for pair in pairs.itertuples():
        a, b = int(pair.node_a), int(pair.node_b)  # type: ignore[arg-type]
        old, new = (a, b) if (created[a], a) <= (created[b], b) else (b, a)
        words_old = content_words(str(described.at[old, "content"]))
        words_new = content_words(str(described.at[new, "content"]))
        dropped = words_old - words_new
        if not dropped:  # the same words, or only more: an elaboration, not a change
            continue
        rows.append({
            "node_old": old, "node_new": new, "created_old": created[old],
            "created_new": created[new], "shared_tags": ", ".join(map(str, pair.shared_tags)),  # type: ignore[arg-type]
            "similarity": pair.similarity, "dropped_words": " ".join(sorted(dropped)),
            "added_words": " ".join(sorted(words_new - words_old)),
            "content_old": shorten_text(described.at[old, "content"], content_width),
            "content_new": shorten_text(described.at[new, "content"], content_width),
            "robots_old": described.at[old, "robots"],
            "robots_new": described.at[new, "robots"]})
    frame = pd.DataFrame(rows, columns=list(SUPERSESSION_COLUMNS))
    frame = frame.sort_values(["similarity", "node_old", "node_new"],
                              ascending=[False, True, True], kind="stable")
    frame = frame.astype(SUPERSESSION_COLUMNS).reset_index(drop=True)
    frame.attrs.update(min_similarity=low, max_similarity=high,
                       max_tag_memories=max_tag_memories)
    if drawn is not None:
        involved = np.isin(drawn.ids, np.concatenate([frame["node_old"], frame["node_new"]]))
        frame.attrs["sample"] = drawn.estimate(int(involved.sum()))
    return frame
