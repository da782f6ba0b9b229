"""GhostKG (SQLite): import its knowledge graphs and analyse their FSRS memory state.

Mapping (see ``docs/peers.md``): each ``owner_id`` / ``agent_name`` becomes a robot; each
edge a memory ``"source relation target"`` remembered by its owner at ``created_at``, tagged
``entity:<source>``, ``entity:<target>`` and ``relation:<relation>``; each log with content a
memory remembered at its ``timestamp`` (so the event log gets its remember), tagged
``ghostkg:read`` or ``ghostkg:write`` and ``entity:<name>`` for its annotated entities; each
entity (the ``nodes`` table, FSRS state) a record. Every source row is kept whole in
``import_records``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._plotting import axes_or_new, checked_plot
from ..errors import ValidationError
from ..store import LongTermMemory
from ..store.sources import load_peer_query, read_frame, sqlite_source
from ..validation import (
    validate_names,
    validate_number,
    validate_positive_int,
    validate_timeframe,
)
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
    "check_ghostkg_source",
    "FSRS_DECAY",
    "fsrs_retrievability",
    "ghostkg_memory_state",
    "ghostkg_retrievability_curves",
    "import_ghostkg",
    "plot_retrievability_curves",
]

SYSTEM = "ghostkg"
#: FSRS-6 trainable decay ``w_20`` (GhostKG's default).
FSRS_DECAY = 0.1542


def fsrs_retrievability(elapsed_days: Any, stability: Any, *, decay: float = FSRS_DECAY) -> Any:
    """FSRS-6 retrievability ``R = (1 + factor * t / S) ** -decay``, ``factor = 0.9 **
    (-1 / decay) - 1`` (so that R is 0.9 when ``t = S``), as GhostKG documents it.

    Elapsed times below zero count as zero; stability 0 or missing (a new entity) gives NaN.
    """
    decay = validate_number(decay, field="decay", minimum=0, exclusive=True)
    t = np.maximum(_numbers(elapsed_days, "elapsed_days"), 0.0)
    s = _numbers(stability, "stability")
    factor = 0.9 ** (-1.0 / decay) - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.where(s > 0, (1.0 + factor * t / np.where(s > 0, s, 1.0)) ** -decay,
                          np.nan)
    return result


def _numbers(values: Any, field: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"must be numbers: {exc}", field=field) from None


def _text(value: Any) -> Any:
    """A SQLite value as text: SQLite keeps any type in any column (a BLOB name, too)."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def _key(*parts: Any) -> str:
    return json.dumps([str(p) for p in parts], ensure_ascii=False)


def _entity_tag(name: Any) -> list[str]:
    tag = slug_tag("entity", name)
    return [tag] if tag else []


def _absent(value: Any) -> bool:
    return value is None or value == ""


def _map_node(row: dict[str, Any]) -> SourceRow:
    owner = row["owner_id"]
    return SourceRow(key=_key(owner, row["id"]), record=jsonable(row),
                     robot=None if _absent(owner) else owner,
                     reject="no owner_id" if _absent(owner) else None,
                     columns={"robot": "owner_id"})


def _map_edge(row: dict[str, Any]) -> SourceRow:
    tags = [*_entity_tag(row["source"]), *_entity_tag(row["target"])]
    relation = slug_tag("relation", row["relation"])
    if relation:
        tags.append(relation)
    content = " ".join(str(row[c]).strip() for c in ("source", "relation", "target")
                       if row[c] is not None)
    owner = row["owner_id"]
    return SourceRow(key=_key(owner, row["source"], row["target"], row["relation"]),
                     record=jsonable(row), content=content,
                     robot=None if _absent(owner) else owner,
                     remembered_at=as_utc(row["created_at"]), tags=sorted(set(tags)),
                     reject="no owner_id" if _absent(owner) else None,
                     columns={"robot": "owner_id", "content": "source relation target"})


def _map_log(row: dict[str, Any]) -> SourceRow:
    record = jsonable(row)
    try:
        annotations = json.loads(row["annotations"]) if row["annotations"] else {}
    except (TypeError, ValueError, RecursionError):
        annotations = {}
    tags = []
    action = slug_tag("ghostkg", row["action_type"]) if row["action_type"] else None
    if action:
        tags.append(action)
    if isinstance(annotations, dict) and isinstance(annotations.get("entities"), list):
        for name in annotations["entities"]:
            tags.extend(_entity_tag(name))
    agent = row["agent_name"]
    return SourceRow(key=str(row["id"]), record=record,
                     content=row["content"] if row["content"] else None,
                     robot=None if _absent(agent) else agent,
                     remembered_at=as_utc(row["timestamp"]), tags=sorted(set(tags)),
                     reject="no agent_name" if _absent(agent) else None,
                     columns={"robot": "agent_name"})


