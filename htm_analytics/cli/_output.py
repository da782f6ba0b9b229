"""How the commands print: the shared output and scope options, and terminal tables."""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import shutil
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CHART_SUFFIXES", "DateOrTime", "NumberRange", "ROBOTS_KEY", "checked_output",
           "embedder_named", "emit", "refuse_unused", "emit_document", "human_bytes",
           "note_unknown_robots", "output_options", "scope_options", "workers_option"]


class NumberRange(click.FloatRange):
    """click's FloatRange with NaN refused: no comparison holds for NaN, so it passes any
    range, and an option checked this way would run with it."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail("must be a number, not NaN", param, ctx)
        return number


_JSON_ROWS = "Print one JSON document (an array of objects, one per row)."
# The output options: parameter, option and the fmt it gives. Each is a flag of its own, so
# that two given together can be told apart (sharing one destination, the last would win).
_FORMATS = {"format_table": ("--table", "table"), "format_csv": ("--csv", "csv"),
            "format_json": ("--json", "json")}


def _one_format(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """Refuse a second output format: the options given are processed in the order given,
    so an earlier one is already in ``ctx.params``."""
    if value:
        given = [option for name, (option, _) in _FORMATS.items()
                 if name != param.name and ctx.params.get(name)]
        if given:
            raise click.UsageError(f"{given[0]} and {_FORMATS[str(param.name)][0]} are two "
                                   "output formats: give one of --table, --csv, --json",
                                   ctx=ctx)
    return value


def output_options(command: Callable[..., Any] | None = None, *,
                   json_help: str = _JSON_ROWS) -> Any:
    """Shared ``--table/--csv/--json`` options: how a command prints its DataFrame, passed
    on as ``fmt`` (``"table"``, ``"csv"`` or ``"json"``); two of them given together are a
    usage error naming both.

    Used bare (``@output_options``), or as ``@output_options(json_help=...)`` by a command
    whose ``--json`` prints something else than the frame's rows.
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @click.option("--table", "format_table", is_flag=True, callback=_one_format,
                      help="Print an aligned table (default).")
        @click.option("--csv", "format_csv", is_flag=True, callback=_one_format,
                      help="Print CSV.")
        @click.option("--json", "format_json", is_flag=True, callback=_one_format,
                      help=json_help)
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = [fmt for name, (_, fmt) in _FORMATS.items() if kwargs.pop(name)]
            return command(*args, fmt=given[0] if given else "table", **kwargs)

        return wrapper

    return decorate if command is None else decorate(command)


class DateOrTime(click.DateTime):
    """A date (``2026-10-31``, kept as a ``datetime.date``: a range ending on it holds the
    whole day) or a date and time."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        when = super().convert(value, param, ctx)
        return when.date() if isinstance(value, str) and ":" not in value else when  # no time


ROBOTS_KEY = "htm_analytics.robots"  # the --robot names, in the click context's meta


def _day(when: dt.date) -> dt.date:
    return when.date() if isinstance(when, dt.datetime) else when


def scope_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Shared ``--since/--until/--robot`` options, passed on as ``timeframe`` and ``robots``."""

    @click.option("--since", type=DateOrTime(), default=None,
                  help="Only memories created from this date or time (UTC); for trends, "
                       "remembers made from it.")
    @click.option("--until", type=DateOrTime(), default=None,
                  help="Only memories created up to this date (the whole day) or time (UTC, "
                       "inclusive); for trends, remembers made up to it.")
    @click.option("--robot", "robots", multiple=True, help="Only this robot (repeatable).")
    @functools.wraps(command)
    def wrapper(*args: Any, since: Any, until: Any, robots: tuple[str, ...],
                **kwargs: Any) -> Any:
        # open_store checks them once the database is known: see note_unknown_robots.
        click.get_current_context().meta[ROBOTS_KEY] = list(robots)
        timeframe = None
        if since or until:
            # An open end is the calendar's (a day inside it, so that any zone can shift it).
            first, last = dt.date(1, 1, 2), dt.date(9999, 12, 30)
            if since and not until and _day(since) > last:
                raise click.BadParameter(f"{since} is past the last day a memory can have",
                                         param_hint="--since")
            if until and not since and _day(until) < first:
                raise click.BadParameter(f"{until} is before the first day a memory can have",
                                         param_hint="--until")
            timeframe = (since or first, until or last)
        return command(*args, timeframe=timeframe, robots=list(robots) or None, **kwargs)

    return wrapper


def _every_cpu_unless_given(ctx: click.Context, param: click.Parameter,
                            value: int | None) -> int:
    from ..analysis.worker_pool import available_cpus

    return value or available_cpus()


workers_option = click.option(
    "--workers", type=click.IntRange(1, 64), default=None, metavar="N",
    callback=_every_cpu_unless_given,
    help="Processes running the sensitive-data detectors on more than 20,000 memories "
         "[default: every CPU].")


