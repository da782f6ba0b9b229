"""What a retention policy would hide, and what it would have cost: how many past recalls
returned a memory the policy would have hidden at that moment.

HTM never forgets by design; these are what-ifs for people weighing an expiry or a decay,
computed from the access columns and the event log's ``recall`` events. Nothing is hidden.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..frames import scope_params
from ..store import LongTermMemory
from ..validation import validate_datetime
from ._common import live_store

__all__ = ["ExpiryPolicy", "DecayPolicy", "RetentionPolicy", "RETENTION_COLUMNS",
           "RETENTION_SUMMARY_COLUMNS", "retention_what_if"]

_MAX_DAYS = 1_000_000.0


def _positive_days(value: Any, field: str) -> float:
    if isinstance(value, dt.timedelta):
        value = value.total_seconds() / 86400
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or not 0 < float(value) <= _MAX_DAYS:
        raise ValidationError(f"must be a positive number of days (at most 1000000) or a "
                              f"timedelta, got {value!r}", field=field)
    return float(value)


@dataclass(frozen=True)
class ExpiryPolicy:
    """Hide a memory older than ``older_than_days`` that was never recalled (by that moment).

    ``older_than_days`` is a positive number of days or a :class:`datetime.timedelta`.
    """

    older_than_days: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "older_than_days",
                           _positive_days(self.older_than_days, "older_than_days"))

    def describe(self) -> str:
        return f"expire after {self.older_than_days:g} days unless recalled"


@dataclass(frozen=True)
class DecayPolicy:
    """Hide a memory whose weight has decayed below ``min_weight``.

    The weight at a moment is ``(1 + recalls) * 0.5 ** (days since the last recall, or since
    creation, / half_life_days)``: each recall adds one and restarts the clock, so a memory
    never recalled is hidden after ``log2(1 / min_weight)`` half-lives.
    """

    half_life_days: float
    min_weight: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "half_life_days",
                           _positive_days(self.half_life_days, "half_life_days"))
        weight = self.min_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.integer,
                                                               np.floating)) \
                or not math.isfinite(float(weight)) or not 0 < float(weight) <= 1000:
            raise ValidationError(f"must be a number in (0, 1000], got {weight!r}",
                                  field="min_weight")
        object.__setattr__(self, "min_weight", float(weight))

    def describe(self) -> str:
        return (f"decay with a half-life of {self.half_life_days:g} days, hidden below "
                f"weight {self.min_weight:g}")


RetentionPolicy = ExpiryPolicy | DecayPolicy

RETENTION_COLUMNS = {"node_id": "int64", "created_at": "datetime64[us, UTC]",
                     "last_recalled": "datetime64[us, UTC]", "recalls": "int64",
                     "weight": "float64", "content": "string", "robots": "string"}
RETENTION_SUMMARY_COLUMNS = {
    "policy": "string", "memories": "int64", "hidden": "int64", "hidden_share": "float64",
    "recalls_logged": "int64", "recalls_of_hidden": "int64", "recalls_of_hidden_share":
    "float64", "memories_recalled_while_hidden": "int64"}


def _weight(policy: RetentionPolicy, age_days: Any, idle_days: Any, recalls: Any) -> Any:
    """The policy's weight (decay) or, for expiry, 1 while kept and 0 once hidden."""
    if isinstance(policy, DecayPolicy):
        # A memory touched after the moment (a clock ahead, a last access at infinity) is
        # not idle, not idle for a negative time.
        return (1 + recalls) * np.power(0.5, np.maximum(idle_days, 0) / policy.half_life_days)
    return np.where((recalls == 0) & (age_days > policy.older_than_days), 0.0, 1.0)


def _hidden(policy: RetentionPolicy, weight: Any) -> Any:
    return weight < (policy.min_weight if isinstance(policy, DecayPolicy) else 0.5)


