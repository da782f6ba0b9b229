"""A built report (:class:`Report`): its sections written as one self-contained HTML file,
as Markdown with its figures beside it, or as the data behind it."""

from __future__ import annotations

import base64
import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ValidationError
from ..store import write_parquet
from ..store.file_paths import output_path, writable_folder, writing
from .render import REPORT_CSS, Section, escape, html_table, markdown_table

__all__ = ["Report"]

_HTML_SUFFIXES = (".html", ".htm")
_MARKDOWN_SUFFIXES = (".md", ".markdown")


@dataclass
class Report:
    """A built report: sections of tables and figures, ready to write as HTML or Markdown.

    Everything was computed by :func:`build_report`; writing and displaying do no database
    work.
    """

    title: str
    source: str
    generated_at: dt.datetime
    facts: dict[str, str]
    sections: list[Section]

    def to_html(self) -> str:
        """The report as one HTML document: inline CSS, figures as data URIs, no external
        assets."""
        return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
                f"<title>{escape(self.title)}</title></head><body>{self._body()}</body></html>")

    def _body(self) -> str:
        parts = [f"<div class='htm-report'><style>{REPORT_CSS}</style>",
                 f"<h1>{escape(self.title)}</h1>", self._facts_html()]
        if findings := self.findings:
            parts.append("<h2>Key findings</h2><ul class='findings'>"
                         + "".join(f"<li>{escape(f)}</li>" for f in findings) + "</ul>")
        parts.append("<nav><ol>")
        parts += [f"<li><a href='#{s.key}'>{escape(s.title)}</a></li>" for s in self.sections]
        parts.append("</ol></nav>")
        for section in self.sections:
            parts.append(f"<section id='{section.key}'><h2>{escape(section.title)}</h2>")
            if section.text:
                parts += [f"<p>{escape(paragraph)}</p>" for paragraph in section.text.split("\n\n")]
            parts.append(section.html)
            for figure in section.figures:
                data = base64.b64encode(figure.png).decode()
                parts.append(f"<figure><img src='data:image/png;base64,{data}' "
                             f"alt='{escape(figure.caption)}'><figcaption>{escape(figure.caption)}"
                             f"</figcaption></figure>")
            for caption, table in section.tables:
                parts.append(f"<div class='table-wrap'>{html_table(caption, table)}</div>")
            parts.append("</section>")
        parts.append(f"<footer>htm_analytics {escape(_version())}</footer></div>")
        return "\n".join(parts)

    def _facts_html(self) -> str:
        rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
                       for k, v in self._all_facts().items())
        return f"<table class='facts'>{rows}</table>"

    @property
    def findings(self) -> list[str]:
        """Every section's headline numbers, in section order."""
        return [finding for section in self.sections for finding in section.findings]

    def _all_facts(self) -> dict[str, str]:
        return {"source": self.source,
                "generated": self.generated_at.strftime("%Y-%m-%d %H:%M UTC"), **self.facts}

    def _repr_html_(self) -> str:
        return self._body()

    def write_html(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_html` to ``path``, a ``.html`` or ``.htm`` file (a
        :class:`ValidationError` naming ``path`` when it cannot be written)."""
        target = output_path(path, field="path", suffixes=_HTML_SUFFIXES)
        with writing(target, field="path"):
            target.write_text(self.to_html(), encoding="utf-8")
        return target

    def write_markdown(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as Markdown to ``path``, a ``.md`` or ``.markdown`` file;
        figures go to ``<name>_files/`` beside it (a :class:`ValidationError` naming
        ``path`` when either cannot be written)."""
        target = output_path(path, field="path", suffixes=_MARKDOWN_SUFFIXES)
        assets = writable_folder(target.with_name(f"{target.stem}_files"), field="path")
        lines = [f"# {self.title}", ""]
        lines += [f"- **{k}**: {v}" for k, v in self._all_facts().items()] + [""]
        if self.findings:
            lines += ["## Key findings", ""] + [f"- {f}" for f in self.findings] + [""]
        number = 0
        for section in self.sections:
            lines += [f"## {section.title}", ""]
            if section.text:
                lines += [section.text, ""]
            if section.markdown:
                lines += [section.markdown, ""]
            for figure in section.figures:
                number += 1
                name = f"figure-{number:02d}.png"
                with writing(assets / name, field="path"):
                    (assets / name).write_bytes(figure.png)
                lines += [f"![{figure.caption}]({assets.name}/{name})", "",
                          f"*{figure.caption}*", ""]
            for caption, table in section.tables:
                lines += [f"**{caption}**", "", markdown_table(table), ""]
        with writing(target, field="path"):
            target.write_text("\n".join(lines), encoding="utf-8")
        return target

    def write_data(self, folder: str | os.PathLike[str], *, format: str = "csv") -> list[Path]:
        """Write every DataFrame behind the report as ``<section>-<name>.csv`` (or
        ``.parquet``) into ``folder`` (a :class:`ValidationError` naming ``folder`` when it
        cannot be written)."""
        if format not in ("csv", "parquet"):
            raise ValidationError(f"must be 'csv' or 'parquet', got {format!r}", field="format")
        directory = writable_folder(folder, field="folder")
        written = []
        for section in self.sections:
            for name, frame in section.data.items():
                path = directory / f"{section.key}-{name}.{format}"
                with writing(path, field="folder"):
                    if format == "csv":
                        frame.to_csv(path, index=False)
                    else:
                        write_parquet(frame, path)
                written.append(path)
        return written


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("htm-analytics")
    except PackageNotFoundError:
        return "(not installed)"
