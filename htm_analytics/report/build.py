"""The report: one self-contained HTML file (or Markdown) built from the analysis helpers."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..advisor import advise, statistics_age
from ..analysis.indexes import index_usage, plot_index_usage, table_health
from ..analysis.robots import plot_robot_activity, plot_robot_overlap, robot_activity, robot_overlap
from ..analysis.tags import (
    plot_tag_graph,
    plot_tag_hierarchy,
    popular_tags,
    tag_cooccurrence,
    tag_graph,
    tag_graph_view,
    tag_hierarchy,
)
from ..analysis.trends import (
    most_reinforced,
    plot_remember_count_distribution,
    plot_remember_trends,
    remember_count_distribution,
    remember_trends,
)
from ..analysis.worker_pool import validate_workers
from ..errors import ValidationError
from ..frames import MemorySource, memory_source, period_unit
from ..store import LongTermMemory
from ..store.history import HistoryFolder, HistoryTable
from ..tuning.conversations import ConversationEvaluation
from ..tuning.evaluation import plot_retrieval_quality, retrieval_quality
from ..validation import validate_positive_int
from .advice import advisor_section, hnsw_section
from .conversations import conversation_section
from .document import Report
from .hygiene import REPORT_HYGIENE_SAMPLE, duplicates_sample, hygiene_section
from .render import (
    Figure,
    Section,
    counted,
    shown_texts,
    with_size,
)
from .since import since_last_time_section

__all__ = ["Figure", "Section", "Report", "build_report", "MIN_SWEEP_VECTORS",
           "TOP_ROBOTS", "TOP_TREND_ROBOTS"]

MIN_SWEEP_VECTORS = 50
"""Fewer stored vectors than this: the report skips the HNSW sweep (and says so)."""

TOP_ROBOTS = 30
"""The report's robot tables and overlap matrix show at most this many robots (most memories
first), so that its size does not grow with the number of robots."""

TOP_TREND_ROBOTS = 10
"""Robots drawn in the per-robot trend chart."""

TAG_GRAPH_TAGS = 30
"""The biggest tags considered for the report's tag graph."""


def _check_arguments(*, title: Any, labelled_queries: Any, conversations: Any,
                     **flags: Any) -> None:
    """The arguments of :func:`build_report` that nothing checks before its first query."""
    if not isinstance(title, str) or not title.strip():
        raise ValidationError(f"must be a non-empty string, got {title!r}", field="title")
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ValidationError(f"must be True or False, got {flag!r}", field=name)
    if labelled_queries is not None and not (
            isinstance(labelled_queries, (tuple, list)) and len(labelled_queries) == 3):
        raise ValidationError("must be (texts, vectors, relevant node ids) or None",
                              field="labelled_queries")
    if conversations is not None and not isinstance(conversations, ConversationEvaluation):
        raise ValidationError("must be a ConversationEvaluation (evaluate_conversations, or "
                              f"ConversationEvaluation.from_json) or None, got "
                              f"{type(conversations).__name__}", field="conversations")


