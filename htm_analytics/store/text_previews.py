"""Texts as a list shows them (:func:`~htm_analytics.store.display.shorten_text`), read from
their first characters only: a statement selects ``left(content, width + SPARE)``, and
:func:`shown_texts` shortens those, reading further only for the few texts whose beginning
is mostly whitespace."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import psycopg

from .display import shorten_beginning

__all__ = ["SPARE", "shown_texts"]

SPARE = 80  # characters read past the width: room for the whitespace the shown text drops
_MAX_TEXT = 2**30  # characters: PostgreSQL's texts hold at most 1 GB

# A longer beginning of some texts (those whose first characters are mostly whitespace).
_LONGER = """
SELECT n.id, left(n.content, %(head)s::int) AS content
FROM nodes n WHERE n.id = ANY(%(ids)s::bigint[])"""


def shown_texts(cur: psycopg.Cursor[Any], read: Callable[[str], Any], nodes: Sequence[int],
                heads: Sequence[str], width: int, head: int) -> list[str]:
    """The shortened texts of ``nodes`` from their first ``head`` characters ``heads``; the
    few whose beginning is mostly whitespace read further, 8 times more each round, in
    ``cur``'s transaction (``read`` prepares a statement, :meth:`StoreBase._read`)."""
    shown = [shorten_beginning(text, width, whole=len(text) < head) for text in heads]
    pending = {i: node for i, node in enumerate(nodes) if shown[i] is None}
    while pending:
        head = min(head * 8, _MAX_TEXT)
        found = {int(r["id"]): r["content"] for r in cur.execute(
            read(_LONGER), {"ids": list(pending.values()), "head": head}).fetchall()}
        for i, node in list(pending.items()):
            text = found[node]
            shown[i] = shorten_beginning(text, width,
                                         whole=len(text) < head or head == _MAX_TEXT)
            if shown[i] is not None:
                del pending[i]
    return cast(list[str], shown)
