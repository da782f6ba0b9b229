"""Vector checks: HNSW cache residency and rebuild memory, padded vectors, mixed models and
the ef_search in use."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd

from ..store import DEFAULT_EF_SEARCH, hnsw_graph_bytes, quote_identifier, quote_literal
from ..store.display import model_label
from ..tuning.advice import compare_latency
from ._common import (
    Context,
    finding,
    query_text,
    regclass,
    size_text,
)


def hnsw_memory(context: Context) -> Iterator[dict[str, str]]:
    frame = context.store.fetch_frame(query_text("hnsw_indexes"))
    # By schema and name: namesakes in two schemas are two indexes.
    residency: dict[tuple[str, str], float] = {}
    if not frame.empty and context.store.fetch_frame(
            "SELECT to_regclass('pg_buffercache') IS NOT NULL").iloc[0, 0]:
        cached = context.store.fetch_frame(query_text("hnsw_residency"))
        residency = dict(zip(zip(cached["schema"], cached["index"]),
                             cached["cached_pages"] / cached["pages"]))
    for _, index in frame.iterrows():
        name = quote_identifier(index["schema"], index["index"])
        relation = regclass(index["schema"], index["index"])
        key = (index["schema"], index["index"])
        size, buffers = int(index["size_bytes"]), int(index["shared_buffers_bytes"])
        if size > buffers:
            yield finding(
                "hnsw_cache", "warning", f"{index['schema']}.{index['index']}",
                f"{size_text(size)} index, shared_buffers {size_text(buffers)}",
                "Searches walk the graph in random order: pages outside shared buffers come "
                "from the OS cache or disk. Raise shared_buffers above the index size, or "
                "index at the native dimension (smaller).",
                [f"SELECT pg_size_pretty(pg_relation_size({relation})), "
                 "current_setting('shared_buffers')"])
        elif key in residency and residency[key] < context.limits.hnsw_min_cached_fraction:
            yield finding(
                "hnsw_cache", "info", f"{index['schema']}.{index['index']}",
                f"{residency[key]:.0%} of the {size_text(size)} index is in shared "
                f"buffers (pg_buffercache); shared_buffers {size_text(buffers)} would hold it",
                "The first searches after a restart read the graph from disk; prewarm it.",
                ["CREATE EXTENSION IF NOT EXISTS pg_prewarm",
                 f"SELECT pg_prewarm({relation})"])
        dimension = int(index["dimension"]) if pd.notna(index["dimension"]) else 0
        needed = int(index["indexed_rows"]) * hnsw_graph_bytes(dimension, int(index["m"]))
        if needed > int(index["maintenance_work_mem_bytes"]):
            yield finding(
                "hnsw_build_memory", "warning", f"{index['schema']}.{index['index']}",
                f"a rebuild needs about {size_text(needed)} for {int(index['indexed_rows']):,} "
                f"vectors of {dimension} dimensions (m={index['m']}); maintenance_work_mem is "
                f"{index['maintenance_work_mem']}",
                "A graph that does not fit is built far slower (pgvector notes 'hnsw graph no "
                "longer fits into maintenance_work_mem'). Raise it for the rebuild's session.",
                [_build_memory_setting(needed), f"REINDEX INDEX CONCURRENTLY {name}"])


def _build_memory_setting(graph_bytes: int) -> str:
    """The SET that gives a session's index build an HNSW graph of ``graph_bytes``, with a
    quarter more as margin."""
    megabytes = -(-graph_bytes * 5 // 4 // 2**20)
    return f"SET maintenance_work_mem = {quote_literal(f'{megabytes}MB')}"


def _model_groups(models: pd.DataFrame
                  ) -> dict[tuple[str, int], tuple[int, list[tuple[str, str]] | None]]:
    """The stored vectors per model and dimension, most first: ``{(label, dimension):
    (vectors, the (provider, model) names it is stored under, or None for no name)}``. One
    model named two ways (``sentence-transformers``, ``all-MiniLM-L6-v2`` or
    ``sentence-transformers/all-MiniLM-L6-v2``) is one group."""
    groups: dict[tuple[str, int], tuple[int, list[tuple[str, str]] | None]] = {}
    for provider, model, dimension, nodes in models[["provider", "model", "dimension",
                                                     "nodes"]].astype(object).itertuples(
            index=False, name=None):
        named = not pd.isna(provider)
        key = (model_label(provider, model), int(dimension))
        count, names = groups.get(key, (0, [] if named else None))
        groups[key] = (count + int(nodes),
                       [*(names or []), (provider, model)] if named else None)
    return dict(sorted(groups.items(), key=lambda item: -item[1][0]))


def vectors(context: Context) -> Iterator[dict[str, str]]:
    if not (context.tables["table"] == "nodes").any():
        return
    dimensions = context.store.fetch_frame(query_text("vector_dimensions"))
    for _, row in dimensions.iterrows():
        dimension = int(row["dimension"])
        if row["has_native_index"] or dimension >= 2000:
            continue
        # A graph past maintenance_work_mem is built on disk, about three times slower.
        graph = int(row["vectors"]) * hnsw_graph_bytes(dimension)
        memory = graph > int(row["maintenance_work_mem_bytes"])
        build = context.store.native_index_statement(dimension)
        yield finding(
            "padded_vectors", "warning", "public.nodes",
            f"{int(row['vectors']):,} vectors of {dimension} dimensions are searched through "
            "the reference schema's index on vectors zero-padded to 2000",
            f"Index them at their own dimension: 2-5x faster builds and searches (README); "
            f"searches use it automatically (LongTermMemory.create_native_index({dimension}))."
            + (f" Its graph needs about {size_text(graph)} while it is built, more than "
               f"maintenance_work_mem ({row['maintenance_work_mem']}): the SET gives the "
               "build's session that memory." if memory else ""),
            [_build_memory_setting(graph), build] if memory else [build])
    groups = _model_groups(context.store.embedding_models())
    if len(groups) > 1:
        described = "; ".join(f"{label} ({dimension}-d): {nodes:,}"
                              for (label, dimension), (nodes, _) in groups.items())
        # Most vectors first: the others are the ones to clear.
        clear = []
        for (_, dimension), (_, names) in list(groups.items())[1:]:
            made_by = ("NOT EXISTS (SELECT 1 FROM node_embedding_models m WHERE m.node_id = "
                       "nodes.id)" if names is None else
                       "id IN (SELECT node_id FROM node_embedding_models WHERE (provider, "
                       "model) IN (" + ", ".join(f"({quote_literal(provider)}, "
                                                 f"{quote_literal(model)})"
                                                 for provider, model in names) + "))")
            clear.append("UPDATE nodes SET embedding = NULL, embedding_dimension = NULL "
                         f"WHERE embedding_dimension = {int(dimension)} AND {made_by}")
        yield finding(
            "mixed_embeddings", "warning", "public.nodes",
            f"stored vectors come from {len(groups)} models or dimensions: {described}",
            "Vectors of different models are not comparable: searches with the main model "
            "fail the model check (HTM.recall, search) or rank the others at random. "
            "Re-embed the smaller groups with the main model; or clear their vectors (the "
            "UPDATE keeps the memories, without vectors, until they are re-embedded). The "
            "first statement lists the memories per model.",
            ["SELECT m.provider, m.model, n.embedding_dimension, count(*) FROM nodes n "
             "LEFT JOIN node_embedding_models m ON m.node_id = n.id "
             "WHERE n.embedding IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 4 DESC", *clear])


def ef_search(advice: Any) -> Iterator[dict[str, str]]:
    chosen, target = advice.ef_search, advice.target_recall
    in_use = DEFAULT_EF_SEARCH
    evidence = f"{advice.evidence}; searches of this toolkit run at ef_search {in_use} " \
               "(raised to the result limit)"
    if chosen is None:
        yield finding(
            "ef_search", "warning", advice.index,
            evidence, f"No swept setting reached recall {target:g}: rebuild the index with a "
                      "larger m or ef_construction (htm-analytics bench build).",
            ["SELECT indexrelid::regclass, pg_size_pretty(pg_relation_size(indexrelid)) "
             "FROM pg_index WHERE indexrelid = " + quote_literal(advice.index) + "::regclass"])
        return
    if chosen == in_use:
        return
    severity = "warning" if chosen > in_use else "info"
    swept = set(advice.sweep["ef_search"]) if "latency_p50_spread_ms" in advice.sweep else set()
    if {chosen, in_use} <= swept:
        speed = f" ({compare_latency(advice.sweep, chosen, in_use).rstrip('.')})"
    else:  # no measured claim about speed
        speed = f" (ef_search {in_use} was not swept: its latency was not measured)"
    why = (f"ef_search {in_use} misses the target recall {target:g}" if chosen > in_use else
           f"ef_search {chosen} already reaches recall {target:g}{speed}")
    yield finding(
        "ef_search", severity, advice.index, evidence,
        f"{why}. Clients that use the server setting (the reference Ruby code) get it from "
        "the database default; per session, SET hnsw.ef_search.",
        [f"SET hnsw.ef_search = {int(chosen)}",
         f"ALTER DATABASE {quote_identifier(advice.database)} SET hnsw.ef_search = {int(chosen)}"])
