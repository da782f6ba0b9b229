"""``htm-analytics collect`` (one sample of the memory's vital signs into its history, and
``--check`` for drift) and ``htm-analytics history`` (the history's frames and plots)."""

from __future__ import annotations

import os
from typing import Any

import click

from ..errors import ValidationError
from ._app import cli, fail_on_option, print_findings
from ._database import choose_database, open_store
from ._output import (
    CHART_SUFFIXES,
    checked_output,
    emit,
    emit_document,
    output_options,
    refuse_unused,
)

__all__ = ["collect", "history_command"]

_DEFAULT_HISTORY = "htm-history.duckdb"
# What fits a terminal line.
_TABLE_COLUMNS = {
    "samples": ["sample_id", "collected_at", "ef_search", "recall", "statements_available",
                "counters_reset", "entries_evicted"],
    "growth": ["sample_id", "table_name", "row_count", "table_bytes", "index_bytes"],
    "indexes": ["sample_id", "index_name", "idx_scan", "idx_tup_read", "counters_reset"],
    "recall": ["sample_id", "collected_at", "ef_search", "recall", "recall_low",
               "recall_high", "baseline", "logged_recall", "logged_queries"],
}


def history_option(command: Any) -> Any:
    command = click.option(
        "--history-db", metavar="URL", default=None,
        help="With --history-schema: the database holding it [default: the memory's].")(
        command)
    command = click.option(
        "--history-schema", metavar="NAME", default=None,
        help="Keep the history in tables of this PostgreSQL schema instead of a file "
             "(created by the first collect; the memory's tables are never written).")(command)
    command = click.option(
        "--history-format", type=click.Choice(["duckdb", "parquet"]), default=None,
        help="duckdb: one file; parquet: a folder of Parquet files [default: parquet for a "
             "folder or a path ending with /, else duckdb].")(command)
    return click.option(
        "--history", "history_path", type=click.Path(),
        default=lambda: os.environ.get("HTM_HISTORY", _DEFAULT_HISTORY),
        show_default=f"HTM_HISTORY, else {_DEFAULT_HISTORY}",
        help="The history: a DuckDB file, or a folder of Parquet files (created by the "
             "first collect).")(command)


def _target(ctx: click.Context, path: str, history_format: str | None, schema: str | None,
            url: str | None) -> Any:
    """The history's DuckDB file or Parquet folder, or its schema (HistoryTable) when
    --history-schema."""
    from ..store.history import HistoryTable, history_location

    if schema is None:
        refuse_unused(ctx, {"history_db": "--history-db"}, "without --history-schema")
        return history_location(path, history_format)
    refuse_unused(ctx, {"history_path": "--history", "history_format": "--history-format"},
                  "with --history-schema (the history is in that schema)")
    return HistoryTable(url or choose_database(ctx)[0], schema)


def drift_options(command: Any) -> Any:
    command = click.option("--unused-samples", type=click.IntRange(1), default=7,
                           show_default=True,
                           help="Periods without a scan that make an index unused.")(command)
    return click.option("--baseline", type=click.IntRange(1), default=None,
                        help="The approved sample_id recall is compared with "
                             "[default: the first].")(command)


def _thresholds(unused_samples: int, baseline: int | None) -> Any:
    from ..advisor import DriftThresholds

    return DriftThresholds(unused_samples=unused_samples, baseline_sample=baseline)


def _missing(value: Any) -> bool:
    return value is None or value != value  # None or NaN


def _recall_text(row: Any, prefix: str) -> str:
    """The sampled recall of a sample's row, on stored vectors or on logged queries."""
    value = row[f"{prefix}recall"]
    if not _missing(value):
        what = "stored vectors" if not prefix else "logged queries"
        return (f"recall@10 {value:.3f} ({row[f'{prefix}recall_low']:.3f}-"
                f"{row[f'{prefix}recall_high']:.3f}, {row[f'{prefix}recall_queries']} "
                f"{what}) at ef_search {row['ef_search']}")
    if not prefix:
        return f"no sampled recall ({row['recall_k']} or fewer stored vectors)"
    if _missing(row["logged_queries"]):
        return "no logged queries (no query log here: htm-analytics init-db installs it)"
    if not row["logged_queries"]:
        return "no logged queries (none in the log of the stored vectors' dimension)"
    return f"{row['logged_queries']} logged queries, not searched either"


@cli.command()
@history_option
@click.option("--recall-queries", type=click.IntRange(1), default=200, show_default=True,
              help="Stored vectors (and logged query vectors, where the memory logs them) "
                   "searched for the sampled recall@10.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Which stored vectors the recall searches (keep it between runs).")
@click.option("--check", is_flag=True,
              help="Then check the history for drift, as findings (exit codes as advise: "
                   "with --check alone, --fail-on warning).")
