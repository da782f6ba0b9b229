"""Shared parts of the advisor: thresholds, the finding record, quoting and formatting."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pandas as pd

from .._sql import read_sql
from ..store import CURSOR_PREFIX, STATEMENT_MARKER, LongTermMemory, quote_identifier, quote_literal
from ..validation import validate_number

__all__ = ["SEVERITIES", "FINDING_COLUMNS", "RECALL_COLUMNS", "TOOLKIT_CURSOR",
           "AdvisorThresholds", "regclass",
           "split_statements", "toolkit_statements"]

SEVERITIES = ("critical", "warning", "info")
FINDING_COLUMNS = {"check": "string", "severity": "string", "object": "string",
                   "evidence": "string", "recommendation": "string", "sql": "string"}
# Columns every recall (track_access, working-memory flags) rewrites on nodes.
RECALL_COLUMNS = ("access_count", "last_accessed", "in_working_memory")
# This toolkit's own statements in pg_stat_statements (store/tracing.py) carry its marker, or
# FETCH from one of its cursors, whose names pg_stat_statements shows quoted.
TOOLKIT_CURSOR = f'"{CURSOR_PREFIX}'


def toolkit_statements(queries: pd.Series) -> pd.Series:
    """Whether each statement's text is one of this toolkit's own (the rule of the advisor's
    ``slow_queries.sql``)."""
    text = queries.astype("string").fillna("")
    return (text.str.contains(STATEMENT_MARKER, regex=False)
            | text.str.contains(TOOLKIT_CURSOR, regex=False)).astype(bool)


@dataclass(frozen=True)
class AdvisorThresholds:
    """When a check reports. Defaults are PgHero's where it has one.

    Attributes
    ----------
    unused_max_scans : int
        An index scanned at most this often since the statistics began is unused.
    unused_min_bytes : int
        Smaller unused indexes are not reported.
    min_statistics_days : float
        Statistics younger than this make "unused" a question (severity info), not advice.
    seq_scan_min_rows : int
        Tables smaller than this are fine to scan sequentially (PgHero: 10,000).
    seq_scan_max_share : float
        Report a big table when more than this share of its scans are sequential (0.05).
    cache_hit_min : float
        Report when fewer block reads than this come from shared buffers (0.99).
    cache_min_blocks : int
        Block reads needed before the ratio means anything.
    dead_min_rows : int
        Dead rows needed to report a table.
    dead_min_fraction : float
        Dead share of rows needed to report a table.
    xid_min_left : int
        Report a table with fewer transactions left before wraparound (10 million).
    sequence_max_fraction : float
        Report a sequence past this share of its column's maximum (0.9).
    long_query_seconds : float
        Report statements running longer (60).
    idle_transaction_seconds : float
        Report sessions idle inside a transaction longer (60).
    slow_query_ms, slow_query_calls : float, int
        pg_stat_statements: mean time and calls needed to report a statement (20 ms, 100).
    hot_min_updates : int
        Updates of nodes needed before the HOT share is judged.
    hot_min_fraction : float
        Report nodes when fewer of its updates are HOT.
    hnsw_min_cached_fraction : float
        With pg_buffercache: report an HNSW index with less of it in shared buffers.

    Raises
    ------
    ValidationError
        Naming the attribute, for a value that is not a finite number (an integer where the
        attribute is one), is negative, or is a share above 1.
    """

    unused_max_scans: int = 0
    unused_min_bytes: int = 0
    min_statistics_days: float = 7.0
    seq_scan_min_rows: int = 10_000
    seq_scan_max_share: float = 0.05
    cache_hit_min: float = 0.99
    cache_min_blocks: int = 1_000
    dead_min_rows: int = 1_000
    dead_min_fraction: float = 0.2
    xid_min_left: int = 10_000_000
    sequence_max_fraction: float = 0.9
    long_query_seconds: float = 60.0
    idle_transaction_seconds: float = 60.0
    slow_query_ms: float = 20.0
    slow_query_calls: int = 100
    hot_min_updates: int = 100
    hot_min_fraction: float = 0.5
    hnsw_min_cached_fraction: float = 0.5

    def __post_init__(self) -> None:
        # Checked here, naming the attribute: a string fails later with a TypeError or a
        # driver error, and a NaN makes every comparison false (NaN days of statistics
        # turned "unused?" into a list of DROPs).
        for spec in fields(self):
            checked = validate_number(
                getattr(self, spec.name), field=spec.name, minimum=0,
                integer=spec.type == "int", maximum=1 if spec.name in _FRACTIONS else None)
            object.__setattr__(self, spec.name, checked)


# Thresholds that are shares, from 0 to 1.
_FRACTIONS = frozenset({"seq_scan_max_share", "cache_hit_min", "dead_min_fraction",
                        "sequence_max_fraction", "hot_min_fraction",
                        "hnsw_min_cached_fraction"})


def query_text(name: str) -> str:
    return read_sql("advisor", f"{name}.sql")


def size_text(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TB"  # pragma: no cover


def age_text(seconds: float) -> str:
    if seconds < 120:
        return "1 second" if round(seconds) == 1 else f"{seconds:.0f} seconds"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 86400:.0f} days"


def regclass(schema: str, name: str) -> str:
    """An expression for the relation ``schema.name`` as a ``regclass``, on one line (the
    text form of a regclass reads no ``U&`` escapes, hence quote_ident on the server)."""
    quoted = quote_identifier(schema, name)
    if 'U&"' not in quoted:  # no escaped control character (else, rarely, the long form)
        return f"{quote_literal(quoted)}::regclass"
    return (f"(quote_ident({quote_literal(schema)}) || '.' || "
            f"quote_ident({quote_literal(name)}))::regclass")


def split_statements(text: str) -> list[str]:
    """The statements of a finding's ``sql``, to run one at a time."""
    return [part.strip() for part in text.split(";\n") if part.strip().rstrip(";")]


def finding(check: str, severity: str, obj: str, evidence: str, recommendation: str,
             statements: list[str]) -> dict[str, str]:
    return {"check": check, "severity": severity, "object": obj, "evidence": evidence,
            "recommendation": recommendation, "sql": ";\n".join(statements) + ";"}


@dataclass
class Context:
    store: LongTermMemory
    limits: AdvisorThresholds
    indexes: pd.DataFrame
    tables: pd.DataFrame
    statistics_since: pd.Timestamp | None
    statistics_seconds: float | None
    flagged: set[tuple[str, str]]  # (schema, index) named by a more specific finding
