"""A read-only MCP server over the toolkit's analytics (``htm-analytics mcp``).

Built on the official ``mcp`` Python SDK (2.x: :class:`mcp.server.MCPServer`, formerly
FastMCP). Read-only by construction: the store it is given must be opened with
``read_only=True`` (every transaction of its connections is read-only, so the server refuses
any write whatever a tool does), every tool is annotated ``readOnlyHint``, and no tool
counts an access or records a recall. Inputs are validated as everywhere in the toolkit; its
typed errors reach the client as MCP tool errors (``isError``) with their message, never a
stack trace. Results are bounded: at most ``max_rows`` rows per table, memory texts cut to
``max_chars`` characters.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import json
import math
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations

from ..advisor import advise
from ..agent.timeframes import parse_timeframe
from ..analysis import memory_hygiene
from ..analysis.indexes import index_usage, table_health
from ..analysis.robots import robot_activity
from ..analysis.tags import popular_tags, tag_cooccurrence
from ..analysis.trends import remember_trends
from ..errors import HTMError, ValidationError
from ..report.build import build_report
from ..report.hygiene import REPORT_HYGIENE_SAMPLE, duplicates_sample
from ..report.render import markdown_table
from ..store import SEARCH_STRATEGIES, VECTOR_STRATEGIES, LongTermMemory, SearchStrategy
from ..store.display import counted
from ..tuning.advice import recommend_ef_search
from ..validation import validate_number

__all__ = ["build_server", "MAX_ROWS", "MAX_CHARS", "REPORT_URI"]

MAX_ROWS = 200
MAX_CHARS = 1000
REPORT_URI = "htm-analytics://report/latest"
_SEARCH_LIMIT = 50

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False)

_F = TypeVar("_F", bound=Callable[..., Any])


def _typed_errors(function: _F) -> _F:
    """The toolkit's typed errors as MCP tool errors (their message, no traceback)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except HTMError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date, pd.Timestamp)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


class _Bounds:
    """How much a result may hold."""

    def __init__(self, max_rows: int, max_chars: int) -> None:
        self.max_rows, self.max_chars = max_rows, max_chars

    def text(self, value: Any) -> Any:
        if isinstance(value, str) and len(value) > self.max_chars:
            return value[:self.max_chars] + "…"
        return value

    def rows(self, frame: pd.DataFrame) -> dict[str, Any]:
        """A DataFrame as ``{"rows": [...], "total_rows": n, "truncated": bool}``."""
        shown = frame.head(self.max_rows)
        rows = json.loads(shown.to_json(orient="records", date_format="iso"))
        rows = [{k: self.text(v) for k, v in row.items()} for row in rows]
        return {"rows": rows, "total_rows": len(frame), "truncated": len(frame) > len(shown)}