@fail_on_option
@drift_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
def collect(ctx: click.Context, history_path: str, history_format: str | None,
            history_schema: str | None, history_db: str | None, recall_queries: int,
            seed: int, check: bool, fail_on: str | None, unused_samples: int,
            baseline: int | None, as_json: bool) -> None:
    """Append one sample of the memory's vital signs to its history (reads the memory only).

    Row counts per table and robot, sizes and usage counters of every table and index, top
    statements (pg_stat_statements), hnsw.ef_search and the sampled recall@10 at it, on
    stored vectors and on logged query vectors. Run it from cron; see docs/history.md.
    """
    from ..advisor import collect_sample, drift_findings, findings_document, gate_exit_code
    from ..advisor import history as read_history

    if not check:
        refuse_unused(ctx, {"fail_on": "--fail-on", "unused_samples": "--unused-samples",
                            "baseline": "--baseline"}, "without --check")
    target = _target(ctx, history_path, history_format, history_schema, history_db)
    if baseline is not None:
        # Checked before the sample is written: a cron job given a wrong baseline added a
        # sample at every run it failed.
        try:
            read_history(target, thresholds=_thresholds(unused_samples, baseline))
        except ValidationError as exc:
            raise click.BadParameter(str(exc).split(": ", 1)[-1],
                                     param_hint="--baseline") from None
    with open_store(ctx, init_schema=False, read_only=True) as store:
        sample = collect_sample(store, target, recall_queries=recall_queries, seed=seed)
        url = store.url
    history_path = str(target)
    row = sample["samples"].iloc[0]
    counted = sample["sample_tables"].set_index("table_name")["row_count"].get("nodes")
    nodes = None if counted is None or _missing(counted) else int(counted)  # JSON: a number
    recall = f"{_recall_text(row, '')}; {_recall_text(row, 'logged_')}"
    summary = {"history": history_path, "sample_id": int(row["sample_id"]), "memories": nodes,
               "indexes": len(sample["sample_indexes"]), "recall": recall}
    written = (f"sample {summary['sample_id']} written to {history_path}: {nodes} memories, "
               f"{summary['indexes']} indexes, {recall}")
    if not check:
        if as_json:
            emit_document({**summary, "sample": sample})
        else:
            click.echo(written)
        return
    fail_on = fail_on or "warning"
    thresholds = _thresholds(unused_samples, baseline)
    findings = drift_findings(read_history(target, thresholds=thresholds), thresholds)
    code = gate_exit_code(findings["severity"], fail_on)
    if as_json:
        emit_document(findings_document(findings, kind="collect", database=url,
                                        fail_on=fail_on, sample=summary))
    else:
        print_findings(findings, f"{written}\ndrift since the baseline:")
    ctx.exit(code)


@cli.command("history")
@history_option
@click.option("--what", type=click.Choice(["samples", "growth", "indexes", "recall", "robots",
                                           "statements", "drift"]),
              default="samples", show_default=True, help="Which frame to print.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also write growth, index usage and recall over time to this image "
                   "(.png, .svg or .pdf).")
@drift_options
@output_options
@click.pass_context
def history_command(ctx: click.Context, history_path: str, history_format: str | None,
                    history_schema: str | None, history_db: str | None, what: str,
                    plot_path: str | None, unused_samples: int, baseline: int | None,
                    fmt: str) -> None:
    """Print a history written by collect: samples, growth, index usage per period, recall
    over time against its baseline, or the drift findings."""
    from ..advisor import drift_findings
    from ..advisor import history as read_history

    if plot_path:
        checked_output(plot_path, "--plot", suffixes=CHART_SUFFIXES)
    if what != "drift":
        refuse_unused(ctx, {"unused_samples": "--unused-samples"}, f"with --what {what}")
    if what not in ("drift", "recall") and not plot_path:  # the plot draws recall too
        refuse_unused(ctx, {"baseline": "--baseline"}, f"with --what {what}")
    thresholds = _thresholds(unused_samples, baseline)
    frames = read_history(_target(ctx, history_path, history_format, history_schema,
                                  history_db), thresholds=thresholds)
    shown = {"samples": frames.samples, "growth": frames.growth,
             "indexes": frames.index_usage, "recall": frames.recall, "robots": frames.robots,
             "statements": frames.statements}.get(what)
    if shown is None:
        shown = drift_findings(frames, thresholds)
    elif fmt == "table" and what in _TABLE_COLUMNS:  # --csv and --json keep every column
        shown = shown[_TABLE_COLUMNS[what]]
    emit(shown, fmt)
    if plot_path:
        import matplotlib.pyplot as plt

        from ..advisor import plot_growth, plot_history_index_usage, plot_recall_history

        figure, axes = plt.subplots(3, 1, figsize=(8, 10), layout="constrained")
        plot_growth(frames.growth, ax=axes[0])
        plot_history_index_usage(frames.index_usage, ax=axes[1])
        plot_recall_history(frames.recall, ax=axes[2])
        figure.savefig(plot_path)
        plt.close(figure)
        click.echo(f"plots written to {plot_path}", err=True)
