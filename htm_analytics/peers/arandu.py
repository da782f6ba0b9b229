"""Arandu (PostgreSQL + pgvector): import its memory and analyse its fact versions in place.

Mapping (see ``docs/peers.md``): each ``agent_id`` becomes a robot; each event a memory
remembered at ``created_at`` (tagged ``arandu:event`` and ``emotion:<emotion>``); each fact a
memory remembered at ``valid_from`` tagged with its ``entity_key`` (``person:carlos``) and
``arandu:fact``; each entity relationship a memory ``"source rel_type target"`` tagged with
both entity keys. Embeddings are kept at their own dimension. Entities, aliases, clusters,
links, meta observations, attributes and intentions are kept as records, and every row of
every table is kept whole (validity intervals, supersedes chains, confidence...) in
``import_records``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._plotting import axes_or_new, checked_plot
from ..frames import TIME_INFINITY, TIME_MINUS_INFINITY, period_unit, split_at_infinity
from ..store import LongTermMemory
from ..store.sources import postgres_source, read_frame, table_query
from ..validation import validate_number, validate_timeframe
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
    "check_arandu_source",
    "arandu_entity_growth",
    "arandu_fact_versions",
    "arandu_stale_facts",
    "import_arandu",
    "plot_fact_timeline",
]

SYSTEM = "arandu"


def _entity_tags(*keys: Any) -> list[str]:
    tags = []
    for key in keys:
        if key:
            tag = slug_tag(*str(key).split(":"))
            if tag:
                tags.append(tag)
    return tags


def _record(row: dict[str, Any], *vector_columns: str) -> dict[str, Any]:
    """The row as JSON, without the vectors that the node itself keeps."""
    return jsonable({k: v for k, v in row.items() if k not in vector_columns})


def _agent_missing(row: dict[str, Any]) -> str | None:
    return "no agent_id" if row.get("agent_id") in (None, "") else None


_AGENT = {"robot": "agent_id"}
_RELATIONSHIP_TEXT = "source_entity_key rel_type target_entity_key"


def _map_event(row: dict[str, Any]) -> SourceRow:
    tags = ["arandu:event"]
    if row.get("emotion"):
        tags.extend(t for t in [slug_tag("emotion", row["emotion"])] if t)
    return SourceRow(key=str(row["id"]), record=_record(row, "embedding"),
                     content=row.get("content"), robot=row.get("agent_id"),
                     remembered_at=as_utc(row.get("created_at")), tags=tags,
                     embedding=row.get("embedding"), reject=_agent_missing(row),
                     columns=_AGENT)


def _map_fact(row: dict[str, Any]) -> SourceRow:
    return SourceRow(key=str(row["id"]), record=_record(row, "embedding"),
                     content=row.get("fact_text"), robot=row.get("agent_id"),
                     remembered_at=(as_utc(row.get("valid_from"))
                                    or as_utc(row.get("created_at"))),
                     tags=["arandu:fact", *_entity_tags(row.get("entity_key"))],
                     embedding=row.get("embedding"), reject=_agent_missing(row),
                     columns={**_AGENT, "content": "fact_text"})


def _map_relationship(row: dict[str, Any]) -> SourceRow:
    parts = [row.get("source_entity_key"), row.get("rel_type"), row.get("target_entity_key")]
    return SourceRow(key=str(row["id"]), record=_record(row),
                     content=" ".join(str(p) for p in parts if p) or None,
                     robot=row.get("agent_id"),
                     remembered_at=as_utc(row.get("valid_from")),
                     tags=["arandu:relationship",
                           *_entity_tags(row.get("source_entity_key"),
                                         row.get("target_entity_key"))],
                     reject=_agent_missing(row),
                     columns={**_AGENT, "content": _RELATIONSHIP_TEXT})


def _map_record(row: dict[str, Any]) -> SourceRow:
    return SourceRow(key=str(row["id"]), record=jsonable(row), robot=row.get("agent_id"),
                     columns=_AGENT)


# Tables in import order: events and facts first, so that later rows can point at them;
# with the columns the import reads (a table lacking one is not Arandu's).
_TABLES: list[tuple[str, Callable[[dict[str, Any]], SourceRow], bool, tuple[str, ...]]] = [
    ("memory_events", _map_event, False, ("id", "agent_id", "content", "created_at")),
    ("memory_facts", _map_fact, False,
     ("id", "agent_id", "fact_text", "entity_key", "valid_from", "created_at")),
    ("memory_entity_relationships", _map_relationship, True,
     ("id", "agent_id", "source_entity_key", "rel_type", "target_entity_key")),
    ("memory_entities", _map_record, True, ("id",)),
    ("memory_fact_entity_links", _map_record, True, ("id",)),
    ("memory_entity_aliases", _map_record, True, ("id",)),
    ("memory_clusters", _map_record, True, ("id",)),
    ("memory_meta_observations", _map_record, True, ("id",)),
    ("memory_attribute_registry", _map_record, True, ("id",)),
    ("memory_intentions", _map_record, True, ("id",)),
]


def _robot_metadata(name: str) -> dict[str, Any]:
    return {"imported_from": SYSTEM, "agent_id": name}


def _specs() -> list[TableSpec]:
    # Events are written once: a recorded id holding another event is another source's.
    return [TableSpec(table, table_query(table, "id"), mapper, optional,
                      append_only=table == "memory_events", columns=columns)
            for table, mapper, optional, columns in _TABLES]


def check_arandu_source(url: str) -> list[str]:
    """Read-only: whether :func:`import_arandu` can read ``url``, before anything is
    written. Returns the optional tables it lacks; raises
    :class:`~htm_analytics.ValidationError` (``source``) when it lacks a required one."""
    with postgres_source(url, system=SYSTEM) as conn:
        return missing_tables(conn, _specs(), system=SYSTEM)


def import_arandu(url: str, store: LongTermMemory, *, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                  embedding_model: tuple[str, str] | None = None,
                  progress: bool = False, source_name: str | None = None) -> ImportSummary:
    """Import an Arandu database into ``store``, in one read-only snapshot of the source.

    Parameters
    ----------
    url : str
        The Arandu PostgreSQL database (not the store's own: both have a ``memory_events``
        table).
    store : LongTermMemory
    chunk_rows : int
        Source rows read and written at a time.
    embedding_model : (provider, model), optional
        The model Arandu was configured with, recorded for the imported vectors (Arandu does
        not store it).
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
    """
    with postgres_source(url, system=SYSTEM) as conn:
        return import_tables(store, conn, _specs(), system=SYSTEM,
                             source=_masked(url), chunk_rows=chunk_rows, progress=progress,
                             embedding_model=embedding_model, robot_metadata=_robot_metadata,
                             source_name=source_name)


def _masked(url: Any) -> str:
    from ..store.connection import mask_url

    return mask_url(url) if isinstance(url, str) else repr(url)


# -- analytics on the source ---------------------------------------------------------------

_VERSION_DTYPES = {
    "fact_id": "string", "agent_id": "string", "entity_key": "string",
    "entity_name": "string", "attribute_key": "string", "fact_text": "string",
    "supersedes_fact_id": "string", "chain_id": "string", "version": "int64",
    "chain_length": "int64", "valid_from": "datetime64[us, UTC]",
    "valid_to": "datetime64[us, UTC]", "invalidated_at": "datetime64[us, UTC]",
    "is_stale": "bool", "is_active": "bool", "confidence": "float64",
    "times_retrieved": "int64", "last_confirmed_at": "datetime64[us, UTC]",
}


def arandu_fact_versions(source: Any) -> pd.DataFrame:
    """Every fact with its place in its supersedes chain and its validity interval.

    Parameters
    ----------
    source : str or LongTermMemory
        The Arandu database URL (read in a read-only transaction).

    Returns
    -------
    pandas.DataFrame
        One row per fact reachable from a chain root, by agent, entity, chain and version:
        ``fact_id``, ``agent_id``, ``entity_key``, ``entity_name``, ``attribute_key``,
        ``fact_text``, ``supersedes_fact_id``, ``chain_id`` (the root fact; string);
        ``version`` (int64, 1 = root), ``chain_length`` (int64); ``valid_from``, ``valid_to``,
        ``invalidated_at``, ``last_confirmed_at`` (datetime64[us, UTC]); ``is_stale``,
        ``is_active`` (bool: ``valid_to`` NULL or ``infinity``, and not invalidated);
        ``confidence`` (float64); ``times_retrieved`` (int64). ``infinity`` and
        ``-infinity`` read as ``frames.TIME_INFINITY`` and ``frames.TIME_MINUS_INFINITY``.
    """
    return read_frame(source, "arandu_fact_versions", dtypes=_VERSION_DTYPES, system=SYSTEM)


def arandu_entity_growth(source: Any, *, freq: str = "W") -> pd.DataFrame:
    """How each agent's entity graph grew: new entities and facts per period.

    Returns
    -------
    pandas.DataFrame
        One row per (agent, period with facts): ``agent_id`` (string), ``period``
        (datetime64[us, UTC]), ``new_entities``, ``facts`` (int64: first seen / facts
        starting in the period), ``entities``, ``total_facts`` (int64: running totals).
        Facts valid from ``-infinity`` or ``infinity`` fall in no period:
        ``attrs["untimed_facts"]`` counts them.
    """
    unit, _ = period_unit(freq)
    raw = read_frame(source, "arandu_entity_growth", {"unit": unit},
                     dtypes={"agent_id": "string", "entity_key": "string",
                             "period": "datetime64[us, UTC]", "facts": "int64"}, system=SYSTEM)
    raw, untimed = split_at_infinity(raw)
    first = raw.groupby(["agent_id", "entity_key"])["period"].transform("min")
    raw["is_new"] = (raw["period"] == first).astype("int64")
    frame = (raw.groupby(["agent_id", "period"], as_index=False)
             .agg(new_entities=("is_new", "sum"), facts=("facts", "sum")))
    frame["entities"] = frame.groupby("agent_id")["new_entities"].cumsum()
    frame["total_facts"] = frame.groupby("agent_id")["facts"].cumsum()
    frame = frame.astype({"agent_id": "string", "new_entities": "int64", "facts": "int64",
                          "entities": "int64", "total_facts": "int64"})
    frame.attrs["untimed_facts"] = int(untimed["facts"].sum())
    return frame


def arandu_stale_facts(source: Any, *, as_of: Any = None,
                       unconfirmed_days: float = 90.0) -> pd.DataFrame:
    """Active facts that need attention, and facts that were contradicted.

    A fact is listed with each reason that applies: ``stale`` (marked by Arandu's memify),
    ``unconfirmed`` (active, and neither confirmed nor started within ``unconfirmed_days``
    before ``as_of``), ``contradicted`` (named by an active contradiction observation),
    ``invalidated`` (explicitly invalidated), ``superseded`` (replaced by a newer version).

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`arandu_fact_versions` plus ``reason`` (string) and
        ``days_since_confirmed`` (float64, from the last confirmation or ``valid_from``),
        one row per (fact, reason), by reason then agent and entity.
    """
    unconfirmed_days = validate_number(unconfirmed_days, field="unconfirmed_days", minimum=0,
                                       exclusive=True)
    bounds = validate_timeframe((as_of, as_of), field="as_of") if as_of is not None else None
    when = pd.Timestamp(bounds[0]) if bounds else pd.Timestamp.now(tz="UTC")
    facts = arandu_fact_versions(source)
    contradicted = read_frame(source, "arandu_contradictions",
                              dtypes={"agent_id": "string", "fact_id": "string"}, system=SYSTEM)
    confirmed = facts["last_confirmed_at"].fillna(facts["valid_from"])
    facts["days_since_confirmed"] = ((when - confirmed).dt.total_seconds() / 86_400.0
                                     ).astype("float64")
    superseded_ids = set(facts["supersedes_fact_id"].dropna())
    reasons = {
        "stale": facts["is_stale"] & facts["is_active"],
        "unconfirmed": facts["is_active"] & (facts["days_since_confirmed"] > unconfirmed_days),
        "contradicted": facts["fact_id"].isin(set(contradicted["fact_id"])),
        "invalidated": facts["invalidated_at"].notna(),
        "superseded": facts["fact_id"].isin(superseded_ids),
    }
    parts = [facts[mask].assign(reason=name) for name, mask in reasons.items()]
    frame = pd.concat(parts, ignore_index=True) if parts else facts.assign(reason="")
    return frame.astype({"reason": "string"}).reset_index(drop=True)


@checked_plot
def plot_fact_timeline(df: pd.DataFrame, *, ax: Any = None, entity: str | None = None,
                       until: Any = None, limit: int = 20, **kwargs: Any) -> Any:
    """Validity intervals of fact versions (from :func:`arandu_fact_versions`), one row per
    chain, each version a bar from ``valid_from`` to ``valid_to`` (open ones to ``until``,
    default the latest time in the frame); stale facts hatched. An end at ``infinity`` is
    open too, and a start at ``-infinity`` is drawn from the earliest time in the frame."""
    ax = axes_or_new(ax, (9, 4.5))
    frame = df if entity is None else df[df["entity_key"] == entity]
    frame = frame.dropna(subset=["valid_from"])
    times = pd.concat([frame["valid_from"], frame["valid_to"].dropna()])
    times = times[(times != TIME_INFINITY) & (times != TIME_MINUS_INFINITY)]
    end = pd.Timestamp(until, tz="UTC") if until is not None else times.max()
    begin = times.min()
    chains = list(dict.fromkeys(frame["chain_id"]))[:limit]
    import matplotlib.dates as mdates

    for y, chain in enumerate(chains):
        for _, fact in frame[frame["chain_id"] == chain].iterrows():
            stop = _finite(fact["valid_to"], begin, end)
            start_num = mdates.date2num(_finite(fact["valid_from"], begin, end))
            width = max(float(mdates.date2num(stop) - start_num), 0.05)
            ax.barh(y, width, left=start_num, height=0.6,
                    hatch="//" if fact["is_stale"] else None,
                    color=f"C{(int(fact['version']) - 1) % 10}", edgecolor="black",
                    linewidth=0.5, **kwargs)
    labels = [str(frame.loc[frame["chain_id"] == c, "entity_key"].iloc[0]) for c in chains]
    ax.set_yticks(np.arange(len(chains)), labels=labels)
    ax.xaxis_date()
    ax.set_xlabel("validity (colour: version)")
    return ax


def _finite(time: Any, begin: Any, end: Any) -> Any:
    """``time``, or where a bar is drawn for an open or infinite one: ``end`` for NaT and
    ``infinity``, ``begin`` for ``-infinity``."""
    if pd.isna(time) or time == TIME_INFINITY:
        return end
    return begin if time == TIME_MINUS_INFINITY else time