def build_report(source: MemorySource, *, title: str = "Memory report",
                 benchmark: bool = True, sweep_queries: int = 200, freq: str = "W",
                 labelled_queries: tuple[Sequence[str], np.ndarray, Sequence[int]] | None = None,
                 advice: bool = True, hygiene: bool = True,
                 hygiene_sample: int | None = REPORT_HYGIENE_SAMPLE, workers: int = 1,
                 conversations: ConversationEvaluation | None = None,
                 history: str | os.PathLike[str] | HistoryFolder | HistoryTable | None = None
                 ) -> Report:
    """Build the report from the analysis helpers.

    Parameters
    ----------
    source : LongTermMemory or Snapshot
        A snapshot gives every section but index usage, table health and the HNSW sweep,
        which need the live server.
    title : str
    benchmark : bool
        Include the ef_search recall/latency sweep (live store with embeddings only).
    sweep_queries : int
        Held-out queries for that sweep (2 repeats each).
    freq : str
        Period of the trend charts ('D', 'W', 'M').
    labelled_queries : (texts, vectors, relevant node ids), optional
        Queries with a known answer: adds a section comparing search strategies
        (:func:`~htm_analytics.tuning.evaluation.retrieval_quality`). Live store only.
    advice : bool
        Open with the advisor's findings (:func:`~htm_analytics.advise`; live store only),
        including the ef_search recommendation when ``benchmark`` is on.
    hygiene : bool
        Add the "Memory hygiene" section near the top (near-duplicates, credentials and
        personal data; :func:`~htm_analytics.memory_hygiene`; live store only).
    hygiene_sample : int or None
        On a memory holding more, the hygiene checks read a seeded sample of this many
        memories (the section says so and gives estimated shares with their interval), so
        that the report's time stays bounded; near-duplicates are then searched for the
        first 1,000 of them (``REPORT_DUPLICATES_SAMPLE``). None checks every memory.
    workers : int
        Processes running the hygiene section's sensitive-data detectors when it reads more
        than 20,000 memories (``hygiene_sample`` None or larger); see
        :func:`~htm_analytics.sensitive_memories`, whose caller needs the ``__main__``
        guard for more than one.
    conversations : ConversationEvaluation, optional
        A conversation benchmark's result (:func:`~htm_analytics.evaluate_conversations`,
        or its ``--json`` document read with :meth:`ConversationEvaluation.from_json`): adds
        a section with the strategy x category table and its chart, last.
    history : path, HistoryFolder or HistoryTable, optional
        A history written by ``htm-analytics collect`` (a DuckDB file, a folder of Parquet
        files or a PostgreSQL schema): adds "Since last time" near the top (growth, index
        usage and recall since the previous sample, drift findings).

    Returns
    -------
    Report
    """
    source = memory_source(source)
    live = isinstance(source, LongTermMemory)
    _check_arguments(title=title, benchmark=benchmark, advice=advice, hygiene=hygiene,
                     labelled_queries=labelled_queries, conversations=conversations)
    sweep_queries = validate_positive_int(sweep_queries, field="sweep_queries")
    period_unit(freq)
    if hygiene_sample is not None:  # checked before any work
        hygiene_sample = validate_positive_int(hygiene_sample, field="hygiene_sample")
    validate_workers(workers)
    facts: dict[str, str] = {}
    if isinstance(source, LongTermMemory):
        info = source.server_info
        facts["server"] = (f"PostgreSQL {info['server_version']}, pgvector "
                           f"{info['pgvector_version']}, schema version {info['schema_version']}")
        facts["database"] = source.schema_info.describe()
        where = source.url
    else:
        snapshot_info = source.info  # type: ignore[attr-defined]
        facts["snapshot of"] = f"{snapshot_info['source']} at {snapshot_info['exported_at']}"
        facts["server"] = (f"PostgreSQL {snapshot_info['postgresql']}, pgvector "
                           f"{snapshot_info['pgvector']}")
        where = str(getattr(source, "path", "snapshot"))
    sections = list(_sections(source, live=live, freq=freq,
                              labelled_queries=labelled_queries))
    if live:
        assert isinstance(source, LongTermMemory)
        ef_advice, hnsw = None, None
        if benchmark:
            with source.tuning_session() as session:
                stored = max(session.vector_dimensions().values(), default=0)
            if stored >= MIN_SWEEP_VECTORS:
                # Held-out queries are stored vectors: never more than there are.
                hnsw, ef_advice = hnsw_section(source,
                                               sweep_queries=min(sweep_queries, stored))
            elif stored:
                hnsw = Section(
                    "hnsw", "HNSW recall and latency",
                    text=f"Not measured: {counted(stored, 'stored vector')} of the most common "
                         "dimension; "
                         f"a recall sweep needs at least {MIN_SWEEP_VECTORS}.")
        hygiene_result = None
        if hygiene:
            hygiene_part, hygiene_result = hygiene_section(
                source, sample=hygiene_sample, workers=workers,
                duplicates_sample=duplicates_sample(source, hygiene_sample))
        # One reading of the statistics after every query of the report, shared by the
        # advisor and the index section, so that both give the same counts and age.
        findings = (advise(source, ef_search_advice=ef_advice, hygiene=hygiene_result)
                    if advice else None)
        sections.append(_index_section(source, findings))
        if hnsw is not None:
            sections.append(hnsw)
        if hygiene_result is not None:
            sections.insert(0, hygiene_part)
        if findings is not None:
            sections.insert(0, advisor_section(findings))
    if history is not None:
        sections.insert(1 if live and advice else 0, since_last_time_section(history))
    if conversations is not None:
        sections.append(conversation_section(conversations))
    return Report(title=title, source=where, generated_at=dt.datetime.now(dt.UTC),
                  facts=facts, sections=sections)


