"""Stale memories: never recalled, or not for a long time."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd

from ..errors import ValidationError
from ..frames import scope_params
from ..store import LongTermMemory
from ..validation import validate_datetime
from ._common import live_store, shorten_text

__all__ = ["STALE_COLUMNS", "stale_memories"]

STALE_COLUMNS = {"node_id": "int64", "created_at": "datetime64[us, UTC]",
                 "last_recalled": "datetime64[us, UTC]", "never_recalled": "bool",
                 "idle_days": "float64", "access_count": "int64", "recalls_logged": "int64",
                 "content": "string", "robots": "string"}


def stale_memories(store: LongTermMemory, *, not_recalled_for: Any = dt.timedelta(days=90),
                   now: Any = None, robots: str | list[str] | None = None,
                   timeframe: Any = None) -> pd.DataFrame:
    """Memories older than ``not_recalled_for`` that were never recalled, or not since.

    Recalls are read from the access columns (``nodes.last_accessed``, which every recall
    and retrieve updates) and from the event log's ``recall`` events where the toolkit's
    additions are installed, whichever is later.

    Parameters
    ----------
    store : LongTermMemory
        The live store; only read.
    not_recalled_for : datetime.timedelta or number of days
        How long without a recall makes a memory stale (default 90 days).
    now : datetime, optional
        The moment to measure from (default: the server's clock).
    robots, timeframe : optional
        Only memories in this scope (``timeframe`` on ``created_at``).

    Returns
    -------
    pandas.DataFrame
        One row per stale memory, least recently recalled first: ``node_id`` (int64),
        ``created_at`` and ``last_recalled`` (datetime64[us, UTC]; NaT when never),
        ``never_recalled`` (bool), ``idle_days`` (float64: since the last recall, or since
        creation), ``access_count`` and ``recalls_logged`` (int64), ``content`` (string,
        shortened) and ``robots`` (string). ``attrs["cutoff"]`` is the moment used.
    """
    store = live_store(store)
    if isinstance(not_recalled_for, (int, float)) and not isinstance(not_recalled_for, bool):
        if not 0 < not_recalled_for < 1_000_000:
            raise ValidationError(f"must be a positive number of days, got "
                                  f"{not_recalled_for!r}", field="not_recalled_for")
        not_recalled_for = dt.timedelta(days=not_recalled_for)
    if not isinstance(not_recalled_for, dt.timedelta) or not_recalled_for <= dt.timedelta(0):
        raise ValidationError("must be a positive timedelta or number of days",
                              field="not_recalled_for")
    moment = store.server_now() if now is None else validate_datetime(now, field="now")
    try:
        cutoff = moment - not_recalled_for
    except OverflowError:
        raise ValidationError("reaches before year 1", field="not_recalled_for") from None
    scope = scope_params(timeframe=timeframe, robots=robots)
    rows = store.not_recalled_since(cutoff, scope=scope)
    last = pd.concat([pd.to_datetime(rows["last_accessed"], utc=True),
                      pd.to_datetime(rows["last_recall_event"], utc=True)], axis=1).max(axis=1)
    created = pd.to_datetime(rows["created_at"], utc=True)
    reference = last.where(last.notna(), created)
    described = store.describe_nodes(rows["node_id"].tolist()).set_index("id")
    frame = pd.DataFrame({
        "node_id": rows["node_id"], "created_at": created,
        "last_recalled": pd.to_datetime(last, utc=True), "never_recalled": last.isna(),
        "idle_days": (pd.Timestamp(moment) - pd.to_datetime(reference, utc=True))
        .dt.total_seconds() / 86400,
        "access_count": rows["access_count"], "recalls_logged": rows["recalls_logged"],
        "content": rows["node_id"].map(described["content"]).map(
            lambda t: shorten_text(t, 120)),
        "robots": rows["node_id"].map(described["robots"])})
    frame = frame.astype(STALE_COLUMNS).reset_index(drop=True)
    frame.attrs["cutoff"] = cutoff
    return frame
