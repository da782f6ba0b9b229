"""Paths of the files the toolkit writes and reads through DuckDB (snapshots, histories)."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ValidationError

__all__ = ["path_text"]


def path_text(path: Any, *, field: str = "history") -> str:
    """``path`` as text, if it can name a DuckDB or Parquet file or folder (a NUL character or
    a lone surrogate cannot: DuckDB takes paths as UTF-8; nor can a backslash where it is not
    the separator, which DuckDB reads as one, or a question mark, before which DuckDB puts its
    log file's ``.wal``: both would write somewhere else); else :class:`ValidationError`
    naming ``field``."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("must be a file or folder path", field=field)
    try:
        if "\0" in text:
            raise ValueError("a NUL character")
        if "\\" in text and os.sep != "\\":
            raise ValueError("a backslash, which DuckDB reads as a folder separator")
        if "?" in text:
            raise ValueError("a question mark, which DuckDB does not take as part of a name")
        text.encode()
    except ValueError as exc:
        raise ValidationError(f"is not a path this system can name ({exc})",
                              field=field) from None
    return text
