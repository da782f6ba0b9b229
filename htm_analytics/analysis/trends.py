"""Remembering over time: trends per period, reinforcement, the most reinforced memories."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from .._docs import share_docs
from .._plotting import axes_or_new, checked_plot, column_option, legend_if_labelled
from ..errors import ValidationError
from ..frames import MemorySource, memory_source, period_unit, scope_params, split_at_infinity
from ..validation import validate_flag, validate_positive_int

__all__ = [
    "remember_trends", "remember_count_distribution", "most_reinforced",
    "plot_remember_trends", "plot_remember_count_distribution",
]

_COUNTS = ["remembers", "new_memories", "shared_remembers", "repeated_remembers",
           "active_robots"]
# The columns plot_remember_trends can draw as y.
_PLOTTED = (*_COUNTS, "cumulative_memories", "cumulative_remembers")


def _group_option(by: Any, allowed: tuple[str, ...]) -> None:
    if by is not None and by not in allowed:
        raise ValidationError(f"must be None or one of {', '.join(map(repr, allowed))}, "
                              f"got {by!r}", field="by")


@share_docs
def remember_trends(source: MemorySource, *, freq: str = "D", by: str | None = None,
                    timeframe: Any = None, robots: str | list[str] | None = None,
                    prefix: str | None = None, level: int | None = None,
                    fill_gaps: bool = True) -> pd.DataFrame:
    """Remembers per period: new content, content shared from another robot, reinforcement.

    Exact when the event log (``memory_events``) holds, for every robot and node, as many
    remembers as ``robot_nodes.remember_count``. Where it does not (no log, remembers written
    before it existed or by a writer it did not see), that pair's first remember is placed at
    ``first_remembered_at`` and its other ``remember_count - 1`` at ``last_remembered_at``;
    then ``result.attrs["exact"]`` is False, ``attrs["missing_remembers"]`` says by how many
    remembers the log differs and ``attrs["reason"]`` says why. Remembers at ``infinity`` or
    ``-infinity`` (a writer's "never") fall in no period: ``attrs["untimed_remembers"]``
    counts them.

    Parameters
    ----------
    %(source)s
    %(freq)s
    by : {None, 'robot', 'tag'}
        Also split by robot, or by the node's current tags (each remember counts once for each
        tag of its node; ``prefix`` and ``level`` choose the tags, and are refused without
        ``by="tag"``).
    timeframe : (datetime, datetime), optional
        Only remembers that happened in this range (whether a memory is new is still decided
        over its whole history).
    robots : str or list of str, optional
        Only remembers by these robots.
    fill_gaps : bool
        Include periods without any remember (zero counts) between the first and last period;
        refused (``ValidationError`` naming ``fill_gaps``) where that would pass
        ``MAX_FILLED_ROWS`` rows, 20 million (a date centuries away from the others).

    Returns
    -------
    pandas.DataFrame
        One row per period (and robot or tag), in time order:

        - ``period`` (datetime64[us, UTC]): start of the period;
        - ``robot`` or ``tag`` (string): only with ``by``;
        - ``remembers`` (int64): every remember;
        - ``new_memories`` (int64): content remembered for the first time by any robot;
        - ``shared_remembers`` (int64): a robot's first remember of content another robot
          already had (the hive mind at work);
        - ``repeated_remembers`` (int64): a robot remembering content it already had;
        - ``active_robots`` (int64): robots that remembered anything;
        - ``cumulative_memories``, ``cumulative_remembers`` (int64): running totals (per group);
        - ``partial`` (bool): the period had not ended when the trends were read (a snapshot:
          when it was exported) or ends after ``timeframe``, so its counts are not
          comparable with full periods.

        ``remembers == new_memories + shared_remembers + repeated_remembers``.
    """
    source = memory_source(source)
    unit, pandas_freq = period_unit(freq)
    _group_option(by, ("robot", "tag"))
    fill_gaps = validate_flag(fill_gaps, field="fill_gaps")
    for field, value in (("prefix", prefix), ("level", level)):
        if value is not None and by != "tag":  # it would be ignored: say so
            raise ValidationError("applies only with by='tag' (tags are grouped under it), "
                                  f"got by={by!r}", field=field)
    params = scope_params(timeframe=timeframe, robots=robots, prefix=prefix, level=level)
    params.update(unit=unit, by=by)
    frame = source.analytics_frame(
        "remember_trends", params,
        {"period": "datetime64[us, UTC]", "group": "string", **dict.fromkeys(_COUNTS, "int64"),
         "exact": "boolean", "missing_remembers": "int64"})
    exact = bool(frame["exact"].all())
    missing = int(frame["missing_remembers"].max()) if len(frame) else 0
    frame, untimed = split_at_infinity(frame)
    keys = ["period"] if by is None else ["period", by]
    frame = frame.rename(columns={"group": by} if by else {}).drop(
        columns=["exact", "missing_remembers"] + ([] if by else ["group"]))
    gridded = fill_gaps and by is not None and len(frame) > 0
    if fill_gaps and len(frame):
        _check_grid(frame, by, unit)
        periods = pd.date_range(frame["period"].min(), frame["period"].max(), freq=pandas_freq,
                                unit="us", name="period")
        if by is None:
            frame = frame.set_index("period").reindex(periods, fill_value=0).reset_index()
        else:
            frame = _every_period_and_group(frame, by, periods)
    if not gridded:  # the grid has its running totals already
        frame = frame.sort_values(keys if by is None else [by, "period"])
        grouped = frame.groupby(by) if by else frame
        frame["cumulative_memories"] = grouped["new_memories"].cumsum()
        frame["cumulative_remembers"] = grouped["remembers"].cumsum()
        frame = frame.sort_values(keys).reset_index(drop=True)
    frame = frame.astype({**dict.fromkeys(_COUNTS, "int64"),
                          "cumulative_memories": "int64", "cumulative_remembers": "int64",
                          **({by: "string"} if by else {})})
    # Whether each period had ended, decided once per period (rows may run to millions).
    periods = pd.DatetimeIndex(frame["period"].unique())
    as_of = _as_of(source, params.get("end"))
    frame["partial"] = frame["period"].isin(periods[periods + to_offset(pandas_freq) > as_of])
    frame.attrs["exact"] = exact
    frame.attrs["missing_remembers"] = missing
    frame.attrs["untimed_remembers"] = int(untimed["remembers"].sum())
    if not exact:
        frame.attrs["reason"] = _inexact_reason(missing)
    return frame


# Rows a filled grid may have: 20 million rows of counts take about 4 GB (measured: 7.3
# million, every day of 20,000 robots, peaked at +1.4 GB). Past it a memory whose dates
# stretch over centuries (a year-1 date from some writer) would fill memory, not a frame.
MAX_FILLED_ROWS = 20_000_000
_NOMINAL = {"hour": pd.Timedelta(hours=1), "day": pd.Timedelta(days=1),
            "week": pd.Timedelta(weeks=1), "month": pd.Timedelta(days=28),
            "quarter": pd.Timedelta(days=89), "year": pd.Timedelta(days=365)}


def _check_grid(frame: pd.DataFrame, by: str | None, unit: str) -> None:
    """Refuse a fill of every period (and group) that would pass :data:`MAX_FILLED_ROWS`,
    counted before anything is built (periods at their shortest length: an upper bound)."""
    span = frame["period"].max() - frame["period"].min()
    periods = int(span / _NOMINAL[unit]) + 1
    groups = frame[by].nunique() if by else 1
    if periods * groups > MAX_FILLED_ROWS:
        raise ValidationError(
            f"filling every {unit} from {frame['period'].min():%Y-%m-%d} to "
            f"{frame['period'].max():%Y-%m-%d}{f' for {groups:,} {by}s' if by else ''} would "
            f"make about {periods * groups:,} rows (at most {MAX_FILLED_ROWS:,}): choose a "
            "longer period, a timeframe, fewer robots, or fill_gaps=False", field="fill_gaps")


def _every_period_and_group(frame: pd.DataFrame, by: str,
                            periods: pd.DatetimeIndex) -> pd.DataFrame:
    """One row per period and group, zeros where nothing was remembered, with each group's
    running totals, in period then group order. Built as a periods x groups array: with
    thousands of robots the rows run to millions, where a MultiIndex reindex and two sorts
    took seconds."""
    groups = pd.Index(sorted(frame[by].unique()))
    cell = (periods.get_indexer(pd.DatetimeIndex(frame["period"])),
            groups.get_indexer(pd.Index(frame[by])))
    columns: dict[str, Any] = {
        "period": periods.repeat(len(groups)),
        # the few names as strings once, then repeated by position
        by: pd.array(groups.to_numpy(), dtype="string").take(
            np.tile(np.arange(len(groups)), len(periods)))}
    running = {"new_memories": "cumulative_memories", "remembers": "cumulative_remembers"}
    for name in _COUNTS:
        counts = np.zeros((len(periods), len(groups)), dtype=np.int64)
        counts[cell] = frame[name].to_numpy(dtype=np.int64)
        columns[name] = counts.ravel()
        if name in running:
            columns[running[name]] = counts.cumsum(axis=0).ravel()
    order = ["period", by, *_COUNTS, "cumulative_memories", "cumulative_remembers"]
    return pd.DataFrame({name: columns[name] for name in order})


def _as_of(source: MemorySource, end: Any) -> pd.Timestamp:
    """When the data was read: now for a live store, the export time of a snapshot; earlier
    if the timeframe ends before."""
    info = getattr(source, "info", None)
    exported = info.get("exported_at") if isinstance(info, dict) else None
    as_of = pd.Timestamp(exported) if exported is not None and not pd.isna(exported) \
        else pd.Timestamp.now(tz="UTC")
    if as_of.tzinfo is None:
        as_of = as_of.tz_localize("UTC")
    if end is not None:
        as_of = min(as_of, pd.Timestamp(end))
    return as_of


def _inexact_reason(missing: int) -> str:
    if missing == 0:
        return ("the event log disagrees with robot_nodes on some memories; their history is "
                "approximated from first/last remember times")
    return (f"the event log {'lacks' if missing > 0 else 'has'} {abs(missing):,} remembers "
            f"{'counted in' if missing > 0 else 'more than'} robot_nodes (written before the "
            "log existed or by a writer it did not see); their history is approximated from "
            "first/last remember times")


@share_docs
def remember_count_distribution(source: MemorySource, *, by: str | None = None,
                                timeframe: Any = None,
                                robots: str | list[str] | None = None) -> pd.DataFrame:
    """How often content is reinforced: memories per remember count.

    Parameters
    ----------
    %(source)s
    by : {None, 'robot'}
        None: per node, its remembers summed over robots. 'robot': per robot and node.
    %(timeframe)s
    %(robots)s

    Returns
    -------
    pandas.DataFrame
        ``robot`` (string, only with ``by='robot'``), ``remember_count`` (int64), ``memories``
        (int64: nodes, or robot-node pairs, remembered that many times), ``share`` (float64,
        of the group's memories) and ``cumulative_share`` (float64), by count ascending.
    """
    source = memory_source(source)
    _group_option(by, ("robot",))
    params = scope_params(timeframe=timeframe, robots=robots)
    params["by"] = by
    frame = source.analytics_frame(
        "remember_count_distribution", params,
        {"group": "string", "remember_count": "int64", "memories": "int64"})
    if by is None:
        frame = frame.drop(columns=["group"])
        frame = frame.sort_values("remember_count").reset_index(drop=True)
        frame["share"] = frame["memories"] / frame["memories"].sum()
        frame["cumulative_share"] = frame["share"].cumsum()
    else:
        frame = frame.rename(columns={"group": "robot"})
        frame = frame.sort_values(["robot", "remember_count"]).reset_index(drop=True)
        frame["share"] = frame["memories"] / frame.groupby("robot")["memories"].transform("sum")
        frame["cumulative_share"] = frame.groupby("robot")["share"].cumsum()
    return frame.astype({"share": "float64", "cumulative_share": "float64"})


@share_docs
def most_reinforced(source: MemorySource, *, limit: int = 20, timeframe: Any = None,
                    robots: str | list[str] | None = None) -> pd.DataFrame:
    """The memories remembered most often, over all robots (or the given ones).

    Parameters
    ----------
    %(source)s
    limit : int
        How many memories.
    %(timeframe)s
    %(robots)s

    Returns
    -------
    pandas.DataFrame
        ``node_id`` (int64), ``content`` (string), ``remembers`` (int64: summed remember
        counts), ``robots`` (int64: robots that remember it), ``first_remembered_at``,
        ``last_remembered_at`` (datetime64[us, UTC]); most remembered first, then by id.
    """
    source = memory_source(source)
    params = scope_params(timeframe=timeframe, robots=robots)
    params["limit"] = validate_positive_int(limit, field="limit")
    return source.analytics_frame(
        "most_reinforced", params,
        {"node_id": "int64", "content": "string", "remembers": "int64", "robots": "int64",
         "first_remembered_at": "datetime64[us, UTC]",
         "last_remembered_at": "datetime64[us, UTC]"})


@checked_plot
def plot_remember_trends(df: pd.DataFrame, *, ax: Any = None, y: str | None = None,
                         **kwargs: Any) -> Any:
    """Plot a :func:`remember_trends` result.

    Without groups: stacked bars of new, shared and repeated remembers per period (``y=None``;
    a period still in progress, ``partial``, is hatched) or a line of the column ``y``. With a
    ``robot`` or ``tag`` column: one line per group of ``y`` (default
    ``cumulative_memories``). ``**kwargs`` go to the matplotlib call. Returns the Axes.
    """
    import matplotlib.patches

    group = next((c for c in ("robot", "tag") if c in df), None)
    if group is not None:
        y = y or "cumulative_memories"
    if y is not None:
        y = column_option(y, _PLOTTED, field="y")
    ax = axes_or_new(ax, (9, 4))
    if group is not None and y is not None:
        for name, rows in df.groupby(group, sort=True):
            ax.plot(rows["period"], rows[y], label=name, **kwargs)
        legend_if_labelled(ax, fontsize=7, ncols=2)
        ax.set_ylabel(y.replace("_", " "))
        title = f"{y.replace('_', ' ').capitalize()} per {group}"
    elif y is None:
        width = _bar_width(df["period"])
        bottom = pd.Series(0, index=df.index)
        partial = df["partial"] if "partial" in df else pd.Series(False, index=df.index)
        for number, (column, label) in enumerate((("new_memories", "new"),
                                                  ("shared_remembers", "shared"),
                                                  ("repeated_remembers", "repeated"))):
            bars = ax.bar(df["period"], df[column], bottom=bottom, width=width, label=label,
                          align="edge", color=f"C{number}", **kwargs)
            # A period still in progress is drawn pale and hatched: fewer remembers so far,
            # not a collapse.
            for bar, in_progress in zip(bars.patches, partial):
                if in_progress:
                    bar.set_alpha(0.4)
                    bar.set_hatch("//")
            bottom = bottom + df[column]
        handles, _ = ax.get_legend_handles_labels()
        if partial.any():
            handles.append(matplotlib.patches.Patch(
                facecolor="white", hatch="//", edgecolor="0.4",
                label="period in progress (partial)"))
        ax.legend(handles=handles)
        ax.set_ylabel("remembers")
        title = "Remembers per period: new, shared, repeated"
    else:
        ax.plot(df["period"], df[y], **kwargs)
        ax.set_ylabel(y.replace("_", " "))
        title = f"{y.replace('_', ' ').capitalize()} over time"
    ax.set_title(title)
    return ax


def _bar_width(periods: pd.Series) -> Any:
    if len(periods) < 2:
        return pd.Timedelta(days=1) * 0.8
    return periods.diff().min() * 0.8


@checked_plot
def plot_remember_count_distribution(df: pd.DataFrame, *, ax: Any = None,
                                     **kwargs: Any) -> Any:
    """Memories per remember count (log scale) of a :func:`remember_count_distribution`
    result; one line per robot when it has a ``robot`` column. Returns the Axes."""
    ax = axes_or_new(ax, (7, 4))
    if "robot" in df:
        for robot, rows in df.groupby("robot", sort=True):
            ax.plot(rows["remember_count"], rows["memories"], marker="o", label=robot, **kwargs)
        legend_if_labelled(ax, fontsize=7)
    else:
        ax.bar(df["remember_count"], df["memories"], **kwargs)
    ax.set_yscale("log")
    ax.set_xlabel("times remembered")
    ax.set_ylabel("memories")
    ax.set_title("How often memories are reinforced")
    return ax
