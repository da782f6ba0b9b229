"""Notebook display for results: escaped HTML built from data already in hand."""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

__all__ = ["SearchResults", "MemoryStats", "counted", "shorten_text", "shorten_beginning",
           "model_label", "model_label_sql"]

_PREVIEW = 200
_QUICK = 16  # characters past the width first flattened: enough unless the text is mostly spaces


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """``number`` and the noun in agreement: ``1 memory``, ``2,777 memories``."""
    noun = singular if number == 1 else (plural or f"{singular}s")
    return f"{number:,} {noun}"


def shorten_text(text: Any, width: int) -> str:
    """``text`` on one line (its words, split on whitespace as :meth:`str.split` does, joined
    by single spaces), cut to ``width`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def shorten_beginning(head: str, width: int, *, whole: bool) -> str | None:
    """:func:`shorten_text` of a text of which only ``head``, its beginning, is at hand (all
    of it when ``whole``); ``width`` >= 1.

    The words of a text's beginning joined by single spaces are the beginning of the whole
    text's, so once they run past ``width`` characters the result is known: ``flat[:width -
    1] + "…"``, as :func:`shorten_text` cuts it. Otherwise only the whole text tells: None
    when ``head`` is not all of it (a beginning that is mostly whitespace).
    """
    first = head[: width + 1]
    # Every whitespace character but the space is unprintable: without them, double spaces
    # and a space at either end, the first characters are already on one line.
    if first.isprintable() and "  " not in first and first[:1] != " " and first[-1:] != " ":
        if len(first) > width:
            return first[: width - 1] + "…"
        return first if whole else None
    flat = " ".join(head[: width + _QUICK].split())
    if len(flat) <= width and len(head) > width + _QUICK:
        flat = " ".join(head.split())
    if len(flat) > width:
        return flat[: width - 1] + "…"
    return flat if whole else None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    text = str(value)
    if len(text) > _PREVIEW:
        text = text[: _PREVIEW - 1] + "…"
    return html.escape(text)


class SearchResults(list[dict[str, Any]]):
    """The rows a search returned: a plain list of dicts that also shows itself as a table in
    notebooks (``_repr_html_``, no database work) and converts with :meth:`to_frame`.

    A vector search also keeps the vector it searched with in :attr:`query_vector` (float32,
    unpadded; None for the other searches): ``HTM.recall`` logs it where the database has
    the query log."""

    query_vector: Any = None

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame, one column per key."""
        return pd.DataFrame(list(self))

    def _repr_html_(self) -> str:
        if not self:
            return "<p><em>no results</em></p>"
        columns = list(self[0])
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
        rows = "".join("<tr>" + "".join(f"<td>{_cell(row.get(c, ''))}</td>" for c in columns)
                       + "</tr>" for row in self)
        return (f"<table><caption>{len(self)} results</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{rows}</tbody></table>")


class MemoryStats(dict[str, Any]):
    """The result of :meth:`~htm_analytics.LongTermMemory.stats`: a dict shown as a table."""

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{_cell(v)}</td></tr>"
                       for k, v in self.items())
        return f"<table><caption>memory statistics</caption><tbody>{rows}</tbody></table>"


def model_label(provider: Any, model: Any) -> str:
    """``provider/model`` as users name an embedding model, once: sentence-transformers'
    models already carry their organisation (``sentence-transformers/all-MiniLM-L6-v2``)."""
    if provider is None or pd.isna(provider):
        return "unknown model"
    provider, model = str(provider), str(model)
    return model if model.startswith(f"{provider}/") else f"{provider}/{model}"


def model_label_sql(alias: str) -> str:
    """:func:`model_label` as a SQL expression over ``alias``'s ``provider`` and ``model``
    columns (a ``node_embedding_models`` row), for statements that compare labels."""
    return (f"CASE WHEN starts_with({alias}.model, {alias}.provider || '/') THEN {alias}.model"
            f" ELSE {alias}.provider || '/' || {alias}.model END")
