"""Stale memories: never recalled, or not for a long time."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd

from ..errors import ValidationError
from ..frames import scope_params
from ..store import LongTermMemory
from ..validation import validate_datetime, validate_positive_int
from ._common import live_store

__all__ = ["STALE_COLUMNS", "stale_memories"]

STALE_COLUMNS = {"node_id": "int64", "created_at": "datetime64[us, UTC]",
                 "last_recalled": "datetime64[us, UTC]", "never_recalled": "bool",
                 "idle_days": "float64", "access_count": "int64", "recalls_logged": "int64",
                 "content": "string", "robots": "string"}
_WIDTH = 120  # characters of each text shown


def stale_memories(store: LongTermMemory, *, not_recalled_for: Any = dt.timedelta(days=90),
                   now: Any = None, robots: str | list[str] | None = None,
                   timeframe: Any = None, limit: int | None = None) -> pd.DataFrame:
    """Memories older than ``not_recalled_for`` that were never recalled, or not since.

    Recalls are read from the access columns (``nodes.last_accessed``, which every recall
    and retrieve updates) and from the event log's ``recall`` events where the toolkit's
    additions are installed, whichever is later. One statement selects, orders, counts and
    cuts the list on the server and reads only the beginning of each listed text (see
    :meth:`~htm_analytics.LongTermMemory.stale_rows`): what is held here grows with the rows
    returned, never with the length of the texts nor with the memories ``limit`` leaves out.

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
    limit : int, optional
        Only the first ``limit`` stale memories (the least recently recalled); default all.

    Returns
    -------
    pandas.DataFrame
        One row per stale memory, least recently recalled first (then by id): ``node_id``
        (int64), ``created_at`` and ``last_recalled`` (datetime64[us, UTC]; NaT when never),
        ``never_recalled`` (bool), ``idle_days`` (float64: since the last recall, or since
        creation), ``access_count`` and ``recalls_logged`` (int64), ``content`` (string,
        on one line, shortened to 120 characters) and ``robots`` (string).
        ``attrs["cutoff"]`` is the moment used; ``attrs["stale_total"]`` (int) the number of
        stale memories in scope, the rows ``limit`` left out included.

    Raises
    ------
    ValidationError
        ``limit`` not a positive integer (checked before any query), and likewise for
        ``not_recalled_for``, ``now``, ``robots`` and ``timeframe``.
    """
    store = live_store(store)
    if limit is not None:
        limit = validate_positive_int(limit, field="limit")
    if isinstance(not_recalled_for, (int, float)) and not isinstance(not_recalled_for, bool):
        if not 0 < not_recalled_for < 1_000_000:
            raise ValidationError(f"must be a number of days above 0 and below 1,000,000, "
                                  f"got {not_recalled_for!r}", field="not_recalled_for")
        not_recalled_for = dt.timedelta(days=not_recalled_for)
    if not isinstance(not_recalled_for, dt.timedelta) or not_recalled_for <= dt.timedelta(0):
        raise ValidationError("must be a positive timedelta or number of days",
                              field="not_recalled_for")
    moment = None if now is None else validate_datetime(now, field="now")
    scope = scope_params(timeframe=timeframe, robots=robots)
    if moment is None:
        moment = store.server_now()
    try:
        cutoff = moment - not_recalled_for
    except OverflowError:
        raise ValidationError("reaches before year 1", field="not_recalled_for") from None
    rows, total = store.stale_rows(cutoff, scope=scope, limit=limit, width=_WIDTH)
    last = rows["last_recalled"]
    since = last.where(last.notna(), rows["created_at"])
    frame = pd.DataFrame({
        "node_id": rows["node_id"], "created_at": rows["created_at"], "last_recalled": last,
        "never_recalled": last.isna(),
        "idle_days": (pd.Timestamp(moment) - since).dt.total_seconds() / 86400,
        "access_count": rows["access_count"], "recalls_logged": rows["recalls_logged"],
        "content": rows["content"], "robots": rows["robots"]})
    frame = frame.astype(STALE_COLUMNS).reset_index(drop=True)
    frame.attrs["cutoff"] = cutoff
    frame.attrs["stale_total"] = total
    return frame
