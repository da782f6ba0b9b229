"""Rendering pieces of the report: sections and figures, escaped HTML tables, Markdown
tables, sizes, the CSS."""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..analysis.sensitive import mask_sensitive
from ..store.display import counted

__all__ = ["Figure", "Section", "html_table", "escape", "markdown_table", "with_size",
           "shown_texts", "REPORT_CSS", "counted", "first_sentence"]


@dataclass
class Figure:
    """A rendered plot (PNG bytes) and the caption saying what it shows and how."""

    png: bytes
    caption: str

    @classmethod
    def from_axes(cls, ax: Any, caption: str) -> Figure:
        import matplotlib.pyplot as plt

        buffer = io.BytesIO()
        ax.figure.savefig(buffer, format="png", dpi=96)
        plt.close(ax.figure)
        return cls(buffer.getvalue(), caption)


@dataclass
class Section:
    """One part of the report: text, tables (with captions) and figures; ``findings`` are
    its headline numbers, listed together at the top of the report."""

    key: str
    title: str
    text: str = ""
    findings: list[str] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    data: dict[str, pd.DataFrame] = field(default_factory=dict)
    html: str = ""  # escaped HTML shown after the text (the advisor's findings)
    markdown: str = ""


def escape(text: Any) -> str:
    """Text made safe for HTML (quotes too)."""
    return html.escape(str(text), quote=True)


def html_table(caption: str, table: pd.DataFrame) -> str:
    """A DataFrame as an escaped HTML table with a caption (reports and widgets)."""
    table = table.copy()
    for column in table.columns:
        if pd.api.types.is_datetime64_any_dtype(table[column]):
            times = table[column]
            table[column] = times.dt.strftime("%Y-%m-%d %H:%M").astype(object).where(
                times.notna(), "")
    body = table.to_html(index=False, escape=True, border=0, na_rep="",
                         float_format=lambda v: f"{v:,.3f}")
    return body.replace("<table", f"<table data-caption='{escape(caption)}'", 1).replace(
        "<thead>", f"<caption>{escape(caption)}</caption><thead>", 1)


def with_size(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """``frame`` with a readable ``size`` column made from a byte count."""
    def readable(n: float) -> str:
        for unit in ("B", "kB", "MB", "GB"):
            if n < 1024 or unit == "GB":
                return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
            n /= 1024
        return ""  # pragma: no cover

    return frame.assign(size=frame[column].map(readable))


def markdown_table(table: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (pipes escaped, floats to 3 decimals)."""
    def cell(value: Any) -> str:
        if isinstance(value, float) and not pd.isna(value):  # NaN: empty, as in HTML
            return f"{value:,.3f}"
        return "" if pd.isna(value) else str(value).replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(map(str, table.columns)) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |"
            for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


# Scoped to the report's own element, so that showing a report in a notebook does not restyle
# the notebook.
REPORT_CSS = """
.htm-report{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;
max-width:1300px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
.htm-report h1{font-size:1.6em}
.htm-report h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
.htm-report table{border-collapse:collapse;margin:1em 0;font-size:.85em}
.htm-report th,.htm-report td{padding:.25em .6em;border-bottom:1px solid #eee;text-align:left;
vertical-align:top}
.htm-report caption{caption-side:top;text-align:left;font-weight:600;padding:.3em 0;
width:max-content;max-width:60em}
.htm-report table.facts th{color:#555;font-weight:600}
.htm-report figure{margin:1em 0}.htm-report figure img{max-width:100%}
.htm-report figcaption{font-size:.85em;color:#555}
.htm-report footer{margin-top:3em;font-size:.8em;color:#777}
.htm-report .table-wrap{overflow-x:auto;max-width:100%}
.htm-report td{max-width:36em;overflow-wrap:break-word}
.htm-report th{white-space:nowrap}
.htm-report ol.advice{padding-left:1.5em}.htm-report li.finding{margin:.8em 0}
.htm-report .severity{color:#fff;border-radius:3px;padding:0 .4em;font-size:.8em;
text-transform:uppercase}
.htm-report .evidence{color:#444}
.htm-report pre{background:#f5f5f5;padding:.4em .6em;white-space:pre-wrap;
overflow-wrap:anywhere;font-size:.8em;margin:.3em 0}
"""


def shown_texts(frame: pd.DataFrame, *columns: str, width: int = 140) -> pd.DataFrame:
    """``frame`` with the memory texts of ``columns`` as a report shows them: cut to
    ``width`` characters, credentials and personal data masked (``[credential]``), as the
    hygiene section's excerpts are: a report goes to people who may not see them."""
    frame = frame.copy()
    for column in columns:
        frame[column] = frame[column].map(
            lambda text: text if pd.isna(text) else mask_sensitive(
                text if len(text) <= width else text[: width - 1] + "…")).astype("string")
    return frame


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def first_sentence(text: str) -> str:
    """The first sentence of ``text``, with its full stop: a stop inside a number or a name
    (``0.95``, ``hnsw.ef_search``) does not end it; one followed by a space or the end does."""
    match = _SENTENCE_END.search(text)
    return text[: match.end()] if match else text.rstrip() + "."
