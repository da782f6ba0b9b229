"""The hive mind: which robots share memories, and what each robot does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._docs import share_docs
from .._plotting import axes_or_new, checked_plot, column_option, legend_if_labelled, short_label
from ..errors import ValidationError
from ..frames import MemorySource, memory_source, scope_params
from ..validation import validate_flag, validate_frame, validate_positive_int

__all__ = ["robot_overlap", "robot_activity", "plot_robot_overlap", "plot_robot_activity"]


@share_docs
def robot_overlap(source: MemorySource, *, timeframe: Any = None,
                  robots: str | list[str] | None = None, top: int | None = None,
                  min_shared: int | None = None) -> pd.DataFrame:
    """Robot x robot: memories both remember, and their Jaccard similarity.

    The full matrix has a row for every ordered pair of robots: with thousands of robots that
    is millions of rows (2,000 robots, 4 million). ``top`` or ``min_shared`` bound it in the
    database instead: only pairs that share memories come back, each once.

    Parameters
    ----------
    %(source)s
    %(timeframe)s
    %(robots)s
    top : int, optional
        Return only the ``top`` pairs of distinct robots sharing the most memories.
    min_shared : int, optional
        Return only the pairs of distinct robots sharing at least this many memories.

    Returns
    -------
    pandas.DataFrame
        Without ``top`` and ``min_shared``: every ordered pair of robots that remember
        something in scope, the diagonal included (a full matrix in long form:
        ``df.pivot(index="robot1", columns="robot2", values="jaccard")``), sorted by
        ``robot1``, ``robot2``. With either: each unordered pair of distinct robots at most
        once (``robot1 < robot2`` by code point), most shared first (then by names), pairs
        sharing nothing left out. A robot is its name: robots registered under one name
        are one robot here, and robots without a name are left out.
        Columns:

        - ``robot1``, ``robot2`` (string);
        - ``shared_nodes`` (int64): nodes both remember (on the diagonal: the robot's nodes);
        - ``nodes1``, ``nodes2`` (int64): nodes each remembers;
        - ``jaccard`` (float64): shared / (nodes1 + nodes2 - shared), 1 on the diagonal.
    """
    source = memory_source(source)
    params = scope_params(timeframe=timeframe, robots=robots)
    dtypes = {"robot1": "string", "robot2": "string", "shared_nodes": "int64",
              "nodes1": "int64", "nodes2": "int64", "jaccard": "float64"}
    bounded = top is not None or min_shared is not None
    params["distinct_pairs"] = bounded
    params["top"] = None if top is None else validate_positive_int(top, field="top")
    params["min_shared"] = 1 if min_shared is None else validate_positive_int(
        min_shared, field="min_shared")
    pairs = source.analytics_frame(
        "robot_overlap", params,
        {name: dtype for name, dtype in dtypes.items() if name != "jaccard"})
    if bounded:
        union = pairs["nodes1"] + pairs["nodes2"] - pairs["shared_nodes"]
        pairs["jaccard"] = pairs["shared_nodes"] / union
        return pairs.astype(dtypes)
    if pairs.empty:  # no robot in scope (an empty database): an empty frame of these types
        return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in dtypes.items()})
    diagonal = pairs.loc[pairs["robot1"] == pairs["robot2"], ["robot1", "nodes1"]]
    sizes: pd.Series = diagonal.set_index("robot1")["nodes1"]
    names = sorted(sizes.index)
    full = pd.MultiIndex.from_product([names, names], names=["robot1", "robot2"])
    frame = pairs.set_index(["robot1", "robot2"])[["shared_nodes"]].reindex(full, fill_value=0)
    frame = frame.reset_index()
    # astype: on a memory without robots, map returns an empty string column.
    frame["nodes1"] = frame["robot1"].map(sizes).astype("int64")
    frame["nodes2"] = frame["robot2"].map(sizes).astype("int64")
    union = frame["nodes1"] + frame["nodes2"] - frame["shared_nodes"]
    frame["jaccard"] = frame["shared_nodes"] / union
    return frame.astype(dtypes)


@share_docs
def robot_activity(source: MemorySource, *, timeframe: Any = None,
                   robots: str | list[str] | None = None) -> pd.DataFrame:
    """What each robot remembers, and how much of it other robots remember too.

    Parameters
    ----------
    %(source)s
    %(timeframe)s
    %(robots)s

    Returns
    -------
    pandas.DataFrame
        One row per robot, most nodes first (then by name, then by id: names may repeat):

        - ``robot_id`` (int64), ``robot`` (string);
        - ``nodes`` (int64): memories it remembers (created in ``timeframe``);
        - ``remembers`` (int64): its remember counts summed;
        - ``shared_nodes`` (int64): of its nodes, those another robot remembers too;
        - ``shared_fraction`` (float64): shared_nodes / nodes (NaN for a robot with none);
        - ``created_at``, ``last_active``, ``first_remembered_at``, ``last_remembered_at``
          (datetime64[us, UTC]).
    """
    source = memory_source(source)
    params = scope_params(timeframe=timeframe, robots=robots)
    times = ["created_at", "last_active", "first_remembered_at", "last_remembered_at"]
    frame = source.analytics_frame(
        "robot_activity", params,
        {"robot_id": "int64", "robot": "string", "nodes": "int64", "remembers": "int64",
         "shared_nodes": "int64", **dict.fromkeys(times, "datetime64[us, UTC]")})
    frame["shared_fraction"] = frame["shared_nodes"] / frame["nodes"].where(frame["nodes"] > 0)
    # The id breaks ties between robots of one name, which each engine returns in its order.
    frame = frame.sort_values(["nodes", "robot", "robot_id"], ascending=[False, True, True])
    columns = ["robot_id", "robot", "nodes", "remembers", "shared_nodes", "shared_fraction",
               *times]
    return frame[columns].reset_index(drop=True).astype({"shared_fraction": "float64"})


@checked_plot
def plot_robot_overlap(df: pd.DataFrame, *, ax: Any = None, value: str = "jaccard",
                       annotate: bool = True, **kwargs: Any) -> Any:
    """Heatmap of a :func:`robot_overlap` result (``value``: 'jaccard' or 'shared_nodes').

    The colour scale starts at 0 (nothing shared) and, for Jaccard, ends at 1 (the same
    memories), so that a colour means the same amount in every report; a scale stretched
    between the smallest and largest pair would make 0.05 and 0.07 look like none and all.
    ``**kwargs`` go to :meth:`matplotlib.axes.Axes.imshow` (``vmin``/``vmax`` override the
    scale). Returns the Axes.
    """
    import matplotlib

    value = column_option(value, ("jaccard", "shared_nodes"), field="value")
    annotate = validate_flag(annotate, field="annotate")
    validate_frame(df, ["robot1", "robot2", value], field="df")
    if df.duplicated(["robot1", "robot2"]).any():  # pivot's bare ValueError otherwise
        raise ValidationError("holds a pair of robots twice (robot1, robot2): one row per "
                              "pair, as robot_overlap gives", field="df")
    matrix = df.pivot(index="robot1", columns="robot2", values=value)
    # Room for the names too (long names would squeeze the matrix to nothing), but capped:
    # the figure of a thousand robots must not take gigabytes.
    longest = max((len(short_label(name)) for name in matrix.index), default=0)
    ax = axes_or_new(ax, (min(2.5 + 0.7 * len(matrix) + 0.08 * longest, 20.0),
                          min(1.5 + 0.6 * len(matrix) + 0.06 * longest, 20.0)))
    if matrix.empty:  # no pair in scope: an image of no cells makes matplotlib warn
        ax.set_axis_off()
        ax.set_title("Shared memories between robots (no pairs)")
        return ax
    values = matrix.to_numpy(dtype=float, copy=True)
    if list(matrix.index) == list(matrix.columns):
        # A robot's overlap with itself is trivially complete: blank it so that the colour
        # scale shows the pairs.
        np.fill_diagonal(values, np.nan)
    cmap = matplotlib.colormaps[kwargs.pop("cmap", "Blues")].with_extremes(bad="#eeeeee")
    kwargs.setdefault("vmin", 0.0)
    largest = float(np.nanmax(values)) if np.isfinite(values).any() else 0.0
    kwargs.setdefault("vmax", 1.0 if value == "jaccard" else max(largest, 1.0))
    image = ax.imshow(values, cmap=cmap, **kwargs)
    if len(matrix) <= 60:  # beyond, labels overlap: the axes keep positions only
        ax.set_xticks(range(len(matrix.columns)), [short_label(c) for c in matrix.columns],
                      rotation=45, ha="right")
        ax.set_yticks(range(len(matrix.index)), [short_label(r) for r in matrix.index])
    if annotate and len(matrix) <= 20:
        middle = (kwargs["vmin"] + kwargs["vmax"]) / 2
        for (i, j), v in np.ndenumerate(values):
            if np.isnan(v):
                continue
            ax.text(j, i, f"{v:.2f}" if value == "jaccard" else f"{v:.0f}", ha="center",
                    va="center", fontsize=8, color="white" if v > middle else "black")
    ax.figure.colorbar(image, ax=ax, label=("Jaccard: shared / union (0 none, 1 all)"
                                            if value == "jaccard" else "shared memories"))
    ax.set_title("Shared memories between robots (diagonal left out)")
    return ax


@checked_plot
def plot_robot_activity(df: pd.DataFrame, *, ax: Any = None, **kwargs: Any) -> Any:
    """Stacked bars per robot of a :func:`robot_activity` result: memories only it remembers
    and memories shared with other robots. Returns the Axes."""
    ax = axes_or_new(ax, (7, min(max(2.0, 0.3 * len(df)), 20.0)))
    # Positions, not names, on the axis: two long names cut to the same label stay two bars.
    rows = list(range(len(df)))
    own = df["nodes"] - df["shared_nodes"]
    ax.barh(rows, own, label="only this robot", **kwargs)
    ax.barh(rows, df["shared_nodes"], left=own, label="shared", **kwargs)
    ax.set_yticks(rows, [short_label(name) for name in df["robot"]])
    ax.invert_yaxis()
    ax.set_xlabel("memories")
    legend_if_labelled(ax)
    ax.set_title("Memories per robot")
    return ax