def retention_what_if(store: LongTermMemory, policy: RetentionPolicy, *, now: Any = None,
                      robots: str | list[str] | None = None,
                      timeframe: Any = None) -> pd.DataFrame:
    """The memories ``policy`` would hide now, and the past recalls it would have broken.

    Now: a memory's recalls are the larger of ``nodes.access_count`` and its logged
    ``recall`` events, its last recall the later of ``nodes.last_accessed`` (when
    ``access_count > 0``) and its last event. The past: each ``recall`` event in the log is
    replayed with the policy applied at that moment from the events before it (the access
    columns hold no history); a recall that returned a memory the policy would have hidden
    then is counted in ``recalls_of_hidden``. Without the event log (the seed schema), only
    the "now" part is answered and the recall counts are 0.

    Parameters
    ----------
    store : LongTermMemory
        The live store; only read.
    policy : ExpiryPolicy or DecayPolicy
        The policy to try.
    now : datetime, optional
        The moment to judge at (default: the server's clock).
    robots, timeframe : optional
        Only memories in this scope.

    Returns
    -------
    pandas.DataFrame
        One row per memory hidden now, least weight first: ``node_id`` (int64),
        ``created_at``, ``last_recalled`` (datetime64[us, UTC], NaT when never), ``recalls``
        (int64), ``weight`` (float64: the decayed weight; 0 for an expired memory),
        ``content`` (string, shortened) and ``robots`` (string). ``attrs["summary"]`` is a
        one-row DataFrame: ``policy`` (string), ``memories``, ``hidden`` (int64),
        ``hidden_share`` (float64), ``recalls_logged``, ``recalls_of_hidden`` (int64),
        ``recalls_of_hidden_share`` (float64, NaN without logged recalls) and
        ``memories_recalled_while_hidden`` (int64).
    """
    store = live_store(store)
    if not isinstance(policy, (ExpiryPolicy, DecayPolicy)):
        raise ValidationError(f"must be an ExpiryPolicy or a DecayPolicy, got "
                              f"{type(policy).__name__}", field="policy")
    moment = pd.Timestamp(store.server_now() if now is None
                          else validate_datetime(now, field="now"))
    nodes, events = store.retention_facts(moment.to_pydatetime(),
                                          scope=scope_params(timeframe=timeframe,
                                                             robots=robots))
    # Now, from the access columns and the log together.
    logged = events.groupby("node_id")["occurred_at"].agg(["count", "max"]) \
        .reindex(nodes["node_id"])
    recalls = np.maximum(nodes["access_count"].to_numpy(),
                         logged["count"].fillna(0).to_numpy()).astype(np.int64)
    logged_last = pd.to_datetime(logged["max"], utc=True).set_axis(nodes.index)
    last = pd.to_datetime(pd.concat([nodes["last_accessed"], logged_last], axis=1)
                          .max(axis=1), utc=True)
    touched = last.where(last.notna(), nodes["created_at"])
    weight = _weight(policy, _days(moment - nodes["created_at"]), _days(moment - touched),
                     recalls)
    hidden = _hidden(policy, weight)
    # The past: each logged recall, judged from the events before it.
    created = pd.to_datetime(nodes.set_index("node_id")["created_at"]
                             .reindex(events["node_id"]), utc=True).set_axis(events.index)
    before = events.groupby("node_id").cumcount().to_numpy()
    previous = events.groupby("node_id")["occurred_at"].shift()
    then_touched = previous.where(previous.notna(), created)
    then_weight = _weight(policy, _days(events["occurred_at"] - created),
                          _days(events["occurred_at"] - then_touched), before)
    broken = _hidden(policy, then_weight)
    summary = pd.DataFrame([{
        "policy": policy.describe(), "memories": len(nodes), "hidden": int(hidden.sum()),
        "hidden_share": hidden.sum() / len(nodes) if len(nodes) else math.nan,
        "recalls_logged": len(events), "recalls_of_hidden": int(broken.sum()),
        "recalls_of_hidden_share": broken.sum() / len(events) if len(events) else math.nan,
        "memories_recalled_while_hidden": int(events.loc[broken, "node_id"].nunique())}]
    ).astype(RETENTION_SUMMARY_COLUMNS)
    chosen = nodes.assign(last_recalled=last, recalls=recalls, weight=weight)[hidden]
    described = store.describe_nodes(chosen["node_id"].tolist(), width=120).set_index("id")
    frame = chosen.assign(
        content=chosen["node_id"].map(described["content"]),
        robots=chosen["node_id"].map(described["robots"]))
    frame = frame.sort_values(["weight", "created_at", "node_id"], kind="stable")
    frame = frame[list(RETENTION_COLUMNS)].astype(RETENTION_COLUMNS).reset_index(drop=True)
    frame.attrs.update(summary=summary, now=moment, event_log=store.schema_info.has_event_log)
    return frame


def _days(delta: pd.Series) -> np.ndarray:
    return (pd.to_timedelta(delta).dt.total_seconds() / 86400).to_numpy(dtype=np.float64)
