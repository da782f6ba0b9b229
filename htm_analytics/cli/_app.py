"""The command group and the everyday commands (``bench``, ``import``, ``eval``, ``server``,
``status``, ``forget``/``restore``/``purge`` and ``mcp`` are in modules of their own,
registered by the package)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import click

from ._database import DEMO_DATABASE, choose_database, open_store, say_database, store_options
from ._messages import cli_words, option_named
from ._output import (
    NumberRange,
    checked_output,
    emit,
    emit_document,
    output_options,
    refuse_unused,
    scope_options,
    workers_option,
)

__all__ = ["main", "cli", "fail_on_option", "print_findings", "HYGIENE_SAMPLE"]

# Spelt out so that --help imports nothing heavy (a test checks it against the report's
# REPORT_HYGIENE_SAMPLE).
HYGIENE_SAMPLE = 10_000


def _open_store(ctx: click.Context, **options: Any) -> Any:
    """The store of the database the command reads (see ``_database``), named on stderr."""
    return open_store(ctx, **options)


def _remember_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(dict)["db"] = value


class _Command(click.Command):
    """Every subcommand also takes ``--db`` after its name: ``htm-analytics report --db URL``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(click.Option(
            ["--db"], metavar="URL", expose_value=False, is_eager=True, callback=_remember_db,
            help="PostgreSQL URL (the same as htm-analytics --db URL)."))


class _Group(click.Group):
    command_class = _Command
    group_class = type  # subgroups (bench) are _Group too


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar=None, default=None, metavar="URL",
              help="PostgreSQL URL. Default: HTM_DBURL, HTM_DATABASE__URL or DATABASE_URL, "
                   "else the embedded server's htm database (commands that only read take "
                   "the demo's htm_demo while htm holds no memory). Every command says on "
                   "stderr which database it used.")
@click.option("--writer-timezone", envvar="HTM_WRITER_TIMEZONE", default=None, metavar="ZONE",
              help="Time zone of the writer of timestamp-without-time-zone columns (the "
                   "current gem writes its local time): e.g. America/Chicago. Default: "
                   "HTM_WRITER_TIMEZONE, else the server's TimeZone.")
@click.option("--query-timeout", envvar="HTM_QUERY_TIMEOUT", default=None, metavar="SECONDS",
              type=NumberRange(min=0.001, max=86_400),
              help="Longest a statement may run before it is cancelled, for the long checks "
                   "of a large memory. Default: HTM_QUERY_TIMEOUT, else 30.")
