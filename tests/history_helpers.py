"""What the history tests share: a sample collected through a read-only store, and the
statements of a finding's SQL."""

from __future__ import annotations

from htm_analytics import LongTermMemory
from htm_analytics.advisor import split_statements
from htm_analytics.advisor.collect import collect_sample


def finding_statements(text: str) -> list[str]:
    """The statements of a finding's ``sql``, without their semicolons."""
    return [statement.rstrip(";") for statement in split_statements(text)]


def collect_read_only(url: str, path) -> dict:
    """A sample of the memory at ``url``, read through a read-only store, added to the
    history at ``path`` (40 recall queries)."""
    with LongTermMemory(url, read_only=True) as store:
        return collect_sample(store, path, recall_queries=40)