ROWS_PER_PIECE = 10_000
"""Rows made text and printed at a time: a listing of a million memories is never all in
memory as text (its table took 3.9 GB at once)."""


def emit(frame: pd.DataFrame, fmt: str) -> None:
    """Print ``frame`` as a table, CSV or JSON: one document either way, printed in pieces of
    :data:`ROWS_PER_PIECE` rows."""
    for piece in _pieces(frame, fmt):
        click.echo(piece, nl=False)


def _pieces(frame: pd.DataFrame, fmt: str) -> Iterator[str]:
    starts = range(0, len(frame), ROWS_PER_PIECE)
    if fmt == "csv":
        for start in starts or [0]:
            yield frame.iloc[start:start + ROWS_PER_PIECE].to_csv(index=False,
                                                                   header=start == 0)
    elif fmt == "json":
        if not len(frame):
            yield frame.to_json(orient="records", date_format="iso", indent=2) + "\n"
            return
        # Each piece's array without its brackets: the same text as the whole array.
        for start in starts:
            records = frame.iloc[start:start + ROWS_PER_PIECE].to_json(
                orient="records", date_format="iso", indent=2)
            yield ("[\n" if start == 0 else ",\n") + records[2:-2]
        yield "\n]\n"
    elif len(frame):
        for lines in terminal_lines(frame):
            yield lines + "\n"
    else:
        yield "(no rows)\n"


def emit_document(document: dict[str, Any]) -> None:
    """Print one JSON object (frames inside it as arrays of objects)."""
    import pandas as pd

    def plain(value: Any) -> Any:
        if isinstance(value, pd.DataFrame):
            return json.loads(value.to_json(orient="records", date_format="iso"))
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        if isinstance(value, (dt.datetime, dt.date)):
            return value.isoformat()
        return value

    click.echo(json.dumps(plain(document), indent=2, default=str))


CHART_SUFFIXES = (".png", ".svg", ".pdf")  # the chart files --plot writes


def refuse_unused(ctx: click.Context, names: dict[str, str], reason: str) -> None:
    """A usage error for the first of ``names`` (parameter: option) given on the command
    line, whose effect ``reason`` says it would not have: never accepted silently. A flag
    given in its off form (``--no-benchmark``) asks for nothing, so it passes."""
    for name, option in names.items():
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.COMMANDLINE:
            continue
        if ctx.params.get(name) is False:
            continue
        raise click.BadOptionUsage(name, f"{option} has no effect {reason}")


def checked_output(path: str, option: str, *, folder: bool = False,
                   suffixes: tuple[str, ...] = (), make_folder: bool = True) -> Path:
    """Where ``option`` writes, checked before the command's work: a file (or, with
    ``folder``, a folder) that can be written; else a usage error naming ``option``."""
    from ..errors import ValidationError
    from ..store.file_paths import output_path, writable_folder

    try:
        return writable_folder(path, field=option) if folder else \
            output_path(path, field=option, suffixes=suffixes, make_folder=make_folder)
    except ValidationError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"{option}: "),
                                 param_hint=option) from None


def note_unknown_robots(store: Any, robots: list[str] | None) -> None:
    """Say (on stderr) which of the ``--robot`` names no robot has, with the names there
    are: a check scoped to a mistyped name would otherwise report on no memory at all."""
    if not robots:
        return
    known_ids = store.robot_ids(robots, field="robots")
    unknown = [name for name in dict.fromkeys(robots) if name not in known_ids]
    if unknown:
        known = store.robot_names()
        shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
        click.echo(f"note: no robot named {', '.join(map(repr, unknown))} in this database; "
                   f"robots here: {shown or 'none'}", err=True)


def human_bytes(size: float) -> str:
    """``1536`` -> ``"1.5 kB"`` (powers of 1024, as PostgreSQL's pg_size_pretty)."""
    import pandas as pd

    if pd.isna(size):
        return ""
    value = float(size)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if abs(value) < 1024 or unit == "TB":
            return f"{int(value)} {unit}" if unit == "bytes" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} TB"  # pragma: no cover


def _terminal_width() -> int:
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def terminal_table(frame: pd.DataFrame, width: int | None = None) -> str:
    """``frame`` for a terminal ``width`` wide (default: the terminal's): one line per row,
    long text shortened to fit; a table too wide even so is printed as one record per row,
    a column a line (psql's expanded display), rather than wrapped into blocks."""
    return "\n".join(terminal_lines(frame, width))