@click.version_option(package_name="htm-analytics")
@click.pass_context
def cli(ctx: click.Context, db: str | None, writer_timezone: str | None,
        query_timeout: float | None) -> None:
    """Explore, tune and report on the long-term memory of HTM robots."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    ctx.obj["writer_timezone"] = writer_timezone
    ctx.obj["query_timeout"] = query_timeout


@cli.command()
@click.option("--out", default="report.html", show_default=True, type=click.Path(),
              help="Where to write the HTML report.")
@click.pass_context
def demo(ctx: click.Context, out: str) -> None:
    """Load the bundled demo memory into a fresh database and write its report.

    Uses the embedded PostgreSQL unless --db or HTM_DBURL names a server; the demo gets a
    database of its own (htm_demo) there, built aside and swapped in only when complete.
    """
    from ..report.demo import run_demo

    server, why = choose_database(ctx, write=True)
    say_database(server, f"{why}; the demo loads into its own {DEMO_DATABASE} there")
    run_demo(out, server_url=server, echo=click.echo)


def _path_exists(path: str, option: str) -> bool:
    """Whether ``path`` exists; a name the file system cannot take (too long) is a usage
    error naming ``option``, not an OSError."""
    try:
        return Path(path).exists()
    except OSError as exc:
        raise click.BadParameter(f"cannot use {path}: {exc.strerror or exc}",
                                 param_hint=option) from None


def _snapshot_hint(path: str) -> str:
    """What to pass to --snapshot when ``path`` is not there but a snapshot of a related
    name is (``snapshot memory`` writes a folder, not ``memory.duckdb``)."""
    wanted = Path(path)
    for candidate in (wanted.with_suffix(""), wanted.with_suffix(".duckdb")):
        if candidate != wanted and _path_exists(str(candidate), "--snapshot"):
            kind = "a folder of Parquet files" if candidate.is_dir() else "a DuckDB file"
            return f"; {candidate} is a snapshot ({kind}): --snapshot {candidate}"
    return ("; write one with `htm-analytics snapshot PATH` (PATH.duckdb for a DuckDB file, "
            "any other PATH for a Parquet folder)")


@cli.command()
@click.option("--out", default=None, type=click.Path(),
              help="Report file [default: report.html, or report.md with --format md].")
@click.option("--format", "report_format", type=click.Choice(["html", "md"]), default="html",
              show_default=True, help="A self-contained HTML file, or Markdown with a folder "
                                      "of figures.")
@click.option("--data-dir", type=click.Path(), default=None,
              help="Also write every table behind the report to this folder.")
@click.option("--data-format", type=click.Choice(["csv", "parquet"]), default="csv",
              show_default=True)
@click.option("--snapshot", "snapshot_path", type=click.Path(), default=None,
              help="Report on a snapshot instead of a server: the DuckDB file or Parquet "
                   "folder `htm-analytics snapshot PATH` wrote.")
@click.option("--benchmark/--no-benchmark", default=True, show_default=True,
              help="Include the ef_search recall/latency sweep.")
@click.option("--hygiene/--no-hygiene", default=True, show_default=True,
              help="Include the memory-hygiene section (near-duplicates, secrets).")
@click.option("--hygiene-sample", type=click.IntRange(min=0), default=HYGIENE_SAMPLE,
              show_default=True, metavar="N",
              help="On a larger memory, the hygiene section checks a seeded sample of N "
                   "memories and says so (0: every memory); near-duplicates are then "
                   "searched for among 1,000 of them, which keeps the report quick "
                   "(`advise` searches N).")
@click.option("--conversations", "conversations_path", default=None,
              type=click.Path(exists=True, dir_okay=False),
              help="Add a section for a conversation benchmark: the JSON document of "
                   "`htm-analytics eval conversations --json`.")
@click.option("--history", "history_path", type=click.Path(exists=True),
              default=None, help="Add \"Since last time\" from this history (htm-analytics "
                                 "collect --history PATH).")
@click.option("--title", default="Memory report", show_default=True)
@workers_option
@click.pass_context
def report(ctx: click.Context, out: str | None, report_format: str, data_dir: str | None,
           data_format: str, snapshot_path: str | None, benchmark: bool, hygiene: bool,
           hygiene_sample: int, conversations_path: str | None, history_path: str | None,
           title: str, workers: int) -> None:
    """Write a report: advice, stats, tags, trends, robots, indexes, HNSW recall curve (and a
    conversation benchmark's results with --conversations, "Since last time" with
    --history)."""
    from ..errors import ValidationError
    from ..report.build import build_report
    from ..tuning.conversations import ConversationEvaluation

    expected = {"html": (".html", ".htm"), "md": (".md", ".markdown")}[report_format]
    if out is None:
        out = f"report.{report_format}"
    elif not out.lower().endswith(expected):
        raise click.BadParameter(f"{out} does not match --format {report_format}; use a "
                                 f"{expected[0]} name", param_hint="--out")
    if snapshot_path:  # a snapshot is searched by nothing: no sweep, no hygiene checks
        refuse_unused(ctx, {"benchmark": "--benchmark", "hygiene": "--hygiene",
                            "hygiene_sample": "--hygiene-sample", "workers": "--workers"},
                      "with --snapshot (a snapshot is not searched)")
        refuse_unused(ctx.parent or ctx, {"db": "--db", "query_timeout": "--query-timeout",
                                          "writer_timezone": "--writer-timezone"},
                      "with --snapshot (no server is read)")
    if not hygiene:
        refuse_unused(ctx, {"hygiene_sample": "--hygiene-sample", "workers": "--workers"},
                      "with --no-hygiene")
    if not data_dir:
        refuse_unused(ctx, {"data_format": "--data-format"}, "without --data-dir")
    checked_output(out, "--out")  # before the report's work, not after it
    if data_dir:
        checked_output(data_dir, "--data-dir", folder=True)
    conversations = None
    if conversations_path:
        try:
            conversations = ConversationEvaluation.from_json(conversations_path)
        except ValidationError as exc:
            raise click.BadParameter(str(exc), param_hint="--conversations") from exc
    if snapshot_path:
        if not _path_exists(snapshot_path, "--snapshot"):
            raise click.BadParameter(f"no snapshot at {snapshot_path}"
                                     f"{_snapshot_hint(snapshot_path)}",
                                     param_hint="--snapshot")
        from ..store.snapshot import Snapshot

        click.echo(f"snapshot: {snapshot_path}", err=True)
        with Snapshot(snapshot_path) as source:
            built = build_report(source, title=title, benchmark=False,
                                 conversations=conversations, history=history_path)
    else:
        with _open_store(ctx, init_schema=False, pool_size=1) as store:
            built = build_report(store, title=title, benchmark=benchmark, hygiene=hygiene,
                                 hygiene_sample=hygiene_sample or None,
                                 workers=workers,
                                 conversations=conversations, history=history_path)
    path = built.write_html(out) if report_format == "html" else built.write_markdown(out)
    click.echo(f"report written to {path}")
    if data_dir:
        written = built.write_data(data_dir, format=data_format)
        click.echo(f"{len(written)} tables written to {data_dir}")


@cli.command("init-db")
@click.pass_context
def init_db(ctx: click.Context) -> None:
    """Create the extensions and the memory schema (safe to run again)."""
    from ..store import LongTermMemory

    url, why = choose_database(ctx, write=True)
    say_database(url, why)
    with LongTermMemory(url, init_schema=True, cache_size=0, **store_options(ctx)) as store:
        applied = store.server_info["migrations_applied"]
        click.echo(f"database: {store.url}")
        click.echo(f"PostgreSQL {store.server_info['server_version']}, "
                   f"pgvector {store.server_info['pgvector_version']}, "
                   f"pg_trgm {store.server_info['pg_trgm_version']}")
        click.echo(f"schema version {store.server_info['schema_version']}: "
                   + (f"applied migrations {applied}" if applied else "already up to date"))


def fail_on_option(command: Any) -> Any:
    """``--fail-on warning|critical``: exit 3 (worst a warning) or 4 (a critical finding)."""
    return click.option(
        "--fail-on", type=click.Choice(["warning", "critical"]), default=None,
        help="Exit with 4 when a finding is critical, or 3 when the worst is a warning "
             "and this is warning (for CI and cron); 0 otherwise.")(command)


@cli.command()
@click.option("--sweep/--no-sweep", default=True, show_default=True,
              help="Run a quick ef_search sweep (200 held-out vectors) to check the setting.")
@click.option("--target-recall", type=NumberRange(0, 1, min_open=True), default=0.95,
              show_default=True, help="Recall@10 the ef_search advice aims for.")
@click.option("--hygiene/--no-hygiene", default=True, show_default=True,
              help="Check the memories themselves too (near-duplicates, credentials, "
                   "personal data).")
@click.option("--hygiene-sample", type=click.IntRange(min=0), default=HYGIENE_SAMPLE,
              show_default=True, metavar="N",
              help="On a larger memory, check a seeded sample of N memories (0: every "
                   "memory).")
@fail_on_option
@output_options(json_help="Print one JSON document: schema_version, exit_code, counts, "
                          "findings... (docs/history.md).")
@click.pass_context
def advise(ctx: click.Context, sweep: bool, target_recall: float, hygiene: bool,
           hygiene_sample: int, fail_on: str | None, fmt: str) -> None:
    """Health and tuning findings, most severe first, each with the SQL that fixes it.

    --json prints one document (schema_version, counts, findings...: see docs/history.md).
    """
    from ..advisor import advise as advise_store
    from ..advisor import findings_document, gate_exit_code
    from ..analysis import memory_hygiene
    from ..analysis.worker_pool import available_cpus
    from ..report.build import MIN_SWEEP_VECTORS
    from ..tuning.advice import recommend_ef_search

    with _open_store(ctx, init_schema=False) as store:
        ef_advice = None
        if sweep:
            with store.tuning_session() as session:
                stored = max(session.vector_dimensions().values(), default=0)
            if stored >= MIN_SWEEP_VECTORS:  # as the report: held-out queries are stored ones
                ef_advice = recommend_ef_search(store, target_recall=target_recall,
                                                queries=min(200, stored),
                                                progress=sys.stderr.isatty())
        content = memory_hygiene(store, sample=hygiene_sample or None,
                                 progress=sys.stderr.isatty(),
                                 workers=available_cpus()) if hygiene else None
        findings = advise_store(store, ef_search_advice=ef_advice, hygiene=content)
    code = gate_exit_code(findings["severity"], fail_on)
    if fmt == "json":
        since = findings.attrs["statistics_since"]
        emit_document(findings_document(
            findings, kind="advise", database=store.url, fail_on=fail_on,
            statistics={"since": None if since is None else since.isoformat(),
                        "seconds": findings.attrs["statistics_seconds"],
                        "note": findings.attrs["statistics_note"]},
            ef_search_sweep=None if ef_advice is None else ef_advice.evidence))
    elif fmt == "csv":
        emit(findings, fmt)
    else:
        print_findings(findings, f"database: {store.url}\nstatistics since "
                                  f"{findings.attrs['statistics_note']}"
                        + ("" if ef_advice is None else
                           f"\nef_search sweep: {ef_advice.evidence}"))
    ctx.exit(code)


def print_findings(findings: Any, header: str) -> None:
    click.echo(header)
    for number, row in enumerate(findings.to_dict("records"), start=1):
        click.echo(f"\n{number}. {str(row['severity']).upper()} {row['check']}: {row['object']}")
        for label, text in (("", row["evidence"]), ("-> ", row["recommendation"])):
            click.echo(textwrap.fill(f"{label}{text}", width=100, initial_indent="   ",
                                     subsequent_indent="   "))
        click.echo(textwrap.indent(str(row["sql"]), "   | "))
    if findings.empty:
        click.echo("no findings")


@cli.command()
@click.option("--never-used", is_flag=True, help="Only indexes never scanned (not keys).")
@output_options
@click.pass_context
def indexes(ctx: click.Context, never_used: bool, fmt: str) -> None:
    """Index usage from pg_stat_user_indexes: scans, tuples, size, never-used flag."""
    from ..analysis.indexes import index_usage

    with _open_store(ctx, init_schema=False) as store:
        frame = index_usage(store)
    if never_used:
        frame = frame[frame["never_used"]]
    emit(frame.drop(columns=["definition"]), fmt)


@cli.command()
@output_options
@click.pass_context
def health(ctx: click.Context, fmt: str) -> None:
    """Live and dead rows, sequential vs index scans, last vacuum and analyze per table."""
    from ..analysis.indexes import table_health

    with _open_store(ctx, init_schema=False) as store:
        emit(table_health(store), fmt)


@cli.command()
@click.option("--level", type=int, default=None, help="Roll tags up to this many segments.")
@click.option("--prefix", default=None, help="Only tags under this one.")
@click.option("--min-shared", type=int, default=2, show_default=True,
              help="Least nodes a pair shares.")
@click.option("--sort-by", type=click.Choice(["shared_nodes", "jaccard", "lift", "pmi", "npmi"]),
              default="npmi", show_default=True,
              help="npmi ranks pairs by how much more often they meet than chance; "
                   "shared_nodes favours big tags.")
@click.option("--limit", type=int, default=30, show_default=True)
@scope_options
@output_options
@click.pass_context
def tags(ctx: click.Context, fmt: str, **options: Any) -> None:
    """Pairs of tags found together, with Jaccard, lift and PMI."""
    from ..analysis.tags import tag_cooccurrence

    with _open_store(ctx, init_schema=False) as store:
        frame = tag_cooccurrence(store, **options)
    emit(frame, fmt)


@cli.command("tag-tree")
@click.option("--prefix", default=None, help="Only this subtree.")
@click.option("--max-depth", type=click.IntRange(1), default=None,
              help="Only tags down to this depth (1: the top-level tags).")
@scope_options
@output_options
@click.pass_context
def tag_tree(ctx: click.Context, fmt: str, max_depth: int | None, **options: Any) -> None:
    """Tags and the ancestors they imply, with direct and cumulative node counts."""
    from ..analysis.tags import tag_hierarchy

    with _open_store(ctx, init_schema=False) as store:
        frame = tag_hierarchy(store, **options)
    if max_depth is not None:
        frame = frame[frame["depth"] <= max_depth]
    emit(frame, fmt)


@cli.command()
@click.option("--freq", type=click.Choice(["h", "D", "W", "M", "Q", "Y"]), default="W",
              show_default=True, help="Period length.")
@click.option("--by", type=click.Choice(["robot", "tag"]), default=None,
              help="Split by robot or tag.")
@click.option("--level", type=int, default=None, help="With --by tag: tag segments kept.")
@click.option("--prefix", default=None, help="With --by tag: only tags under this one.")
@scope_options
@output_options
@click.pass_context
def trends(ctx: click.Context, fmt: str, **options: Any) -> None:
    """Remembers per period: new, shared from another robot, repeated."""
    from ..analysis.trends import remember_trends

    if options["by"] != "tag":
        refuse_unused(ctx, {"level": "--level", "prefix": "--prefix"}, "without --by tag")
    with _open_store(ctx, init_schema=False) as store:
        frame = remember_trends(store, **options)
    if not frame.attrs.get("exact", True):
        click.echo("note: " + frame.attrs.get("reason", "history approximated from "
                                              "first/last remember times"), err=True)
    emit(frame, fmt)


@cli.command()
@click.option("--overlap", is_flag=True, help="Robot x robot shared memories instead.")
@scope_options
@output_options
@click.pass_context
def robots(ctx: click.Context, fmt: str, overlap: bool, **options: Any) -> None:
    """Per robot: memories, remembers, share of memories other robots have too."""
    from ..analysis.robots import robot_activity, robot_overlap

    with _open_store(ctx, init_schema=False) as store:
        frame = (robot_overlap if overlap else robot_activity)(store, **options)
    emit(frame, fmt)


@cli.command()
@click.argument("path", type=click.Path())
@click.option("--overwrite", is_flag=True, help="Replace an existing snapshot at PATH.")
@click.pass_context
def snapshot(ctx: click.Context, path: str, overwrite: bool) -> None:
    """Copy the memory into a snapshot that `htm-analytics report --snapshot PATH` reads.

    A PATH ending in .duckdb (or .db) becomes one DuckDB file; any other PATH a folder of
    Parquet files, one per table (`snapshot memory` writes the folder memory/, not
    memory.duckdb).
    """
    from ..store.snapshot import export_snapshot

    if path.strip() in ("", "-"):  # made a folder named "-", or took "" for "."
        raise click.BadParameter("a snapshot is a file or a folder: give its path",
                                 param_hint="PATH")
    if _path_exists(path, "PATH") and not overwrite:
        raise click.BadParameter(f"{path} exists; add --overwrite to replace it",
                                 param_hint="PATH")
    with _open_store(ctx, init_schema=False) as store:
        target = export_snapshot(store, path, overwrite=overwrite)
        emit(store.table_counts(), "table")
    kind = "a folder of Parquet files" if target.is_dir() else "a DuckDB file"
    click.echo(f"snapshot written to {target} ({kind}); report on it with: "
               f"htm-analytics report --snapshot {target}")


def _terminated(signum: int, _frame: Any) -> None:
    # As SystemExit, not the default death: the blocks that drop a command's scratch tables
    # and databases run (bench build, eval conversations), as they do on Ctrl-C.
    raise SystemExit(128 + signum)


def main() -> None:
    """Entry point: run the CLI, turning library errors into one clear line and exit code 1."""
    signal.signal(signal.SIGTERM, _terminated)
    try:
        code = cli(standalone_mode=False)  # a gate's ctx.exit(code) comes back as the value
        sys.stdout.flush()  # a full disk or a closed pipe fails here, not at exit
    except click.exceptions.Abort as exc:
        if exc.__cause__ is None:  # a question answered no (click turns Ctrl-C into Abort too)
            click.echo("not confirmed: nothing was changed", err=True)
            sys.exit(1)
        click.echo("interrupted", err=True)  # Ctrl-C
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:
        from ..errors import HTMError, ValidationError  # here: --help need not load the driver

        option = option_named(cli, sys.argv[1:], exc.field) \
            if isinstance(exc, ValidationError) else None
        if option is not None:  # bad input given with an option: a usage error, as click's
            message = str(exc).removeprefix(f"{getattr(exc, 'field', '')}: ")
            click.echo(f"Error: Invalid value for '{option}': {cli_words(message)}", err=True)
            sys.exit(2)
        if isinstance(exc, HTMError):  # before OSError: a connection error is both
            click.echo(f"Error: {cli_words(str(exc))}", err=True)
            sys.exit(1)
        if isinstance(exc, BrokenPipeError):  # the reader went away (`| head`): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        if isinstance(exc, OSError):  # the output could not be written (a full disk)
            where = f" ({exc.filename})" if exc.filename else ""
            click.echo(f"Error: could not write the output{where}: {exc.strerror or exc}",
                       err=True)
            sys.exit(1)
        raise
    if type(code) is int and code:  # not a command's True or None
        sys.exit(code)
