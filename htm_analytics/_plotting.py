"""The one piece of plotting plumbing the plot functions share."""

from __future__ import annotations

from typing import Any


def axes_or_new(ax: Any, size: tuple[float, float]) -> Any:
    """``ax`` itself, or the Axes of a new figure of ``size`` inches; never shows anything."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


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