def _robot_metadata(name: str) -> dict[str, Any]:
    return {"imported_from": SYSTEM, "source_agent": name}


# Columns read as names or text: SQLite keeps a BLOB in any of them.
_TEXT_COLUMNS = frozenset({"owner_id", "id", "agent_name", "content", "source", "target",
                           "relation", "action_type"})


def _textual(mapper: Callable[[dict[str, Any]], SourceRow]
             ) -> Callable[[dict[str, Any]], SourceRow]:
    def mapped(row: dict[str, Any]) -> SourceRow:
        return mapper({k: _text(v) if k in _TEXT_COLUMNS else v for k, v in row.items()})
    return mapped


# The columns the import's queries read: a table of that name without them is not GhostKG's.
_COLUMNS = {
    "nodes": ("owner_id", "id", "stability", "difficulty", "last_review", "reps", "state",
              "created_at", "sim_day", "sim_hour"),
    "edges": ("owner_id", "source", "target", "relation", "weight", "sentiment", "created_at",
              "sim_day", "sim_hour"),
    "logs": ("id", "agent_name", "action_type", "content", "content_uuid", "annotations",
             "timestamp", "sim_day", "sim_hour"),
}


def _specs() -> list[TableSpec]:
    return [TableSpec("nodes", load_peer_query("ghostkg_nodes"), _textual(_map_node),
                      columns=_COLUMNS["nodes"]),
            TableSpec("edges", load_peer_query("ghostkg_edges"), _textual(_map_edge),
                      columns=_COLUMNS["edges"]),
            TableSpec("logs", load_peer_query("ghostkg_logs"), _textual(_map_log),
                      optional=True, append_only=True, columns=_COLUMNS["logs"])]


def check_ghostkg_source(sqlite_path: str | os.PathLike[str]) -> list[str]:
    """Read-only: whether :func:`import_ghostkg` can read ``sqlite_path``, before anything
    is written. Returns the optional tables it lacks; raises
    :class:`~htm_analytics.ValidationError` (``source``) when it lacks a required one and
    :class:`~htm_analytics.DatabaseError` when it is no SQLite database."""
    with sqlite_source(sqlite_path) as conn:
        return missing_tables(conn, _specs(), system=SYSTEM)


def import_ghostkg(sqlite_path: str | os.PathLike[str], store: LongTermMemory, *,
                   chunk_rows: int = DEFAULT_CHUNK_ROWS, progress: bool = False,
                   source_name: str | None = None) -> ImportSummary:
    """Import a GhostKG SQLite database into ``store``, reading it read-only.

    Parameters
    ----------
    sqlite_path : path
        The GhostKG database file (tables ``nodes``, ``edges``, ``logs``).
    store : LongTermMemory
        Where the memories go.
    chunk_rows : int
        Source rows read and written at a time (memory stays bounded by this).
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
        Rows read, imported, already imported, duplicates and rejected (with reasons), per
        table; ``summary.to_frame()`` gives them as a DataFrame.
    """
    with sqlite_source(sqlite_path) as conn:
        return import_tables(store, conn, _specs(), system=SYSTEM, source=str(sqlite_path),
                             chunk_rows=chunk_rows, progress=progress, embedding_model=None,
                             robot_metadata=_robot_metadata, source_name=source_name)


# -- analytics on the source ---------------------------------------------------------------

_STATE_DTYPES = {"owner_id": "string", "entity": "string", "stability": "float64",
                 "difficulty": "float64", "reps": "int64", "state": "int64",
                 "last_review": "datetime64[us, UTC]", "elapsed_days": "float64",
                 "retrievability": "float64"}


