"""The report's advice: the advisor's findings (shown first) and the HNSW tuning section."""

from __future__ import annotations

import html

import pandas as pd

from ..store import LongTermMemory
from ..tuning.advice import (
    EfSearchAdvice,
    compare_latency,
    concurrency_sweep,
    describe_concurrency,
    plot_concurrency,
    recommend_ef_search,
)
from ..tuning.benchmark import plot_recall_by_ef, plot_recall_latency
from .render import Figure, Section, counted, first_sentence

__all__ = ["advisor_section", "hnsw_section", "findings_html", "findings_markdown"]

_SEVERITY_COLOURS = {"critical": "#b00020", "warning": "#b35900", "info": "#3b6ea5"}


def findings_html(findings: pd.DataFrame) -> str:
    """The findings as an escaped HTML list: severity, object, evidence, what to do, SQL."""
    if findings.empty:
        return "<p>No findings: nothing to fix.</p>"
    items = []
    for row in findings.itertuples(index=False):
        colour = _SEVERITY_COLOURS.get(str(row.severity), "#555")
        items.append(
            f"<li class='finding'><span class='severity' style='background:{colour}'>"
            f"{html.escape(str(row.severity))}</span> <b>{html.escape(str(row.check))}</b> "
            f"<code>{html.escape(str(row.object))}</code><br>"
            f"<span class='evidence'>{html.escape(str(row.evidence))}</span><br>"
            f"{html.escape(str(row.recommendation))}"
            f"<pre>{html.escape(str(row.sql))}</pre></li>")
    return "<ol class='advice'>" + "".join(items) + "</ol>"


def findings_markdown(findings: pd.DataFrame) -> str:
    """The findings as a Markdown list with the SQL in code blocks."""
    if findings.empty:
        return "No findings: nothing to fix."
    parts = []
    for number, row in enumerate(findings.itertuples(index=False), start=1):
        parts.append(f"{number}. **{row.severity}** `{row.check}` `{row.object}`: "
                     f"{row.evidence}. {row.recommendation}\n\n   ```sql\n   "
                     + str(row.sql).replace("\n", "\n   ") + "\n   ```")
    return "\n\n".join(parts)


def advisor_section(findings: pd.DataFrame) -> Section:
    """The report's first section: the findings of :func:`~htm_analytics.advise`, most
    severe first."""
    counts = findings["severity"].value_counts()
    by_severity = (f"{int(counts.get('critical', 0))} critical, "
                   f"{counted(int(counts.get('warning', 0)), 'warning')}, "
                   f"{int(counts.get('info', 0))} info")
    headline = [f"Advisor: {counted(len(findings), 'finding')} ({by_severity})."]
    headline += [f"{str(row.severity).capitalize()}: {row.check} on {row.object}: "
                 f"{first_sentence(str(row.recommendation))}"
                 for row in findings.itertuples() if row.severity != "info"][:5]
    section = Section(
        "advice", "What to do",
        text=("Findings of the health and tuning advisor (htm-analytics advise), most severe "
              "first, each with the SQL that fixes it or shows more. Nothing was run: review "
              "each statement and run them one at a time (CONCURRENTLY refuses to run inside "
              "a transaction block). Usage statistics count since "
              f"{findings.attrs['statistics_note']}."),
        findings=headline, data={"findings": findings})
    section.html = findings_html(findings)
    section.markdown = findings_markdown(findings)
    return section


def _next_setting_noise(sweep: pd.DataFrame, ef_search: int) -> str:
    larger = sweep.loc[sweep["ef_search"] > ef_search, "ef_search"]
    return "" if larger.empty else " " + compare_latency(sweep, ef_search, int(larger.iloc[0]))


def hnsw_section(store: LongTermMemory, *, sweep_queries: int) -> tuple[Section, EfSearchAdvice]:
    """The ef_search recommendation, its recall/latency curve and a concurrency sweep."""
    advice = recommend_ef_search(store, queries=sweep_queries, repeats=2)
    sweep = advice.sweep
    first = sweep.iloc[0]
    if advice.ef_search is None:
        text = f"{advice.evidence}. Consider a larger m or ef_construction."
        headline = f"HNSW: no ef_search reached recall {advice.target_recall:g}."
    else:
        chosen = sweep[sweep["ef_search"] == advice.ef_search].iloc[0]
        latency = (f"{advice.latency_p50_ms:.2f} ms p50, spread "
                   f"{float(chosen['latency_p50_spread_ms']):.2f} ms over "
                   f"{int(first['repeats'])} repeats")
        text = (f"The smallest ef_search reaching recall {advice.target_recall:g} is "
                f"{advice.ef_search} ({latency}; mean recall {advice.recall:.3f}, 95% interval "
                f"over the {int(chosen['queries'])} queries "
                f"{chosen['recall_low']:.3f}-{chosen['recall_high']:.3f}). Measured with "
                f"{advice.evidence.split('; ', 1)[1]}; latency by the client on one "
                f"connection.{_next_setting_noise(sweep, advice.ef_search)}")
        headline = (f"HNSW: ef_search {advice.ef_search} is the smallest reaching recall "
                    f"{advice.target_recall:g} ({advice.recall:.3f}, {latency}).")
    section = Section("hnsw", "HNSW recall and latency", text=text, findings=[headline],
                           tables=[("ef_search sweep", sweep[[
                               "ef_search", "recall_mean", "recall_low", "recall_high",
                               "recall_p5", "latency_p50_ms",
                               "latency_p50_spread_ms", "latency_p95_ms", "qps", "qps_spread",
                               "repeats", "returned_mean", "used_index"]])],
                           data={"recall_sweep": sweep})
    section.figures.append(Figure.from_axes(
        plot_recall_latency(sweep), f"Recall@{first['k']} against queries per second for each "
                                    f"hnsw.ef_search (labels), on {first['index']}."))
    section.figures.append(Figure.from_axes(
        plot_recall_by_ef(sweep), "Mean and 5th-percentile recall by ef_search."))
    if advice.ef_search is not None:
        threads = concurrency_sweep(store, ef_search=advice.ef_search, k=advice.k,
                                    queries=min(sweep_queries, int(first["rows"])), repeats=2)
        section.data["concurrency"] = threads
        section.text += (f"\n\nUnder concurrent clients at ef_search {advice.ef_search}: "
                         f"{describe_concurrency(threads)} Each thread has its own pooled "
                         "connection; the server's cores bound the speedup.")
        section.tables.append(("Concurrent searches (threads each with their own connection)",
                               threads))
        section.figures.append(Figure.from_axes(
            plot_concurrency(threads),
            f"Queries per second (bars; whiskers as long as their spread over "
            f"{int(threads['repeats'].iloc[0])} repeats) and p95 latency (line) with 1-8 "
            f"client threads at ef_search {advice.ef_search}; "
            f"{int(threads['queries'].iloc[0])} searches in all per thread count."))
    return section, advice