def _sections(source: MemorySource, *, live: bool, freq: str,
              labelled_queries: Any) -> Iterator[Section]:
    counts = source.table_counts()  # type: ignore[attr-defined]
    rows = counts.set_index("table")["rows"].astype(int)
    held = (f"{counted(rows['nodes'], 'memory', 'memories')} held by "
            f"{counted(rows['robots'], 'robot')}")
    yield Section("overview", "Memory at a glance",
                  text=f"{held} ({counted(rows['robot_nodes'], 'robot-memory pair')}: a "
                       "memory shared by two robots counts twice), with "
                       f"{counted(rows['tags'], 'distinct tag')}.",
                  findings=[f"{held}, {rows['robot_nodes'] / max(rows['nodes'], 1):.2f} "
                            "robots per memory on average."],
                  tables=[("Rows per table (count(*) when the report was built)", counts)],
                  data={"table_counts": counts})

    all_activity = robot_activity(source)  # most memories first
    activity = all_activity.head(TOP_ROBOTS)
    top_robots = activity["robot"].tolist()
    shown = ("" if len(all_activity) <= TOP_ROBOTS else
             f" Tables and charts show the {TOP_ROBOTS} robots holding the most memories, of "
             f"{len(all_activity):,}.")
    # Robots in scope are named explicitly: never an all-robots matrix, whatever their number.
    overlap = robot_overlap(source, robots=top_robots) if top_robots else robot_overlap(source)
    section = Section("robots", "Robots and the hive mind",
                      text="A memory is stored once and shared by every robot that remembers "
                           "it. shared_fraction is the part of a robot's memories that at "
                           "least one other robot remembers too." + shown,
                      tables=[("Per robot: memories, summed remember counts, shared memories "
                               "(robot_nodes)", activity.drop(columns=["robot_id"]))],
                      data={"activity": activity, "overlap": overlap})
    if len(activity):
        section.figures.append(Figure.from_axes(
            plot_robot_activity(activity),
            "Memories per robot, split into those only this robot remembers and those shared "
            "with another robot (robot_nodes)."))
    if len(overlap):
        section.figures.append(Figure.from_axes(
            plot_robot_overlap(overlap),
            "Jaccard similarity of the robots' memory sets: shared / union of their nodes."))
    yield section

    trends = remember_trends(source, freq=freq)
    by_robot = remember_trends(source, freq=freq, by="robot",
                               robots=top_robots[:TOP_TREND_ROBOTS] or None)
    exact = trends.attrs.get("exact", True)
    how = ("exact: the memory_events log agrees with robot_nodes" if exact else
           "approximate: " + trends.attrs.get("reason", "no event log in this database"))
    untimed = int(trends.attrs.get("untimed_remembers", 0))
    section = Section("trends", "Remembering over time",
                      text=f"Remembers per period ({how}). New: content no robot had; "
                           "shared: a robot's first remember of content another robot had; "
                           "repeated: a robot reinforcing its own memory."
                           + (f" {counted(untimed, 'remember')} at infinity or -infinity "
                              "fall in no period and are not shown." if untimed else ""),
                      data={"trends": trends, "trends_by_robot": by_robot})
    if len(trends):
        partial = trends.loc[trends["partial"], "period"]
        in_progress = ("" if partial.empty else
                       f" The last period (from {partial.iloc[0]:%Y-%m-%d}) was still in "
                       "progress when the data was read: hatched, its count is partial, "
                       "not a drop.")
        section.figures.append(Figure.from_axes(
            plot_remember_trends(trends),
            f"Remembers per period ({freq}), stacked by kind; {how}.{in_progress}"))
        section.figures.append(Figure.from_axes(
            plot_remember_trends(by_robot),
            "Cumulative new memories per robot (the robot that first remembered them)"
            + (f"; the {TOP_TREND_ROBOTS} robots holding the most memories."
               if len(top_robots) > TOP_TREND_ROBOTS else ".")))
    distribution = remember_count_distribution(source)
    reinforced = shown_texts(most_reinforced(source, limit=10), "content")
    section.data.update(distribution=distribution, most_reinforced=reinforced)
    if len(distribution):
        section.figures.append(Figure.from_axes(
            plot_remember_count_distribution(distribution),
            "Memories by how many times they were remembered, all robots summed "
            "(robot_nodes.remember_count); log scale."))
    section.tables.append(("The most reinforced memories (remember counts summed over robots)",
                           reinforced))
    yield section

    hierarchy = tag_hierarchy(source)
    popular = popular_tags(source, limit=15)
    tagged = int(popular.attrs.get("tagged_nodes", 0))
    pairs = tag_cooccurrence(source, min_shared=3, sort_by="npmi", limit=15)
    section = Section("tags", "Tags",
                      text="Tags are hierarchical (a:b:c); tagging attaches the ancestors, so "
                           "a tag's cumulative count includes everything below it. Pairs are "
                           "ranked by normalised PMI, which does not favour big tags.",
                      tables=[(f"Most used tags (node_tags); share: of the "
                               f"{counted(tagged, 'memory', 'memories')} that carry a tag",
                               popular.rename(columns={"share": "share of tagged"})),
                              ("Tag pairs that meet far more often than their sizes predict "
                               "(at least 3 shared memories; a tag and its ancestor left out)",
                               pairs[["topic1", "topic2", "shared_nodes", "jaccard", "lift",
                                      "npmi"]])],
                      data={"hierarchy": hierarchy, "popular": popular, "cooccurrence": pairs})
    if len(hierarchy):
        section.figures.append(Figure.from_axes(
            plot_tag_hierarchy(hierarchy),
            "The tag tree to depth 2, biggest subtrees first: memories carrying each tag or "
            "one below it."))
        graph = tag_graph(source, level=2, min_shared=3, weight="npmi", seed=0)
        view = tag_graph_view(graph, max_nodes=TAG_GRAPH_TAGS)
        if view.number_of_nodes():
            # The caption counts what the plot draws (the view), not the whole graph.
            communities = len({view.nodes[n].get("community", 0) for n in view})
            section.figures.append(Figure.from_axes(
                plot_tag_graph(graph, max_nodes=TAG_GRAPH_TAGS),
                f"Tags rolled up to two levels: the {view.number_of_nodes()} biggest that "
                "share at least 3 memories with another, each drawn with its 3 strongest ties "
                "by normalised PMI (edge width); "
                f"colours are {counted(communities, 'Louvain community', 'Louvain communities')}"
                " (seed 0), named by their biggest tag."))
    yield section

    if not live:
        return
    assert isinstance(source, LongTermMemory)
    if labelled_queries is not None:
        texts, vectors, relevant = labelled_queries
        quality = retrieval_quality(source, texts, vectors, relevant)
        ranked = quality.sort_values(["recall_at_k", "mrr"], ascending=False)
        best, k = ranked.iloc[0], int(quality["k"].iloc[0])
        others = ", ".join(f"{r.strategy} {r.recall_at_k:.0%}"
                           for r in ranked.iloc[1:].itertuples())
        section = Section(
            "search", "Which search finds the right memory",
            text=f"{len(texts)} queries with one known answer each, run through the store with "
                 f"every strategy (top {quality['k'].iloc[0]}, cache off). recall: the answer "
                 "is in the results; MRR: mean of 1/rank; no_result: nothing came back (full "
                 "text requiring every word often finds nothing); latency: p50 and p95 per "
                 f"query over {int(quality['repeats'].iloc[0])} timed runs of each query, "
                 "measured in the same run, with the spread of the runs' medians: a "
                 "difference between strategies smaller than their spreads together is "
                 "noise."
                 "\n\nWhy hybrid finds less than vector: the reference hybrid search ranks by "
                 "vector similarity only among candidates that full-text or tag matching found "
                 "first, so an answer whose text lacks the query's words is never a candidate; "
                 "it cannot find more than those matches allow. rrf fuses the whole vector "
                 "ranking with the full-text ranking instead, so it keeps what vector search "
                 "finds and adds exact word matches.",
            findings=[f"Search: {best['strategy']} finds the right memory in the top {k} "
                      f"for {best['recall_at_k']:.0%} of {len(texts)} labelled queries at "
                      f"{best['latency_p50_ms']:.1f} ms p50 (spread "
                      f"{best['latency_p50_spread_ms']:.1f} ms over "
                      f"{int(best['repeats'])} runs)"
                      + (f" ({others})." if others else ".")],
            tables=[("Search strategies on labelled queries", quality)],
            data={"retrieval_quality": quality})
        section.figures.append(Figure.from_axes(
            plot_retrieval_quality(quality),
            f"Recall@{quality['k'].iloc[0]} and MRR per strategy on {len(texts)} labelled "
            "queries (query vectors from the same model as the memories), with each "
            "strategy's median latency (diamonds, right axis) and its spread over "
            f"{int(quality['repeats'].iloc[0])} runs."))
        yield section


