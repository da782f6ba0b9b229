"""Findings from the memory-hygiene checks (:func:`htm_analytics.memory_hygiene`) that call
for action: credentials (critical), personal data and near-duplicate groups (warnings),
memories a newer one may supersede (information: the heuristic needs a person's review)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._common import Context, finding

__all__ = ["hygiene_findings"]

_IDS_SHOWN = 50  # ids written into a statement; the rest are in the check's own output


def _id_list(ids: list[int]) -> str:
    """The first ids, each once, ascending, for an ``IN (...)`` list."""
    return ", ".join(str(i) for i in sorted({int(i) for i in ids})[:_IDS_SHOWN])


def _forget(context: Context, ids: list[int]) -> list[str]:
    """The statement that removes memories as this database's writers do."""
    if context.store.schema_info.soft_deletes:  # the current gem forgets softly
        return [f"UPDATE nodes SET deleted_at = now() WHERE id IN ({_id_list(ids)})"]
    return [f"DELETE FROM nodes WHERE id IN ({_id_list(ids)})"]


def hygiene_findings(context: Context, result: Any) -> Iterator[dict[str, str]]:
    """Advisor findings from a :class:`~htm_analytics.HygieneResult` (on a sample, each
    says so: its counts are the sampled memories')."""
    def sampled(checked: int) -> str:
        return (f" among {checked:,} sampled of {result.total:,} memories"
                if checked < result.total else "")

    found = result.details.get("sensitive")
    if found is not None and len(found):
        more = " (the first 50 ids)" if found["node_id"].nunique() > _IDS_SHOWN else ""
        for kind, severity in (("credential", "critical"), ("personal", "warning")):
            rows = found[(found["kind"] == "credential") == (kind == "credential")]
            if rows.empty:
                continue
            ids = rows["node_id"].unique().tolist()
            detectors = ", ".join(f"{n} {d}" for d, n in rows["detector"].value_counts()
                                  .items())
            yield finding(
                f"{kind}_in_memory", severity, "nodes",
                f"{len(ids):,} {'memory holds' if len(ids) == 1 else 'memories hold'} "
                f"{detectors}{sampled(result.checked)} (masked excerpts: htm-analytics "
                "hygiene sensitive)",
                ("Every robot can recall these. Rotate the credentials first, then forget "
                 "or redact the memories" if kind == "credential" else
                 "Check that this personal data may be kept; forget or redact what may not")
                + f"{more}.", _forget(context, ids))
    pairs = result.details.get("near_duplicates")
    if pairs is not None and len(pairs):
        clusters = pairs.drop_duplicates("cluster")
        extra = int((clusters["cluster_size"] - 1).sum())
        biggest = clusters.iloc[0]
        members = sorted(set(pairs.loc[pairs["cluster"] == biggest["cluster"], "node_a"])
                         | set(pairs.loc[pairs["cluster"] == biggest["cluster"], "node_b"]))
        yield finding(
            "near_duplicates", "warning" if extra >= 100 else "info", "nodes",
            f"{len(clusters):,} {'group' if len(clusters) == 1 else 'groups'} of "
            f"near-duplicate memories{sampled(result.duplicates_checked)}, {extra:,} more "
            f"{'memory' if extra == 1 else 'memories'} than groups; the biggest has "
            f"{int(biggest['cluster_size'])}",
            "Duplicates crowd search results and working memory with one fact said many "
            "times. Review the groups (htm-analytics hygiene duplicates) and merge or forget "
            "the extra copies; nothing is merged automatically.",
            [f"SELECT id, left(content, 120) FROM nodes WHERE id IN ({_id_list(members)}) "
             "ORDER BY id"])
    candidates = result.details.get("supersession")
    if candidates is not None and len(candidates):
        older = candidates["node_old"].unique().tolist()
        yield finding(
            "supersession_candidates", "info", "nodes",
            f"{len(candidates):,} {'pair' if len(candidates) == 1 else 'pairs'}"
            f"{sampled(result.checked)} where "
            "a newer memory on the same subject says something different from an older one "
            f"({len(older):,} older {'memory' if len(older) == 1 else 'memories'} may be "
            "outdated)",
            "Both are recalled, so a robot may act on the outdated one. Review the pairs "
            "(htm-analytics hygiene supersession: about half are real supersessions) and "
            "forget the older memory where the newer one holds; nothing is changed "
            "automatically.",
            [f"SELECT id, created_at, left(content, 120) FROM nodes WHERE id IN "
             f"({_id_list(older + candidates['node_new'].tolist())}) ORDER BY created_at"])
