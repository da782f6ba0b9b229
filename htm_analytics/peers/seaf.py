"""The Self-Engineering Agent Framework (PostgreSQL + pgvector): import and tool analytics.

Mapping (see ``docs/peers.md``): each session becomes a robot; each message a memory the
session remembered at ``created_at`` (tagged ``seaf:message:<role>``); each tool and
composite tool a memory of the robot ``seaf:tool-registry`` (tagged ``seaf:tool`` /
``seaf:composite-tool`` and ``tool:<name>``) with its 1536-d embedding and model; each
execution a ``recall`` event of its session on the tool's memory at its ``timestamp``.
Workflow patterns and tool relationships are kept as records, and every row whole in
``import_records`` (inputs, outputs, success, latency, file paths...).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._plotting import axes_or_new, checked_plot
from ..store import LongTermMemory
from ..store.sources import postgres_source, read_frame, table_query
from ..validation import validate_number
from ._importing import (
    DEFAULT_CHUNK_ROWS,
    ImportSummary,
    SourceRow,
    TableSpec,
    as_utc,
    import_tables,
    jsonable,
    missing_tables,
    slug_tag,
)

__all__ = [
    "check_seaf_source",
    "SEAF_EMBEDDING_MODEL",
    "TOOL_REGISTRY_ROBOT",
    "import_seaf",
    "plot_tool_stats",
    "seaf_composite_candidates",
    "seaf_tool_ngrams",
    "seaf_tool_stats",
]

SYSTEM = "seaf"
TOOL_REGISTRY_ROBOT = "seaf:tool-registry"
#: The embedding model SEAF's schema document names for its 1536-d vectors.
SEAF_EMBEDDING_MODEL = ("openai", "text-embedding-3-small")
_ARROW = " → "


def _tool_tag(name: Any) -> list[str]:
    tag = slug_tag("tool", name)
    return [tag] if tag else []


def _described(name: Any, docstring: Any) -> str | None:
    if not name:
        return None
    return f"{name}: {docstring.strip()}" if isinstance(docstring, str) and docstring.strip() \
        else str(name)


def _unnamed(name: Any, column: str) -> str | None:
    """Why a tool of this name cannot be remembered (its name is its memory's key)."""
    if name is None or not str(name).strip():
        return f"{column}: must not be empty or whitespace"
    return None


def _without(row: dict[str, Any], column: str) -> dict[str, Any]:
    return jsonable({k: v for k, v in row.items() if k != column})


_SESSION = {"robot": "session_id"}


def _map_session(row: dict[str, Any]) -> SourceRow:
    return SourceRow(key=str(row["session_id"]), record=jsonable(row),
                     robot=row["session_id"], columns=_SESSION)


def _map_tool(row: dict[str, Any]) -> SourceRow:
    return SourceRow(key=str(row["name"]), record=_without(row, "embedding"),
                     content=_described(row["name"], row.get("docstring")),
                     robot=TOOL_REGISTRY_ROBOT, remembered_at=as_utc(row.get("created_at")),
                     tags=["seaf:tool", *_tool_tag(row["name"])],
                     embedding=row.get("embedding"), reject=_unnamed(row["name"], "name"),
                     columns={"content": "name"})


def _map_composite(row: dict[str, Any]) -> SourceRow:
    tags = ["seaf:composite-tool", *_tool_tag(row["tool_name"])]
    components = row.get("component_tools")
    for component in components if isinstance(components, list) else []:
        tags.extend(_tool_tag(component))
    return SourceRow(key=str(row["tool_name"]), record=_without(row, "embedding"),
                     content=_described(row["tool_name"], row.get("docstring")),
                     robot=TOOL_REGISTRY_ROBOT, remembered_at=as_utc(row.get("created_at")),
                     tags=sorted(set(tags)), embedding=row.get("embedding"),
                     reject=_unnamed(row["tool_name"], "tool_name"),
                     columns={"content": "tool_name"})


def _map_message(row: dict[str, Any]) -> SourceRow:
    role = slug_tag("seaf", "message", row.get("role") or "unknown")
    return SourceRow(key=str(row["id"]), record=jsonable(row), content=row.get("content"),
                     robot=row["session_id"], remembered_at=as_utc(row.get("created_at")),
                     tags=[role] if role else [], columns=_SESSION)


def _map_execution(row: dict[str, Any]) -> SourceRow:
    return SourceRow(key=str(row["id"]), record=jsonable(row), robot=row["session_id"],
                     remembered_at=as_utc(row.get("timestamp")),
                     event=("recall", "agent_tools|composite_tools", str(row["tool_name"])),
                     columns=_SESSION)


def _map_record(row: dict[str, Any]) -> SourceRow:
    return SourceRow(key=str(row["id"]), record=jsonable(row))


# Each table with its key, and the columns the import reads besides (a table of that name
# without them is not SEAF's).
_TABLES: list[tuple[str, str, Callable[[dict[str, Any]], SourceRow], bool,
                    tuple[str, ...]]] = [
    ("agent_sessions", "session_id", _map_session, True, ()),
    ("agent_tools", "name", _map_tool, False, ("docstring", "embedding", "created_at")),
    ("composite_tools", "tool_name", _map_composite, True,
     ("component_tools", "docstring", "embedding", "created_at")),
    ("session_messages", "id", _map_message, True, ("session_id", "role", "content",
                                                    "created_at")),
    ("tool_executions", "id", _map_execution, False, ("session_id", "tool_name",
                                                      "timestamp")),
    ("workflow_patterns", "id", _map_record, True, ()),
    ("tool_relationships", "id", _map_record, True, ()),
]


def _robot_metadata(name: str) -> dict[str, Any]:
    if name == TOOL_REGISTRY_ROBOT:
        return {"imported_from": SYSTEM, "role": "tool registry"}
    return {"imported_from": SYSTEM, "session_id": name}


# Written once, keyed by a serial id: a recorded id holding another row is another source's.
_APPEND_ONLY = {"session_messages", "tool_executions"}


def _specs() -> list[TableSpec]:
    return [TableSpec(table, table_query(table, key), mapper, optional,
                      append_only=table in _APPEND_ONLY, columns=(key, *columns))
            for table, key, mapper, optional, columns in _TABLES]


def check_seaf_source(url: str) -> list[str]:
    """Read-only: whether :func:`import_seaf` can read ``url``, before anything is written.
    Returns the optional tables it lacks; raises :class:`~htm_analytics.ValidationError`
    (``source``) when it lacks a required one."""
    with postgres_source(url, system=SYSTEM) as conn:
        return missing_tables(conn, _specs(), system=SYSTEM)


def import_seaf(url: str, store: LongTermMemory, *, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                embedding_model: tuple[str, str] | None = SEAF_EMBEDDING_MODEL,
                progress: bool = False, source_name: str | None = None) -> ImportSummary:
    """Import a Self-Engineering Agent Framework database into ``store`` (read-only).

    Parameters
    ----------
    url : str
        The SEAF PostgreSQL database.
    store : LongTermMemory
    chunk_rows : int
        Source rows read and written at a time.
    embedding_model : (provider, model) or None
        Recorded for the imported tool vectors (SEAF's document: OpenAI
        text-embedding-3-small).
    progress : bool
        Show a progress bar (tqdm).
    source_name : str, optional
        A name for this source, under which its rows' keys are recorded: needed when the
        memory already holds an import of another source of the same system, whose keys
        (row ids counted from 1) would otherwise clash (that clash is refused, naming this
        argument). The same name finds the same source's rows again on a second import.

    Returns
    -------
    ImportSummary
        Executions of a tool that is in neither ``agent_tools`` nor ``composite_tools`` are
        rejected (and kept as records).
    """
    from ..store.connection import mask_url

    with postgres_source(url, system=SYSTEM) as conn:
        return import_tables(store, conn, _specs(), system=SYSTEM, source=mask_url(url),
                             chunk_rows=chunk_rows, progress=progress,
                             embedding_model=embedding_model, robot_metadata=_robot_metadata,
                             source_name=source_name)


# -- analytics on the source ---------------------------------------------------------------

_STATS_DTYPES = {"tool_name": "string", "executions": "int64", "successes": "int64",
                 "success_rate": "float64", "latency_mean_ms": "float64",
                 "latency_p50_ms": "float64", "latency_p95_ms": "float64", "sessions": "int64"}


def seaf_tool_stats(source: Any) -> pd.DataFrame:
    """Executions, success rate and latency of each tool.

    Returns
    -------
    pandas.DataFrame
        One row per tool, most executed first: ``tool_name`` (string), ``executions``,
        ``successes``, ``sessions`` (int64), ``success_rate``, ``latency_mean_ms``,
        ``latency_p50_ms``, ``latency_p95_ms`` (float64; NaN when no execution reports a
        time).
    """
    return read_frame(source, "seaf_tool_stats", dtypes=_STATS_DTYPES, system=SYSTEM)


def _executions(source: Any) -> pd.DataFrame:
    return read_frame(source, "seaf_executions", dtypes={
        "session_id": "string", "execution_order": "int64", "tool_name": "string",
        "success": "bool", "execution_time_ms": "float64",
        "executed_at": "datetime64[us, UTC]"}, system=SYSTEM)


def _count_ngrams(executions: pd.DataFrame, lengths: range) -> pd.DataFrame:
    """Contiguous tool windows per session, with how often and how well they ran."""
    stats: dict[tuple[str, ...], list[Any]] = defaultdict(lambda: [0, set(), 0, 0.0, 0])
    for session, steps in executions.groupby("session_id", sort=False):
        tools = steps["tool_name"].tolist()
        ok = steps["success"].to_numpy()
        latency = steps["execution_time_ms"].to_numpy()
        for n in lengths:
            for start in range(len(tools) - n + 1):
                entry = stats[tuple(tools[start:start + n])]
                entry[0] += 1
                entry[1].add(session)
                entry[2] += int(ok[start:start + n].all())
                window = latency[start:start + n]
                if not np.isnan(window).any():
                    entry[3] += float(window.sum())
                    entry[4] += 1
    rows = [{"ngram": _ARROW.join(tools), "tools": tools, "n": len(tools),
             "occurrences": e[0], "sessions": len(e[1]), "success_rate": e[2] / e[0],
             "latency_ms": e[3] / e[4] if e[4] else float("nan")}
            for tools, e in stats.items()]
    frame = pd.DataFrame(rows, columns=["ngram", "tools", "n", "occurrences", "sessions",
                                        "success_rate", "latency_ms"])
    frame = frame.astype({"ngram": "string", "n": "int64", "occurrences": "int64",
                          "sessions": "int64", "success_rate": "float64",
                          "latency_ms": "float64"})
    return frame.sort_values(["occurrences", "success_rate", "ngram"],
                             ascending=[False, False, True], kind="stable"
                             ).reset_index(drop=True)


def seaf_tool_ngrams(source: Any, *, n: int = 2, top: int | None = 20) -> pd.DataFrame:
    """The most frequent runs of ``n`` consecutive tools within a session.

    Returns
    -------
    pandas.DataFrame
        ``ngram`` (string, tools joined by " → "), ``tools`` (tuple of str), ``n``,
        ``occurrences`` (int64: windows), ``sessions`` (int64: distinct sessions),
        ``success_rate`` (float64: share of windows whose every step succeeded) and
        ``latency_ms`` (float64: mean total time of a window), most frequent first.
    """
    n = validate_number(n, field="n", minimum=1, maximum=20, integer=True)
    frame = _count_ngrams(_executions(source), range(n, n + 1))
    return frame if top is None else frame.head(top).reset_index(drop=True)


def seaf_composite_candidates(source: Any, *, max_length: int = 4, min_frequency: int = 3,
                              min_success_rate: float = 0.8) -> pd.DataFrame:
    """Tool sequences that meet SEAF's promotion rule for composite tools.

    The rule of SEAF's document: at least 2 tools, seen at least ``min_frequency`` times,
    succeeding at least ``min_success_rate`` of the time. Sequences are the runs of 2 to
    ``max_length`` consecutive tools in a session's executions.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`seaf_tool_ngrams` for the qualifying sequences, plus
        ``composite_tool`` and ``workflow_pattern`` (string: the composite tool or learned
        pattern with exactly these tools, if SEAF has one) and ``already_composite`` (bool).
    """
    max_length = validate_number(max_length, field="max_length", minimum=2, integer=True)
    min_success_rate = validate_number(min_success_rate, field="min_success_rate", minimum=0,
                                       maximum=1)
    frame = _count_ngrams(_executions(source), range(2, max_length + 1))
    frame = frame[(frame["occurrences"] >= min_frequency)
                  & (frame["success_rate"] >= min_success_rate)].reset_index(drop=True)
    known = read_frame(source, "seaf_known_sequences", system=SYSTEM)
    names: dict[str, dict[tuple[str, ...], str]] = {"composite_tool": {},
                                                    "workflow_pattern": {}}
    for kind, name, tools in known.itertuples(index=False):
        names[kind].setdefault(tuple(tools or ()), name)
    for kind, mapping in names.items():
        frame[kind] = pd.array([mapping.get(t) for t in frame["tools"]], dtype="string")
    frame["already_composite"] = frame["composite_tool"].notna().astype(bool)
    return frame


@checked_plot
def plot_tool_stats(df: pd.DataFrame, *, ax: Any = None, top: int = 15, **kwargs: Any) -> Any:
    """Success rate per tool (bars) from :func:`seaf_tool_stats`, labelled with p50 latency."""
    ax = axes_or_new(ax, (8, 4.5))
    shown = df.head(top).iloc[::-1]
    bars = ax.barh(shown["tool_name"].astype(str), shown["success_rate"], **kwargs)
    labels = ["" if pd.isna(v) else f"{v:.0f} ms" for v in shown["latency_p50_ms"]]
    ax.bar_label(bars, labels=labels, fontsize="small", padding=2)
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("success rate (label: median latency)")
    return ax
