"""What the readers and writers of a history (:mod:`htm_analytics.store.history`) refuse
(:class:`~htm_analytics.NotAHistoryError`): a place that is not a history, or not a whole
one, and a ``schema_version`` that is not one."""

from __future__ import annotations

from typing import Any

from ..errors import NotAHistoryError

__all__ = ["incomplete", "version_number"]


def incomplete(where: Any, missing: list[str]) -> NotAHistoryError:
    """The error for a history without some of its tables (dropped, or files lost)."""
    return NotAHistoryError(f"{where} is an incomplete history: it has no "
                            f"{', '.join(missing)}; collect into a new one, or restore it "
                            "from a backup")


def version_number(value: Any, where: Any) -> int:
    """The ``schema_version`` stored as ``value`` as a number; :class:`NotAHistoryError`
    where it is not a whole number from 1 (NULL included)."""
    text = "" if value is None else str(value).strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        shown = "NULL" if value is None else f"{str(value)!r:.40}"
        raise NotAHistoryError(f"{where} is not a history this release can read: its "
                               f"history_meta.schema_version is {shown}, not a version "
                               "number")
    return int(text)
