"""How the commands print: the shared output and scope options, and terminal tables."""

from __future__ import annotations

import datetime as dt
import functools
import shutil
from collections.abc import Callable
from typing import Any

import click
import pandas as pd

__all__ = ["output_options", "scope_options", "emit"]


def output_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Shared ``--table/--csv/--json`` options: how a command prints its DataFrame."""

    @click.option("--table", "fmt", flag_value="table", default=True,
                  help="Print an aligned table (default).")
    @click.option("--csv", "fmt", flag_value="csv", help="Print CSV.")
    @click.option("--json", "fmt", flag_value="json", help="Print a JSON array of objects.")
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return command(*args, **kwargs)

    return wrapper


def scope_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Shared ``--since/--until/--robot`` options, passed on as ``timeframe`` and ``robots``."""

    @click.option("--since", type=click.DateTime(), default=None,
                  help="Only from this date or time (UTC).")
    @click.option("--until", type=click.DateTime(), default=None,
                  help="Only up to this date or time (UTC, inclusive).")
    @click.option("--robot", "robots", multiple=True, help="Only this robot (repeatable).")
    @functools.wraps(command)
    def wrapper(*args: Any, since: Any, until: Any, robots: tuple[str, ...],
                **kwargs: Any) -> Any:
        timeframe = None
        if since or until:
            timeframe = (since or dt.datetime(1, 1, 2), until or dt.datetime(9999, 12, 30))
        return command(*args, timeframe=timeframe, robots=list(robots) or None, **kwargs)

    return wrapper


def emit(frame: pd.DataFrame, fmt: str) -> None:
    """Print ``frame`` as a table, CSV or JSON."""
    if fmt == "csv":
        click.echo(frame.to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(frame.to_json(orient="records", date_format="iso", indent=2))
    else:
        click.echo(_readable(frame).to_string(index=False, line_width=_terminal_width())
                   if len(frame) else "(no rows)")


def _terminal_width() -> int:
    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))


def _readable(frame: pd.DataFrame, text_width: int = 40) -> pd.DataFrame:
    """A copy for the terminal: times to the minute, floats to 3 decimals, long text cut,
    and blanks instead of NaN/NaT/<NA>."""
    shown = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_datetime64_any_dtype(values):
            text = values.dt.strftime("%Y-%m-%d %H:%M")
        elif pd.api.types.is_float_dtype(values):
            text = values.map(lambda v: f"{v:,.3f}" if pd.notna(v) else "")
        else:
            text = values.map(lambda v: "" if v is None or (not isinstance(v, (list, tuple))
                                                            and pd.isna(v)) else str(v))
            text = text.map(lambda t: t if len(t) <= text_width else t[:text_width - 1] + "…")
        shown[column] = text.fillna("").astype(object)
    return shown