def _positive(value: int, field: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ValidationError(f"must be an integer from 1 to {maximum}, got {value!r}",
                              field=field)
    return value


class _StrictServer(MCPServer):
    """An MCP server that checks a tool call's arguments before the SDK sees them: it drops
    unknown arguments, so ``search(query=..., robot="nobody")`` answered, unfiltered, as if
    asked without one; it reads ``limit=true`` as 1 and ``limit="5"`` as 5; and it refuses
    a missing or mistyped argument with a pydantic report of several lines, not the
    toolkit's ``ValidationError: field: ...``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # per tool: each parameter's annotated type, and whether it must be given
        self.tool_parameters: dict[str, dict[str, tuple[Any, bool]]] = {}

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        known = self.tool_parameters.get(name)
        if known is not None:
            given = arguments or {}
            unknown = sorted(set(given) - set(known))
            if unknown:
                raise ToolError(f"ValidationError: {name} takes no argument "
                                f"{', '.join(map(repr, unknown))}; it takes "
                                f"{', '.join(sorted(known)) or 'none'}")
            for field, (annotation, required) in known.items():
                if field in given:
                    _check_argument(annotation, given[field], field)
                elif required:
                    raise ToolError(f"ValidationError: {field}: is required")
        return await super().call_tool(name, arguments, context)


def _check_argument(annotation: Any, value: Any, field: str) -> None:
    """Refuse a value of the wrong JSON type for a parameter annotated ``int``, ``float``,
    ``str`` or a ``Literal`` (each optionally ``| None``): a bool or a string for a number, a
    fraction for an integer (JSON numbers: an integer is a float's value too), a non-string
    for a string, a value outside a ``Literal``'s."""
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (
        typing.Union, types.UnionType) else (annotation,)
    if value is None and type(None) in options:
        return
    wanted = next((option for option in options if option is not type(None)), None)
    if typing.get_origin(wanted) is typing.Literal:
        if value not in typing.get_args(wanted) or not isinstance(value, str):
            raise ToolError(f"ValidationError: {field}: must be one of "
                            f"{', '.join(typing.get_args(wanted))}, got {value!r}")
        return
    kinds = {int: ((int,), "an integer"), float: ((int, float), "a number"),
             str: ((str,), "a string")}
    if wanted in kinds:
        accepted, kind = kinds[wanted]
        if isinstance(value, bool) or not isinstance(value, accepted):
            raise ToolError(f"ValidationError: {field}: must be {kind}, got {value!r}")


def build_server(store: LongTermMemory, *, embedder: Any = None, max_rows: int = MAX_ROWS,
                 max_chars: int = MAX_CHARS, sweep_queries: int = 50) -> MCPServer:
    """The MCP server of one memory store.

    Parameters
    ----------
    store : LongTermMemory
        Opened with ``read_only=True`` (refused otherwise): the server cannot write.
    embedder : Embedder, optional
        The model that embedded the stored memories (:func:`htm_analytics.get_embedder`),
        for the vector strategies of ``search``; without it only the lexical ones run.
    max_rows, max_chars : int
        Rows per table and characters per memory text in any result.
    sweep_queries : int
        Queries of the ``ef_search`` recommendation's sweep.

    Returns
    -------
    mcp.server.MCPServer
        Run it with ``server.run("stdio")``, or connect to it in process with
        ``mcp.Client(server)``.
    """
    if not isinstance(store, LongTermMemory):
        raise ValidationError("must be a LongTermMemory", field="store")
    if not store.read_only:
        raise ValidationError("must be opened with read_only=True: the MCP server never "
                              "writes", field="store")
    bounds = _Bounds(_positive(max_rows, "max_rows", 100_000),
                     _positive(max_chars, "max_chars", 1_000_000))
    sweep_queries = _positive(sweep_queries, "sweep_queries", 100_000)
    server = _StrictServer(
        "htm-analytics",
        instructions="Read-only analytics of an HTM long-term memory (PostgreSQL + pgvector): "
                     "what it holds, searches without side effects, tags, trends, index "
                     "health and tuning advice. Nothing here changes the memory.")

    def tool(function: _F) -> _F:
        server.tool(annotations=_READ_ONLY)(_typed_errors(function))
        hints = typing.get_type_hints(function)
        server.tool_parameters[function.__name__] = {
            name: (hints.get(name), parameter.default is inspect.Parameter.empty)
            for name, parameter in inspect.signature(function).parameters.items()}
        return function

    @tool
    def status() -> dict[str, Any]:
        """The database: HTM era and what was found, server versions, and row counts, with
        soft-deleted (forgotten) memories counted apart from the live ones."""
        counts = store.table_counts()
        info = store.schema_info
        return _jsonable({
            "database": store.server_info["database"],
            "postgresql": store.server_info["server_version"],
            "pgvector": store.server_info["pgvector_version"],
            "found": info.describe(), "schema": info.as_dict(),
            "counts": dict(zip(counts["table"], counts["rows"])),
            "native_index_dimensions": sorted(store.native_dimensions)})

    @tool
    def search(query: str, strategy: SearchStrategy | None = None, limit: int = 10,
               timeframe: str | None = None) -> dict[str, Any]:
        """Search the memories by any strategy (vector, fulltext, fulltext_any, fuzzy,
        hybrid, rrf, vector_bm25; default vector_bm25 with an embedding model, else
        fulltext_any). Nothing is written: no access is counted. ``timeframe`` is a phrase
        such as "last 7 days" or "2026-01-01..2026-02-01"."""
        limit = _positive(limit, "limit", _SEARCH_LIMIT)
        if strategy is None:
            strategy = "vector_bm25" if embedder is not None else "fulltext_any"
        if strategy not in SEARCH_STRATEGIES:
            raise ValidationError(f"must be one of {', '.join(SEARCH_STRATEGIES)}",
                                  field="strategy")
        if strategy in VECTOR_STRATEGIES:
            if embedder is None:
                raise ValidationError(
                    f"{strategy} needs the embedding model of the stored memories: start "
                    "the server with --embedder, or use fulltext_any or fuzzy",
                    field="strategy")
            provider, model = getattr(embedder, "name", None), getattr(embedder, "model", None)
            if isinstance(provider, str) and isinstance(model, str):
                store.check_embedding_model(provider, model, int(embedder.dimensions))
        frame = None if timeframe is None else parse_timeframe(timeframe)
        hits = store.search_by_strategy(
            strategy, query=query, limit=limit, timeframe=frame,
            embedding_service=embedder if strategy in VECTOR_STRATEGIES else None)
        rows = [{k: bounds.text(v) for k, v in hit.items()} for hit in hits]
        return _jsonable({"strategy": strategy, "results": rows})

    @tool
    def robots() -> dict[str, Any]:
        """Per robot: memories, remembers, and the share of its memories other robots have."""
        return bounds.rows(robot_activity(store))

    @tool
    def tags(limit: int = 50, prefix: str | None = None) -> dict[str, Any]:
        """The most used tags (colon hierarchies, e.g. database:postgresql)."""
        return bounds.rows(popular_tags(store, limit=_positive(limit, "limit", MAX_ROWS),
                                        prefix=prefix))

    @tool
    def tag_pairs(min_shared: int = 2, limit: int = 50) -> dict[str, Any]:
        """Tags found together on memories, with Jaccard, lift and PMI."""
        return bounds.rows(tag_cooccurrence(store, min_shared=min_shared,
                                            limit=_positive(limit, "limit", MAX_ROWS)))

    @tool
    def trends(freq: str = "W", by: str | None = None) -> dict[str, Any]:
        """Remembers per period (D, W, M...): new, shared and repeated; by robot or tag.
        ``exact`` says whether the event log covers them all."""
        frame = remember_trends(store, freq=freq, by=by)
        return _jsonable({**bounds.rows(frame), "exact": frame.attrs["exact"],
                          "missing_remembers": frame.attrs["missing_remembers"],
                          "reason": frame.attrs.get("reason")})

    @tool
    def indexes() -> dict[str, Any]:
        """Index usage (scans, size, never used) and table health (dead rows, vacuum)."""
        return {"indexes": bounds.rows(index_usage(store)),
                "tables": bounds.rows(table_health(store))}

    @tool
    def advice() -> dict[str, Any]:
        """What to fix, most severe first, each finding with the SQL to do it (not run)."""
        return bounds.rows(advise(store))

    @tool
    def hygiene(min_similarity: float = 0.95,
                sample: int = REPORT_HYGIENE_SAMPLE) -> dict[str, Any]:
        """What is wrong with the memory's content: groups of near-duplicate memories,
        memories holding credentials or personal data (masked excerpts only, never the
        secret), and pairs where a newer memory on the same subject says something different
        from an older one (supersession candidates, for review), each check with what it
        means and what to do. A memory holding more than ``sample`` memories is checked on a
        seeded sample of that many (near-duplicates on 1,000 of them), with each share
        estimated and its 95% interval, as the report does; 0 checks every memory (minutes
        to hours on a million)."""
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            raise ValidationError(f"must be a non-negative integer, got {sample!r}",
                                  field="sample")
        result = memory_hygiene(store, min_similarity=min_similarity, sample=sample or None,
                                duplicates_sample=duplicates_sample(store, sample or None))
        return {"memories": result.total, "checked": result.describe_sample(),
                "summary": bounds.rows(result.summary),
                **{name: bounds.rows(frame) for name, frame in result.details.items()}}

    @tool
    def ef_search(target_recall: float = 0.95, k: int = 10) -> dict[str, Any]:
        """The smallest hnsw.ef_search whose measured recall@k reaches the target, from a
        sweep of held-out stored vectors against exact search (not measured on a memory of
        fewer than two vectors: a held-out one needs a neighbour)."""
        target_recall = validate_number(target_recall, field="target_recall", minimum=0,
                                        exclusive=True, maximum=1)
        k = _positive(k, "k", 1000)
        with store.tuning_session() as session:
            stored = max(session.vector_dimensions().values(), default=0)
        if stored < 2:
            return {"ef_search": None, "target_recall": target_recall, "k": k,
                    "evidence": f"not measured: {counted(stored, 'stored vector')} of the "
                                "most common dimension; a recall sweep needs at least 2"}
        # Held-out queries are stored vectors: never more than there are.
        result = recommend_ef_search(store, target_recall, k,
                                     queries=min(sweep_queries, stored))
        return _jsonable({"ef_search": result.ef_search, "target_recall": result.target_recall,
                          "k": result.k, "recall": result.recall,
                          "latency_p50_ms": result.latency_p50_ms, "index": result.index,
                          "evidence": result.evidence,
                          "sweep": bounds.rows(result.sweep)})

    @server.resource(REPORT_URI, name="report", mime_type="text/markdown",
                     description="The memory report, built when read (without the HNSW "
                                 "sweep; figures left out), as Markdown.")
    def report() -> str:
        try:
            return report_markdown(build_report(store, benchmark=False), bounds)
        except HTMError as exc:
            raise ResourceError(f"{type(exc).__name__}: {exc}") from exc

    return server


def report_markdown(report: Any, bounds: _Bounds) -> str:
    """A :class:`~htm_analytics.Report` as Markdown text, its tables cut to ``max_rows``."""
    lines = [f"# {report.title}", ""]
    facts = {"source": report.source,
             "generated": report.generated_at.strftime("%Y-%m-%d %H:%M UTC"), **report.facts}
    lines += [f"- **{k}**: {v}" for k, v in facts.items()] + [""]
    if report.findings:
        lines += ["## Key findings", ""] + [f"- {f}" for f in report.findings] + [""]
    for section in report.sections:
        lines += [f"## {section.title}", ""]
        if section.text:
            lines += [section.text, ""]
        for caption, table in section.tables:
            lines += [f"**{caption}**", "", markdown_table(table.head(bounds.max_rows)), ""]
    return "\n".join(lines)
