"""Parameter documentation written once and shared by every docstring that needs it.

As seaborn's ``DocstringComponents``: a docstring names a shared entry with a placeholder such
as ``%(timeframe)s`` on a line of its own, and :func:`share_docs` replaces it with the
entry, indented like the placeholder, when the function is defined. An unknown name fails at
import time, so a typo cannot reach the rendered documentation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from textwrap import dedent
from typing import TypeVar

__all__ = ["DocstringComponents", "PARAMETER_DOCS", "share_docs"]

_F = TypeVar("_F", bound=Callable[..., object])
_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)%\((?P<name>\w+)\)s[ \t]*$", re.MULTILINE)


class DocstringComponents(Mapping[str, str]):
    """Named pieces of numpydoc text: ``name -> "param : type\\n    description"``."""

    def __init__(self, entries: Mapping[str, str]) -> None:
        self._entries = {name: dedent(text).strip("\n") for name, text in entries.items()}

    def __getitem__(self, name: str) -> str:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def fill(self, docstring: str) -> str:
        """``docstring`` with every ``%(name)s`` line replaced by its entry."""
        def replace(match: re.Match[str]) -> str:
            indent, name = match.group("indent"), match.group("name")
            if name not in self._entries:
                raise KeyError(f"no shared documentation named {name!r}")
            return "\n".join(indent + line if line else line
                             for line in self._entries[name].splitlines())
        return _PLACEHOLDER.sub(replace, docstring)


PARAMETER_DOCS = DocstringComponents({
    # Analysis helpers: where the memory lives and which part of it.
    "source": """
        source : LongTermMemory or Snapshot
            Where the memory lives: the live store or an offline snapshot.""",
    "timeframe": """
        timeframe : (datetime, datetime), optional
            Only nodes created in this range (inclusive, UTC).""",
    "robots": """
        robots : str or list of str, optional
            Only nodes that one of these robots remembers (one name or a list).""",
    "prefix": """
        prefix : str, optional
            Only tags in this subtree (the tag itself and its descendants).""",
    "level": """
        level : int, optional
            Roll tags up to their first ``level`` segments first (``level=1``: top-level
            topics).""",
    "freq": """
        freq : {'h', 'D', 'W', 'M', 'Q', 'Y'}
            Period length (weeks start on Monday, UTC).""",
    "progress": """
        progress : bool
            Show a progress bar (tqdm, on standard error or in the notebook) with the work
            done and left; the CLI shows it when standard error is a terminal.""",
    # Plots.
    "ax": """
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new figure's Axes by default.""",
    "plot_returns": """
        matplotlib.axes.Axes
            The Axes drawn on (the figure is never shown).""",
    # Store searches.
    "search_limit": """
        limit : int
            Most results, 1 to 1000.""",
    "search_timeframe": """
        timeframe : (start, end), optional
            Only nodes whose ``created_at`` is in the range (datetimes, or dates for whole
            UTC days).""",
    "search_vectors": """
        embedding_service : object with ``embed``, optional
            Turns ``query`` into a vector (one text in, one vector out).
        embedding : sequence of float or numpy.ndarray, optional
            A ready query vector instead of ``query`` + ``embedding_service``; it must come
            from the model of the stored vectors.""",
})


def share_docs(function: _F) -> _F:
    """Decorator: fill the function's docstring from :data:`PARAMETER_DOCS`."""
    if function.__doc__:
        function.__doc__ = PARAMETER_DOCS.fill(function.__doc__)
    return function