def _index_section(source: LongTermMemory, findings: pd.DataFrame | None) -> Section:
    """Index usage and table health; the never-used indexes and the statistics' age are the
    advisor's (``findings``) when it ran, so that the report states them once."""
    usage = index_usage(source)
    if findings is not None:
        never = list(findings.attrs["unused_indexes"])
        age_seconds, since = (findings.attrs["statistics_seconds"],
                              findings.attrs["statistics_note"])
    else:
        never = usage.loc[usage["never_used"], "index"].tolist()
        _, age_seconds, since = statistics_age(source)
    health = table_health(source)
    nodes = health.set_index("table").loc["nodes"]
    hot = (f"{nodes['hot_update_fraction']:.0%} of the {nodes['n_tup_upd']:,} updates of nodes "
           "were HOT (no index entry written)" if nodes["n_tup_upd"] else "")
    judge = "" if age_seconds is not None and age_seconds >= 7 * 86400 else \
        " (too short a time to call them unused)"
    scope = ("the memory tables, not counting unique and primary keys" if findings is None
             else "every table of the database, not counting unique and primary keys nor the "
                  "duplicates under What to do")
    unused = (f"{counted(len(never), 'non-key index', 'non-key indexes')} "
              f"{'was' if len(never) == 1 else 'were'} never used since {since}{judge}.")
    section = Section(
        "indexes", "Indexes and tables",
        findings=[f"Indexes: {unused}"] + ([f"Updates: {hot}; each of the others wrote an "
                                            "entry into every index, HNSW included."]
                                           if hot else []),
        text=(f"Never used since {since} ({scope}): {', '.join(never)}." if never else
              f"Every non-key index has been scanned since {since}.")
        + ("" if findings is None else " The never_used column and the red bars below cover "
           "the memory tables only, duplicates included.")
        + (f"\n\n{hot}. The others added an entry to every index of nodes, the HNSW index "
           "included: an update that changes an indexed column cannot be HOT, and the "
           "reference schema indexes access_count, last_accessed and in_working_memory, which "
           "every recall changes." if hot else "")
        + "\n\nCounters are cumulative from pg_stat_user_indexes and pg_stat_user_tables.",
        tables=[("Index usage (pg_stat_user_indexes, sizes from pg_relation_size; every "
                 "column in the index_usage data)",
                 with_size(usage, "size_bytes")[[
                     "table", "index", "method", "is_unique", "idx_scan", "idx_tup_read",
                     "last_idx_scan", "size", "never_used"]]),
                ("Table health (pg_stat_user_tables; every column in the table_health data)",
                 with_size(health, "total_bytes")[[
                     "table", "n_live_tup", "n_dead_tup", "seq_scan", "idx_scan", "n_tup_upd",
                     "hot_update_fraction", "last_autovacuum", "last_autoanalyze", "size"]])],
        data={"index_usage": usage, "table_health": health})
    section.figures.append(Figure.from_axes(
        plot_index_usage(usage), "Index scans per index since the last statistics reset; red: "
                                 "never used (key indexes excepted)."))
    return section
