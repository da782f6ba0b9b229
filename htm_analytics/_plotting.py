"""The plotting plumbing the plot functions share."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ValidationError

__all__ = ["checked_plot", "axes_or_new", "column_option", "legend_if_labelled",
           "fraction_limits", "short_label"]

Plot = TypeVar("Plot", bound=Callable[..., Any])


def checked_plot(plot: Plot) -> Plot:
    """Have ``plot`` refuse, by its first parameter's name, what it cannot draw: data of
    another kind than its annotation (a DataFrame, or a networkx graph), or a frame without
    a column it reads, which pandas would raise as a bare ``KeyError`` mid-drawing."""
    first = next(iter(inspect.signature(plot).parameters.values()))
    wants_graph = "Graph" in str(first.annotation)

    @functools.wraps(plot)
    def checked(data: Any, *args: Any, **kwargs: Any) -> Any:
        if wants_graph:
            import networkx as nx

            kind: type = nx.Graph
        else:
            import pandas as pd

            kind = pd.DataFrame
        if not isinstance(data, kind):
            raise ValidationError(f"must be a {kind.__module__.split('.')[0]} "
                                  f"{kind.__name__}, got {type(data).__name__}",
                                  field=first.name)
        try:
            return plot(data, *args, **kwargs)
        except KeyError as exc:
            key = exc.args[0] if exc.args else None
            if wants_graph or (isinstance(key, str) and key in getattr(data, "columns", ())):
                raise  # not a missing column: a defect of the plot itself
            raise ValidationError(f"lacks a column this plot reads: {key}",
                                  field=first.name) from None

    return checked  # type: ignore[return-value]


def axes_or_new(ax: Any, size: tuple[float, float]) -> Any:
    """``ax`` itself, or the Axes of a new figure of ``size`` inches; never shows anything."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=size, layout="constrained")
        return ax
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):  # else an AttributeError mid-drawing
        raise ValidationError(f"must be a matplotlib Axes or None, got {type(ax).__name__}",
                              field="ax")
    return ax


def column_option(value: Any, allowed: tuple[str, ...], *, field: str) -> str:
    """``value`` if it names one of the ``allowed`` columns a plot can draw; refused by the
    option's own name (a missing column would be blamed on the data)."""
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(f"must be one of {', '.join(map(repr, allowed))}, got "
                              f"{value!r:.60}", field=field)
    return value


def legend_if_labelled(ax: Any, **kwargs: Any) -> None:
    """A legend, only when something drawn has a label: an empty frame draws nothing, and
    matplotlib warns of a legend without entries."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def fraction_limits(values: Any) -> tuple[float, float]:
    """Axis limits for fractions such as recall: 0 to 1 when the values spread over much of
    that range, else a window around them (a 0-1 axis flattens 0.98-1.0 into one line).

    The window is at least 0.05 wide and never leaves [0, 1] by more than a margin that keeps
    the points at 1.0 off the frame.
    """
    import numpy as np

    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return 0.0, 1.02
    low, high = float(finite.min()), float(finite.max())
    span = max(high - low, 0.05)
    if low - span < 0.25:  # the data fill a good part of the unit range: show all of it
        return 0.0, 1.02
    margin = span * 0.15
    return max(0.0, low - margin), min(1.0, high) + margin


def short_label(text: Any, width: int = 30) -> str:
    """``text`` cut to ``width`` characters with an ellipsis: a long name as a tick label
    would squeeze the plot itself to nothing."""
    text = str(text)
    return text if len(text) <= width else text[: width - 1] + "…"
