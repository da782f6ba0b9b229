"""The report's "Memory hygiene" section: near-duplicates, sensitive memories and
supersession candidates."""

from __future__ import annotations

import pandas as pd

from ..analysis import HygieneResult, memory_hygiene, share_text
from ..analysis.sensitive import kinds_found
from ..store import LongTermMemory
from .render import Section, counted, shown_texts

__all__ = ["hygiene_section", "WORST_SHOWN", "REPORT_HYGIENE_SAMPLE", "REPORT_DUPLICATES_SAMPLE",
           "duplicates_sample"]

WORST_SHOWN = 10
"""Clusters and sensitive findings shown in the report (the data files have them all)."""

REPORT_HYGIENE_SAMPLE = 10_000
"""Memories the report's hygiene checks read on a larger memory (a seeded sample, stated in
the section), so that the report's time does not grow with the memory; ``htm-analytics
hygiene`` checks every memory."""

REPORT_DUPLICATES_SAMPLE = 1_000
"""Of those, the memories the near-duplicate check searches for: each is a search of the
HNSW index (milliseconds, more as the index outgrows memory), where the other checks take a
fraction of a millisecond per memory."""


def duplicates_sample(store: LongTermMemory, sample: int | None) -> int | None:
    """The memories the near-duplicate check searches when the hygiene checks read
    ``sample``: :data:`REPORT_DUPLICATES_SAMPLE` once the memory is sampled (holds more),
    else None, every memory, so that a memory within the sample gets what ``advise``
    finds."""
    if sample is None or store.count_in_scope(None) <= sample:
        return None
    return REPORT_DUPLICATES_SAMPLE


def _headline(result: HygieneResult) -> str:
    """The section's key finding: counts, or estimated shares when a sample was checked."""
    summary = result.summary.set_index("check")
    pairs, found = result.details["near_duplicates"], result.details["sensitive"]
    superseding = result.details["supersession"]
    kinds = f" ({kinds_found(found['kind'])})" if len(found) else ""
    if result.sampled:
        def share(check: str) -> str:  # an estimate with its interval, or what was counted
            row = summary.loc[check]
            if row["checked"] >= result.total:
                return f"{row['share']:.1%}"
            return "an estimated " + share_text(row["share"], row["share_low"],
                                                row["share_high"])
        nested = ("" if result.duplicates_checked == result.checked else
                  f", near-duplicates on {result.duplicates_checked:,} of them")
        scope = (f"on all {result.total:,} memories" if result.checked >= result.total else
                 f"on a sample of {result.checked:,} of {result.total:,} memories")
        return (f"Hygiene, {scope} (seed {result.seed}{nested}): "
                f"{share('near_duplicates')} of memories "
                f"have a near-duplicate; {share('sensitive')} hold credentials or personal "
                f"data{kinds}; {share('supersession')} are in a pair where a newer memory "
                "may supersede an older one (for review).")
    involved = len(set(pairs["node_a"]) | set(pairs["node_b"]))
    holding = found["node_id"].nunique()
    return (f"Hygiene: {counted(pairs['cluster'].nunique(), 'group')} of near-duplicate "
            f"memories ({counted(involved, 'memory', 'memories')}, "
            f"{involved / max(result.total, 1):.1%} of {result.total:,}); "
            f"{counted(holding, 'memory', 'memories')} "
            f"{'holds' if holding == 1 else 'hold'} credentials or personal data{kinds}. "
            f"{counted(len(superseding), 'pair')} where a newer memory may supersede an "
            "older one (for review).")


def hygiene_section(store: LongTermMemory, *, min_similarity: float = 0.95,
                    sample: int | None = None, duplicates_sample: int | None = None,
                    seed: int = 0, workers: int = 1) -> tuple[Section, HygieneResult]:
    """Counts, the worst examples and what to do, from :func:`memory_hygiene` (on a seeded
    sample of ``sample`` memories when the memory holds more, near-duplicates on the first
    ``duplicates_sample`` of them, as the section says; the detectors in ``workers``
    processes)."""
    result = memory_hygiene(store, min_similarity=min_similarity, sample=sample,
                            duplicates_sample=duplicates_sample, seed=seed, workers=workers)
    pairs, found = result.details["near_duplicates"], result.details["sensitive"]
    superseding = result.details["supersession"]
    # The texts shown, and kept with the report's data, masked as the excerpts are.
    pairs = shown_texts(pairs, "content_a", "content_b")
    superseding = shown_texts(superseding, "content_old", "content_new")
    worst = pairs.drop_duplicates("cluster").head(WORST_SHOWN)[
        ["cluster", "cluster_size", "similarity", "node_a", "node_b", "content_a",
         "content_b"]]
    by_kind = found.groupby(["kind", "detector"]).agg(
        findings=("node_id", "size"), memories=("node_id", "nunique")).reset_index() \
        if len(found) else pd.DataFrame(columns=["kind", "detector", "findings", "memories"])
    how = ("each sampled memory's vector searched through the HNSW index for its nearest "
           "memories anywhere in the memory" if result.sampled else
           "tiled comparison of every pair of vectors of one model")
    text = (f"What is wrong with the memory's content (htm-analytics hygiene; read-only). "
            f"{result.describe_sample()} "
            "Near-duplicates: pairs whose stored vectors reach cosine similarity "
            f"{min_similarity:g} ({how}), plus texts equal once case, spacing and punctuation "
            "are ignored, which SHA-256 deduplication misses. Sensitive: credentials by "
            "detect-secrets' plugins, e-mail addresses, phone numbers, Luhn-valid card numbers "
            "and IBANs; excerpts are masked and the matched text is never shown.")
    for row in result.summary.itertuples():
        text += f"\n\n{row.check}: {row.what_it_means} {row.what_to_do}"
    columns = ["check", "findings", "memories", "share"] + (
        ["checked", "share_low", "share_high"] if result.sampled else [])
    of = " (pairs of the sampled memories)" if result.sampled else ""
    section = Section(
        "hygiene", "Memory hygiene", text=text, findings=[_headline(result)],
        tables=[("Hygiene checks", result.summary[columns]),
                (f"The {WORST_SHOWN} biggest groups of near-duplicates{of} (one pair each)",
                 worst),
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
