"""The advisor as a gate: exit codes by severity, and findings as one versioned document.

``htm-analytics advise --fail-on`` and ``htm-analytics collect --check`` both end with
:func:`gate_exit_code` and print :func:`findings_document` under ``--json``, so CI jobs and
cron scripts read one format and one set of exit codes from either.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._common import FINDING_COLUMNS, SEVERITIES, split_statements

__all__ = ["FINDINGS_SCHEMA_VERSION", "GATE_EXIT_CODES", "gate_exit_code",
           "findings_document"]

# Bumped when a field is removed or changes meaning; new fields keep the version.
FINDINGS_SCHEMA_VERSION = 1
# 1 is a command that failed and 2 a usage error (click's), so the gate uses 3 and 4.
GATE_EXIT_CODES = {"pass": 0, "warning": 3, "critical": 4}


def gate_exit_code(severities: pd.Series | list[str], fail_on: str | None) -> int:
    """The exit code of a gate on findings of these severities.

    Parameters
    ----------
    severities : Series or list of str
        The ``severity`` of each finding.
    fail_on : {"warning", "critical"} or None
        The least severity that fails; None never fails.

    Returns
    -------
    int
        0 when no finding is at least ``fail_on``; else 4 when one is critical, 3 when the
        worst is a warning.

    Raises
    ------
    ValidationError
        For a ``fail_on`` not listed above, or ``severities`` that are not a list of
        ``critical``, ``warning`` and ``info`` (a gate that skipped an unknown or missing
        severity, or read the letters of one string, would pass a critical finding).
    """
    if fail_on is not None and (not isinstance(fail_on, str)
                                or fail_on not in ("warning", "critical")):
        raise ValidationError(f"must be 'warning' or 'critical', not {fail_on!r:.60}",
                              field="fail_on")
    present = _severities(severities)
    if fail_on is None:
        return GATE_EXIT_CODES["pass"]
    if "critical" in present:
        return GATE_EXIT_CODES["critical"]
    if fail_on == "warning" and "warning" in present:
        return GATE_EXIT_CODES["warning"]
    return GATE_EXIT_CODES["pass"]


def _severities(severities: Any) -> set[str]:
    """The distinct severities of a list of them, each one of :data:`SEVERITIES`."""
    if isinstance(severities, (str, bytes)) or not isinstance(
            severities, (pd.Series, np.ndarray, list, tuple)):
        raise ValidationError("must be a list or Series of severities, got "
                              f"{type(severities).__name__}", field="severities")
    values: Iterable[Any] = severities.astype(object) if isinstance(severities, pd.Series) \
        else np.asarray(severities, dtype=object).ravel()
    present = set()
    for value in values:
        if not isinstance(value, str) or value not in SEVERITIES:
            raise ValidationError(f"must each be one of {', '.join(SEVERITIES)}, got "
                                  f"{value!r:.60}", field="severities")
        present.add(str(value))
    return present


# The document's own fields, which ``extra`` may not replace.
_DOCUMENT_FIELDS = frozenset({"schema_version", "kind", "generated_at", "database", "fail_on",
                              "exit_code", "counts", "findings"})


def findings_document(findings: pd.DataFrame, *, kind: str, database: str,
                      fail_on: str | None = None, **extra: Any) -> dict[str, Any]:
    """Findings as one JSON-ready document with a stable, versioned schema.

    Parameters
    ----------
    findings : DataFrame
        Rows with ``check``, ``severity``, ``object``, ``evidence``, ``recommendation`` and
        ``sql`` (as :func:`~htm_analytics.advise` returns).
    kind : str
        What produced them (``"advise"``, ``"collect"``): the document's ``kind``.
    database : str
        The database checked, its password masked.
    fail_on : {"warning", "critical"} or None
        The gate applied; ``exit_code`` is what it gives.
    **extra
        More top-level fields (JSON-ready values).

    Returns
    -------
    dict
        ``schema_version``, ``kind``, ``generated_at`` (ISO 8601, UTC), ``database``,
        ``fail_on``, ``exit_code``, ``counts`` (findings per severity, every severity
        present), ``findings`` (objects with the frame's columns and ``statements``: the
        ``sql`` split into statements to run one at a time), then ``extra``.
    """
    if not isinstance(findings, pd.DataFrame):
        raise ValidationError(f"must be a DataFrame of findings, got {type(findings).__name__}",
                              field="findings")
    missing = [column for column in FINDING_COLUMNS if column not in findings.columns]
    if missing:
        raise ValidationError(f"has no column {', '.join(missing)}", field="findings")
    for name, value in (("kind", kind), ("database", database)):
        if not isinstance(value, str):
            raise ValidationError(f"must be a string, got {type(value).__name__}", field=name)
    clashes = sorted(_DOCUMENT_FIELDS & set(extra))
    if clashes:  # an extra exit_code would contradict the gate's
        raise ValidationError(f"{', '.join(clashes)} is a field of the document itself",
                              field=clashes[0])
    exit_code = gate_exit_code(findings["severity"], fail_on)
    rows = []
    for row in findings.to_dict("records"):
        record: dict[str, Any] = {str(column): (None if pd.isna(value) else str(value))
                  for column, value in row.items()}
        record["statements"] = split_statements(record.get("sql") or "")
        rows.append(record)
    counts = {severity: int((findings["severity"] == severity).sum()) if len(findings)
              else 0 for severity in SEVERITIES}
    return {"schema_version": FINDINGS_SCHEMA_VERSION, "kind": kind,
            "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "database": database, "fail_on": fail_on, "exit_code": exit_code,
            "counts": counts, "findings": rows, **extra}