def terminal_lines(frame: pd.DataFrame, width: int | None = None, *,
                   rows_per_piece: int = ROWS_PER_PIECE) -> Iterator[str]:
    """:func:`terminal_table` in pieces of ``rows_per_piece`` rows (lines joined by newlines).

    The values are made text a piece at a time, twice when there are several pieces: first
    to find each column's longest value, which with the rows holding them decides the layout
    (as the whole table would be laid out: a million rows took minutes when each width was
    tried by rendering every row), then to print the piece in the widths of the whole table.
    An empty frame has no lines."""
    import pandas as pd

    width = width or _terminal_width()
    pieces = [frame.iloc[start:start + rows_per_piece]
              for start in range(0, len(frame), rows_per_piece)]
    if not pieces:
        return
    longest: dict[Any, tuple[int, pd.Series]] = {}
    kept: dict[int, pd.DataFrame] = {}  # the text of a table of one piece, made once

    def text_of(number: int) -> pd.DataFrame:
        return kept[number] if number in kept else _as_text(pieces[number])[0]

    for piece in pieces:
        text, cuttable = _as_text(piece)
        if len(pieces) == 1:
            kept[0] = text
        for column in text.columns:
            lengths = text[column].str.len().to_numpy()
            row = int(lengths.argmax())
            if column not in longest or lengths[row] > longest[column][0]:
                longest[column] = (int(lengths[row]), text.iloc[row])
    holding = pd.DataFrame([row for _, row in longest.values()])
    for text_width in (40, 32, 24, 16):
        laid_out = _cut(holding, cuttable, text_width)
        if max(map(len, laid_out.to_string(index=False).splitlines())) <= width:
            widths: dict[Hashable, int] = {
                c: max(len(str(c)), int(laid_out[c].str.len().max())) for c in laid_out.columns}
            for number in range(len(pieces)):
                yield _cut(text_of(number), cuttable, text_width).to_string(
                    index=False, header=number == 0, col_space=widths)
            return
    text_width = max(16, width - 3 - max(len(str(c)) for c in holding.columns))
    label_width = max(len(str(c)) for c in holding.columns)
    labels = [f"{str(c).ljust(label_width)} | " for c in holding.columns]
    record = 0
    for number in range(len(pieces)):
        shown = _cut(text_of(number), cuttable, text_width)
        records = []
        for values in zip(*(shown[c] for c in shown.columns)):
            record += 1
            header = f"-[ RECORD {record} ]"
            records.append("\n".join([header + "-" * max(0, min(width, 40) - len(header)),
                                       *(label + value for label, value in zip(labels, values))]))
        yield "\n".join(records)


def _shown_name(column: Any) -> Any:
    """``size_bytes`` -> ``size``, ``index_bytes`` -> ``index_size``: the unit is in the value."""
    name = str(column)
    if not name.endswith("_bytes"):
        return column
    return "size" if name == "size_bytes" else f"{name[:-6]}_size"


_CONTROL = r"[\x00-\x1f\x7f-\x9f\u2028\u2029]"  # what would break or escape a line


def _as_text(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[Any]]:
    """A copy for the terminal: times to the minute, floats to 3 decimals, sizes in kB/MB/GB,
    control characters as spaces and blanks instead of NaN/NaT/<NA>; with the columns whose
    long text may be cut."""
    import pandas as pd

    shown = pd.DataFrame(index=frame.index)
    cuttable = []
    for column in frame.columns:
        values = frame[column]
        name = _shown_name(column)
        if str(column).endswith("_bytes") and pd.api.types.is_numeric_dtype(values):
            text = values.map(human_bytes)
        elif pd.api.types.is_datetime64_any_dtype(values):
            text = values.dt.strftime("%Y-%m-%d %H:%M")
        elif pd.api.types.is_float_dtype(values):
            text = values.map(lambda v: f"{v:,.3f}" if pd.notna(v) else "")
        else:
            text = values.map(lambda v: "" if v is None or (not isinstance(v, (list, tuple))
                                                            and pd.isna(v)) else str(v))
            # A memory's line breaks and tabs as spaces: one line per row, as wide as its text.
            text = text.str.replace(_CONTROL, " ", regex=True)
            cuttable.append(name)
        shown[name] = text.fillna("").astype(object)
    return shown, cuttable


def _cut(text: pd.DataFrame, cuttable: list[Any], text_width: int) -> pd.DataFrame:
    """``text`` with the long values of ``cuttable`` columns cut to ``text_width``."""
    shown = text.copy()
    for name in cuttable:
        values = shown[name]
        long = values.str.len() > text_width
        if long.any():
            shown[name] = values.where(~long, values.str.slice(0, text_width - 1) + "…")
    return shown


def embedder_named(name: str | None) -> Any:
    """The embedding provider named by ``--embedder``; an unknown name is a usage error."""
    from ..agent.embeddings import get_embedder
    from ..errors import ValidationError

    if name is None:
        return None
    try:
        return get_embedder(name)
    except ValidationError as exc:
        if exc.field != "name":
            raise
        raise click.BadParameter(str(exc).removeprefix("name: "),
                                 param_hint="--embedder") from None
