"""Paths of the files the toolkit writes: reports, tables, charts, graphs, snapshots and
histories.

Where a file is written is checked before the work that produces it (a report or a sweep
takes seconds to minutes): a folder given for a file, a folder that cannot be made or
written in, a name the file system cannot take (too long) or a home folder of nobody
(``~nobody/``). An error while looking at a path or writing (a disk filling up) is a
:class:`ValidationError` naming the argument too, never a bare ``OSError``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ValidationError

__all__ = ["examining", "output_path", "path_text", "writable_folder", "writing"]


def output_path(path: Any, *, field: str, suffixes: tuple[str, ...] = (),
                make_folder: bool = True) -> Path:
    """``path`` as the file to write, once checked: not a folder, ending in one of
    ``suffixes`` when given, in a folder that exists (or is made, with ``make_folder``) and
    can be written in; else :class:`ValidationError` naming ``field``."""
    target = _as_path(path, field)
    with examining(target, field=field):
        if target.is_dir():
            raise ValidationError(f"{target} is a folder; give a file name", field=field)
        if suffixes and target.suffix.lower() not in suffixes:
            raise ValidationError(f"{target} must end in {', '.join(suffixes)}", field=field)
        if not make_folder and not target.absolute().parent.is_dir():
            raise ValidationError(f"no folder {str(target.absolute().parent)!r} to write in",
                                  field=field)
    writable_folder(target.parent, field=field)
    return target


def writable_folder(folder: Any, *, field: str) -> Path:
    """``folder``, made if missing, once a file could be created in it; else
    :class:`ValidationError` naming ``field``."""
    folder = _as_path(folder, field)
    with writing(folder, field=field):
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    return folder


def _as_path(path: Any, field: str) -> Path:
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.strip() or "\0" in text:
        raise ValidationError(f"must be a path, got {path!r}", field=field)
    try:
        return Path(text).expanduser()
    except RuntimeError as exc:  # ~nobody/...
        raise ValidationError(f"cannot use {text}: {exc}", field=field) from None


@contextmanager
def examining(target: Any, *, field: str) -> Iterator[None]:
    """Turn an ``OSError`` raised while ``target`` is looked at (``exists``, ``is_dir``:
    a name too long for the file system, a folder none may list) into a
    :class:`ValidationError` naming ``field``."""
    try:
        yield
    except OSError as exc:
        raise ValidationError(f"cannot use {target}: {exc.strerror or exc}",
                              field=field) from None


@contextmanager
def writing(target: Path, *, field: str, what: str = "") -> Iterator[None]:
    """Turn an ``OSError`` raised while ``target`` is written into a
    :class:`ValidationError` naming ``field`` (and ``what`` the target is, for the message)."""
    try:
        yield
    except OSError as exc:
        named = f"{what} {target}" if what else str(target)
        raise ValidationError(f"cannot write {named}: {exc.strerror or exc}",
                              field=field) from None


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
