"""The one piece of plotting plumbing the plot functions share."""

from __future__ import annotations

from typing import Any


def axes_or_new(ax: Any, size: tuple[float, float]) -> Any:
    """``ax`` itself, or the Axes of a new figure of ``size`` inches; never shows anything."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax
