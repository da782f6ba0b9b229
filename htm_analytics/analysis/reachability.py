"""Memories vector search cannot find: those the HNSW index does not return for their own
stored vector.

An HNSW graph can leave nodes that no search reaches (after deletes and updates, or when the
graph was built with a small ``ef_construction``); pgvector has no way to show them. Each
memory's own vector is searched through the index (one LATERAL statement per batch of
memories, on the live index, as recall searches do); a memory missing from its own top
``k`` is unreachable at that ``ef_search``. Those are searched again at larger ``ef_search``
values to find the one that brings them back; what none brings back needs the index
rebuilt. With ``verify_reindex=True`` the rebuild is measured: the index is built anew from
its own definition on a scratch copy of the vectors (a scratch database on the same server;
the user's database is only read) and the unreachable memories searched again there.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._progress import Progress, progress_bar, validate_progress
from ..errors import HTMError, ValidationError
from ..frames import scope_params
from ..store import DEFAULT_EF_SEARCH, PADDED_INDEX, LongTermMemory, vector_index_name
from ..store.hygiene import searches_per_statement
from ._common import live_store, validate_sample, wilson_interval

__all__ = ["UNREACHABLE_COLUMNS", "REACHABILITY_COLUMNS", "unreachable_memories"]

UNREACHABLE_COLUMNS = {"index": "string", "node_id": "int64", "dimension": "int64",
                       "found_at_ef_search": "Int64", "content": "string", "robots": "string"}
REACHABILITY_COLUMNS = {
    "index": "string", "dimension": "int64", "memories": "int64", "checked": "int64",
    "unreachable": "int64", "share": "float64", "share_low": "float64",
    "share_high": "float64", "ef_search": "int64", "ef_search_finding_all": "Int64",
    "still_unreachable": "int64", "tied": "int64", "after_reindex": "Int64",
    "what_to_do": "string"}
_ESCALATION = (2, 4, 8, 16, 25)  # multiples of ef_search tried, up to pgvector's 1000


def unreachable_memories(store: LongTermMemory, *, k: int = 10, ef_search: int | None = None,
                         sample: int | None = None, seed: int = 0,
                         verify_reindex: bool = False,
                         robots: str | list[str] | None = None,
                         timeframe: Any = None, progress: bool = False) -> pd.DataFrame:
    """Memories the vector index does not return in the top ``k`` for their own vector.

    Parameters
    ----------
    store : LongTermMemory
        The live store; only read.
    k : int
        Results per search (recall's usual limit).
    ef_search : int, optional
        The ``hnsw.ef_search`` searched with (default: the store's, 40).
    sample : int, optional
        Check this many memories per index, chosen in the database by a hash of their id and
        ``seed`` as the other checks' samples are, and give the share with a 95% Wilson
        interval; every memory by default.
    seed : int
        Chooses the sample; the same seed gives the same memories.
    verify_reindex : bool
        For an index with unreachable memories, build it anew on a scratch copy (a scratch
        database on the same server, dropped afterwards; needs the CREATEDB privilege) and
        search them again at ``ef_search``: ``after_reindex`` says how many stay unreachable.
        The user's database is only read.
    robots, timeframe : optional
        Only memories in this scope are checked (the search itself ranks every memory).
    progress : bool
        Show a progress bar over the memories searched (every memory of a million, through
        a padded index, takes hours: ``sample=`` takes minutes).

    Returns
    -------
    pandas.DataFrame
        One row per unreachable memory and index: ``index`` (string: the HNSW index),
        ``node_id``, ``dimension`` (int64), ``found_at_ef_search`` (Int64: the smallest
        ``ef_search`` tried that returns it, NA when none up to 1000 does), ``content``
        (string, shortened) and ``robots`` (string). ``attrs["summary"]`` has one row per
        index: ``memories`` and ``checked`` (int64), ``unreachable``, ``share`` and its 95%
        interval ``share_low``/``share_high``, ``ef_search``, ``ef_search_finding_all``
        (Int64, NA when some stay unreachable), ``still_unreachable``, ``tied`` (int64:
        memories with at least ``k`` identical vectors, which fill their results whatever the
        index does; not counted as unreachable), ``after_reindex`` (Int64: unreachable ones
        still missed by a rebuilt copy of the index; NA when not verified) and
        ``what_to_do``.
    """
    store = live_store(store)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise ValidationError(f"must be an integer from 1 to 1000, got {k!r}", field="k")
    if ef_search is None:
        ef_search = DEFAULT_EF_SEARCH
    if isinstance(ef_search, bool) or not isinstance(ef_search, int) \
            or not 1 <= ef_search <= 1000:
        raise ValidationError(f"must be an integer from 1 to 1000, got {ef_search!r}",
                              field="ef_search")
    sample = validate_sample(sample)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValidationError(f"must be a non-negative integer, got {seed!r}", field="seed")
    if not isinstance(verify_reindex, bool):
        raise ValidationError(f"must be True or False, got {verify_reindex!r}",
                              field="verify_reindex")
    progress = validate_progress(progress)
    scope = scope_params(timeframe=timeframe, robots=robots)
    summaries: list[dict[str, Any]] = []
    missing_rows: list[dict[str, Any]] = []
    groups = store.vector_groups(scope)  # one row per model and dimension
    plan = []  # (dimension, memories, checked ids, indexes)
    for dimension in sorted({int(d) for d in groups["dimension"]}):
        memories = int(groups.loc[groups["dimension"] == dimension, "nodes"].sum())
        checked = (store.vector_ids(dimension, scope=scope)
                   if sample is None or sample >= memories else
                   store.sample_ids(sample, seed=seed, scope=scope, dimension=dimension))
        plan.append((dimension, memories, checked, _indexes(store, dimension)))
    searches = sum(len(checked) * len(indexes) for _, _, checked, indexes in plan)
    with progress_bar(progress, searches, "own-vector searches", "memory") as bar:
        for dimension, memories, checked, indexes in plan:
            for index, padded in indexes:
                bar.note(index)
                summary, lost_rows = _check_index(store, index, padded, checked, dimension,
                                                  memories, k, ef_search, verify_reindex,
                                                  bar)
                summaries.append(summary)
                missing_rows += lost_rows
    frame = pd.DataFrame(missing_rows, columns=["index", "node_id", "dimension",
                                                "found_at_ef_search"])
    described = store.describe_nodes(sorted(set(frame["node_id"].tolist())),
                                     width=120).set_index("id")
    frame["content"] = frame["node_id"].map(described["content"])
    frame["robots"] = frame["node_id"].map(described["robots"])
    frame = frame.astype(UNREACHABLE_COLUMNS).reset_index(drop=True)
    frame.attrs["summary"] = pd.DataFrame(summaries, columns=list(REACHABILITY_COLUMNS)) \
        .astype(REACHABILITY_COLUMNS)
    frame.attrs["k"] = k
    return frame


def _indexes(store: LongTermMemory, dimension: int) -> list[tuple[str, bool]]:
    """The HNSW indexes that serve vectors of ``dimension``: the native one, the padded."""
    names = set(store.index_list()["index"].tolist())
    found = []
    if dimension in store.native_dimensions:
        found.append((vector_index_name(dimension), False))
    if PADDED_INDEX in names:
        found.append((PADDED_INDEX, True))
    return found


def _check_index(store: LongTermMemory, index: str, padded: bool, checked: Any,
                 dimension: int, memories: int, k: int, ef_search: int, verify_reindex: bool,
                 bar: Progress) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One index's summary row and its unreachable memories' rows: ``checked`` searched at
    ``ef_search``, the lost ones again at wider settings (and on a rebuilt copy on request)."""
    tied: set[int] = set()
    lost = _search_own(store, checked, dimension, k, ef_search, padded, tied, bar=bar)
    found_at: dict[int, int] = {}
    remaining, tried = lost, ef_search
    for factor in _ESCALATION:
        wider = min(ef_search * factor, 1000)
        if not remaining or wider <= tried:
            continue
        tried = wider
        still = _search_own(store, remaining, dimension, k, wider, padded)
        found_at.update({node: wider for node in remaining if node not in still})
        remaining = still
    low, high = wilson_interval(len(lost), len(checked))
    finding_all = max(found_at.values(), default=ef_search) if not remaining else None
    after, failure = None, None
    if verify_reindex and lost:
        try:
            after = len(_search_own(store, lost, dimension, k, ef_search, padded,
                                    rebuilt=index))
        except HTMError as exc:  # e.g. a read-only role may not create a database
            failure = str(exc)
    summary = {
        "index": index, "dimension": dimension, "memories": memories,
        "checked": len(checked), "unreachable": len(lost),
        "share": len(lost) / max(len(checked), 1), "share_low": low,
        "share_high": high, "ef_search": ef_search,
        "ef_search_finding_all": finding_all, "still_unreachable": len(remaining),
        "tied": len(tied), "after_reindex": after,
        "what_to_do": _advice(index, len(lost), finding_all, len(remaining), after, failure)}
    return summary, [{"index": index, "node_id": node, "dimension": dimension,
                      "found_at_ef_search": found_at.get(node)} for node in lost]


def _search_own(store: LongTermMemory, ids: Any, dimension: int, k: int, ef_search: int,
                padded: bool, tied: set[int] | None = None,
                rebuilt: str | None = None, bar: Progress | None = None) -> list[int]:
    """The memories of ``ids`` not in their own top ``k``; those crowded out by ``k``
    identical vectors (a tie, which no setting changes) go to ``tied`` instead. ``rebuilt``
    names an index to search through a freshly built copy of instead (one scratch copy
    for all of ``ids``)."""
    lost: list[int] = []
    ids = [int(i) for i in ids]
    if rebuilt is not None:
        batches = [store.reindexed_self_search(rebuilt, ids, dimension=dimension, k=k,
                                               ef_search=ef_search, padded=padded)]
    else:
        batches = []
        step = searches_per_statement(ef_search)
        for start in range(0, len(ids), step):
            batch = ids[start:start + step]
            batches.append(store.self_search(batch, dimension=dimension, k=k,
                                             ef_search=ef_search, padded=padded))
            if bar is not None:
                bar.update(len(batch))
    for ranks in batches:
        for node, (rank, crowded) in ranks.items():
            if rank is None and crowded and tied is not None:
                tied.add(node)
            elif rank is None:
                lost.append(node)
    return lost


def _advice(index: str, lost: int, finding_all: int | None, remaining: int,
            after: int | None, failure: str | None) -> str:
    if not lost:
        return "Nothing to do: every memory checked is found by its own vector."
    reindex = f"REINDEX INDEX CONCURRENTLY {index}"
    if after is not None:
        verdict = (f"{reindex} (verified on a scratch copy: the rebuilt index returns "
                   + ("every one of them" if after == 0 else f"all but {after} of the {lost}")
                   + " at the current setting)")
    elif failure is not None:
        verdict = f"{reindex} (not verified: the scratch copy failed: {failure})"
    else:
        verdict = (f"{reindex} (not verified: verify_reindex=True, or --verify-reindex, "
                   "measures it on a scratch copy; VACUUM nodes first if rows were deleted)")
    if finding_all is not None:
        return (f"SET hnsw.ef_search = {finding_all} (verified: every one of them is returned "
                f"at that setting), or {verdict} if searches must stay at the current "
                "setting.")
    return f"{remaining} stay unreachable even at ef_search 1000: {verdict}."
