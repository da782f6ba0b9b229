"""The SQL files shipped in the package (``htm_analytics/sql/``), read once each."""

from __future__ import annotations

import functools
import importlib.resources

__all__ = ["read_sql"]


@functools.cache
def read_sql(*path: str) -> str:
    """The text of ``sql/<path>`` (``read_sql("search", "fulltext_any.sql")``)."""
    return importlib.resources.files("htm_analytics").joinpath("sql", *path).read_text("utf-8")
