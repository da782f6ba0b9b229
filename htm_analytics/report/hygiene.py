"""The report's "Memory hygiene" section: near-duplicates, sensitive memories and
supersession candidates."""

from __future__ import annotations

import pandas as pd

from ..analysis import HygieneResult, memory_hygiene
from ..store import LongTermMemory
from .render import Section, counted

__all__ = ["hygiene_section", "WORST_SHOWN"]

WORST_SHOWN = 10
"""Clusters and sensitive findings shown in the report (the data files have them all)."""


def hygiene_section(store: LongTermMemory, *,
                    min_similarity: float = 0.95) -> tuple[Section, HygieneResult]:
    """Counts, the worst examples and what to do, from :func:`memory_hygiene`."""
    result = memory_hygiene(store, min_similarity=min_similarity)
    summary = result.summary
    duplicates = summary[summary["check"] == "near_duplicates"]
    involved = int(duplicates["memories"].sum())
    share = involved / max(result.total, 1)
    pairs, found = result.details["near_duplicates"], result.details["sensitive"]
    superseding = result.details["supersession"]
    clusters = pairs["cluster"].nunique()
    holding = found["node_id"].nunique()
    headline = [
        f"Hygiene: {counted(clusters, 'group')} of near-duplicate memories "
        f"({counted(involved, 'memory', 'memories')}, {share:.1%} of {result.total:,}); "
        f"{counted(holding, 'memory', 'memories')} "
        f"{'holds' if holding == 1 else 'hold'} credentials or personal data"
        + (f" ({', '.join(f'{n} {k}' for k, n in found['kind'].value_counts().items())})."
           if len(found) else ".")
        + f" {counted(len(superseding), 'pair')} where a newer memory may supersede an "
          "older one (for review)."]
    worst = pairs.drop_duplicates("cluster").head(WORST_SHOWN)[
        ["cluster", "cluster_size", "similarity", "node_a", "node_b", "content_a",
         "content_b"]]
    by_kind = found.groupby(["kind", "detector"]).agg(
        findings=("node_id", "size"), memories=("node_id", "nunique")).reset_index() \
        if len(found) else pd.DataFrame(columns=["kind", "detector", "findings", "memories"])
    text = ("What is wrong with the memory's content (htm-analytics hygiene; read-only). "
            "Near-duplicates: pairs whose stored vectors reach cosine similarity "
            f"{min_similarity:g}, found exactly (tiled comparison of every pair of vectors "
            "of one model), plus texts equal once case, spacing and punctuation are ignored, "
            "which SHA-256 deduplication misses. Sensitive: credentials by detect-secrets' "
            "plugins, e-mail addresses, phone numbers, Luhn-valid card numbers and IBANs; "
            "excerpts are masked and the matched text is never shown.")
    for row in result.summary.itertuples():
        text += f"\n\n{row.check}: {row.what_it_means} {row.what_to_do}"
    section = Section(
        "hygiene", "Memory hygiene", text=text, findings=headline,
        tables=[("Hygiene checks", result.summary[["check", "findings", "memories", "share"]]),
                (f"The {WORST_SHOWN} biggest groups of near-duplicates (one pair each)", worst),
                ("Sensitive findings by kind", by_kind),
                (f"The first {WORST_SHOWN} sensitive findings (masked)",
                 found.head(WORST_SHOWN)[["node_id", "kind", "detector", "excerpt"]]),
                (f"The {WORST_SHOWN} most similar supersession candidates (older, newer)",
                 superseding.head(WORST_SHOWN)[
                     ["node_old", "node_new", "created_old", "created_new", "shared_tags",
                      "similarity", "content_old", "content_new"]])],
        data={"summary": result.summary, "near_duplicates": pairs, "sensitive": found,
              "supersession": superseding})
    return section, result