def ghostkg_memory_state(sqlite_path: Any, *, as_of: Any = None,
                         decay: float = FSRS_DECAY) -> pd.DataFrame:
    """Each agent's entities with their FSRS state and retrievability at ``as_of``.

    Parameters
    ----------
    sqlite_path : path or sqlite3.Connection
        The GhostKG database (opened read-only).
    as_of : datetime, optional
        When to evaluate retrievability (default now, UTC).
    decay : float
        FSRS-6 ``w_20``.

    Returns
    -------
    pandas.DataFrame
        One row per (agent, entity), weakest memory first: ``owner_id``, ``entity``
        (string), ``stability`` (float64, days), ``difficulty`` (float64), ``reps``,
        ``state`` (int64), ``last_review`` (datetime64[us, UTC]), ``elapsed_days``
        (float64: days from last review to ``as_of``) and ``retrievability`` (float64, NaN
        for new entities with stability 0 or no review).
    """
    bounds = validate_timeframe((as_of, as_of), field="as_of") if as_of is not None else None
    when = bounds[0] if bounds else pd.Timestamp.now(tz="UTC").to_pydatetime()
    decay = validate_number(decay, field="decay", minimum=0, exclusive=True)
    with sqlite_source(sqlite_path) as conn:
        raw = read_frame(conn, "ghostkg_nodes")

    def number(column: str) -> pd.Series:  # a value SQLite holds as text is no number: 0
        return pd.to_numeric(raw[column], errors="coerce").fillna(0)

    frame = pd.DataFrame({
        "owner_id": raw["owner_id"].map(_text), "entity": raw["id"].map(_text),
        "stability": number("stability").astype(float),
        "difficulty": number("difficulty").astype(float),
        "reps": number("reps").round(), "state": number("state").round(),
        "last_review": pd.to_datetime(raw["last_review"], utc=True, errors="coerce",
                                      format="ISO8601"),
    })
    elapsed = (pd.Timestamp(when) - frame["last_review"]).dt.total_seconds() / 86_400.0
    frame["elapsed_days"] = elapsed
    frame["retrievability"] = fsrs_retrievability(elapsed.fillna(0.0), frame["stability"],
                                                  decay=decay)
    frame.loc[frame["last_review"].isna(), "retrievability"] = np.nan
    frame = frame.astype(_STATE_DTYPES)
    return frame.sort_values(["retrievability", "owner_id", "entity"],
                             na_position="last", kind="stable").reset_index(drop=True)


def ghostkg_retrievability_curves(sqlite_path: Any, *, days: int = 60, step: float = 1.0,
                                  owners: Any = None, entities: Any = None,
                                  decay: float = FSRS_DECAY) -> pd.DataFrame:
    """Forgetting curves: retrievability of each (agent, entity) over days since review.

    Parameters
    ----------
    sqlite_path : path or sqlite3.Connection
    days : int
        Horizon of the curves, in days after the last review.
    step : float
        Spacing of the curve points, in days (at least ``days / 10,000``: a curve has at most
        10,001 points).
    owners, entities : str or list of str, optional
        Only these agents / entities.
    decay : float
        FSRS-6 ``w_20``.

    Returns
    -------
    pandas.DataFrame
        Long format: ``owner_id``, ``entity`` (string), ``stability`` (float64), ``day``
        (float64: days since last review) and ``retrievability`` (float64). Entities with
        stability 0 (never reviewed) have no curve.
    """
    days = validate_positive_int(days, field="days", maximum=36_500)
    step = validate_number(step, field="step", minimum=days / 10_000, maximum=days)
    wanted = {column: None if value is None else validate_names(value, field=field)
              for column, field, value in (("owner_id", "owners", owners),
                                           ("entity", "entities", entities))}
    state = ghostkg_memory_state(sqlite_path, decay=decay)
    for name, values in wanted.items():
        if values is not None:
            state = state[state[name].isin(values)]
    state = state[state["stability"] > 0]
    grid = np.arange(0.0, days + step / 2, step)
    frame = pd.DataFrame({
        "owner_id": np.repeat(state["owner_id"].to_numpy(), len(grid)),
        "entity": np.repeat(state["entity"].to_numpy(), len(grid)),
        "stability": np.repeat(state["stability"].to_numpy(), len(grid)),
        "day": np.tile(grid, len(state)),
    })
    frame["retrievability"] = fsrs_retrievability(frame["day"], frame["stability"], decay=decay)
    return frame.astype({"owner_id": "string", "entity": "string", "stability": "float64",
                         "day": "float64", "retrievability": "float64"})


@checked_plot
def plot_retrievability_curves(df: pd.DataFrame, *, ax: Any = None, limit: int = 12,
                               **kwargs: Any) -> Any:
    """Plot :func:`ghostkg_retrievability_curves`: one line per (agent, entity), the
    ``limit`` least stable first, with the 0.9 line where ``day`` equals stability."""
    ax = axes_or_new(ax, (8, 4.5))
    pairs = (df.groupby(["owner_id", "entity"], sort=False)["stability"].first()
             .sort_values(kind="stable").head(limit))
    for owner, entity in pairs.index:
        curve = df[(df["owner_id"] == owner) & (df["entity"] == entity)]
        ax.plot(curve["day"], curve["retrievability"], label=f"{owner}: {entity}", **kwargs)
    ax.axhline(0.9, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("days since last review")
    ax.set_ylabel("retrievability (FSRS-6)")
    ax.set_ylim(0, 1.02)
    if len(pairs):
        ax.legend(fontsize="small", loc="lower left")
    return ax
