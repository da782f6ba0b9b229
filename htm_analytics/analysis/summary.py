"""Every hygiene check at once: a summary table, the detailed frames, and what to do."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._docs import share_docs
from .._progress import validate_progress
from ..frames import scope_params
from ..store import LongTermMemory
from ..store.display import counted
from ._common import (
    live_store,
    share_text,
    validate_choices,
    validate_fraction,
    validate_sample,
    validate_seed,
)
from .hygiene import near_duplicates, validate_pair_choice
from .sensitive import kinds_found, sensitive_memories
from .supersession import supersession_candidates
from .worker_pool import validate_workers

__all__ = ["HYGIENE_CHECKS", "HygieneResult", "memory_hygiene"]

HYGIENE_CHECKS = ("near_duplicates", "sensitive", "supersession")
SUMMARY_COLUMNS = {"check": "string", "findings": "int64", "memories": "int64",
                   "checked": "int64", "share": "float64", "share_low": "float64",
                   "share_high": "float64", "what_it_means": "string", "what_to_do": "string"}


@dataclass
class HygieneResult:
    """What :func:`memory_hygiene` found: ``summary`` (one row per check, with the memories
    each checked), ``details`` (the check's own DataFrame by name), ``total`` (memories in
    scope), ``checked`` (memories the sensitive and supersession checks read: ``total``
    unless a sample was), ``duplicates_checked`` (those the near-duplicate check searched
    for) and ``seed`` (the sample's, None when every memory was checked)."""

    summary: pd.DataFrame
    details: dict[str, pd.DataFrame] = field(default_factory=dict)
    total: int = 0
    checked: int = 0
    seed: int | None = None
    duplicates_checked: int = 0

    @property
    def sampled(self) -> bool:
        """Whether a check read a sample rather than every memory in scope."""
        return min(self.checked, self.duplicates_checked) < self.total

    def describe_sample(self) -> str:
        """One sentence on what was checked ("checked 10,000 of 1,000,000 memories, chosen
        by seed 0 ...", or "every one of the N memories")."""
        if not self.total:
            return "No memory to check in this scope."
        if not self.sampled:
            return f"Checked every one of the {self.total:,} memories."
        if self.checked >= self.total:  # only the near-duplicate searches were sampled
            return (f"Checked every one of the {self.total:,} memories; near-duplicates on "
                    f"the first {self.duplicates_checked:,} of them, chosen by seed "
                    f"{self.seed} (the lowest hashes of their ids), each a search of the HNSW "
                    "index: that share is an estimate for the whole memory with a 95% "
                    "interval (Wilson), and its findings list those memories' only.")
        nested = ("" if self.duplicates_checked == self.checked else
                  f" (near-duplicates: the first {self.duplicates_checked:,} of them, each a "
                  "search of the HNSW index)")
        return (f"Checked {self.checked:,} of {self.total:,} memories{nested}, chosen by "
                f"seed {self.seed} (the lowest hashes of their ids): shares are estimates for "
                "the whole memory with a 95% interval (Wilson), and findings list the sampled "
                "memories' only.")


@share_docs
def memory_hygiene(store: LongTermMemory, *, checks: str | list[str] | None = None,
                   min_similarity: float = 0.95, robots: str | list[str] | None = None,
                   timeframe: Any = None, sample: int | None = None,
                   duplicates_sample: int | None = None, seed: int = 0,
                   pairs: str = "tree", progress: bool = False,
                   workers: int = 1) -> HygieneResult:
    """Run the chosen hygiene checks and sum them up.

    Parameters
    ----------
    store : LongTermMemory
        The live store; only read.
    checks : str or list of str, optional
        Among ``near_duplicates``, ``sensitive`` and ``supersession`` (all by default).
    min_similarity : float
        Passed to :func:`near_duplicates`, and to :func:`supersession_candidates` as the
        similarity from which a pair is a near-duplicate rather than a supersession.
    robots, timeframe : optional
        The scope, as for every check.
    sample : int, optional
        Check only this many memories in scope, the same ones for every check, chosen in
        the database by a hash of their id and ``seed`` (each check's ``sample``); shares
        are then estimates with a 95% interval. Every memory when None or when the scope
        holds no more.
    duplicates_sample : int, optional
        The near-duplicate check searches only the first this many of those memories (the
        lowest hashes: a sample of the sample), as each is a search of the HNSW index;
        ``sample`` by default.
    seed : int
        Chooses the sample.
    pairs : {"tree", "all"}
        The near-duplicate pairs kept in ``details`` and counted as that check's findings:
        per group the strongest pairs joining its members (``cluster_size - 1`` pairs, one
        per extra copy: memory in proportion to the memories found), or every pair (up to
        ``n(n-1)/2`` for a group of ``n``, all held in memory). Groups and memories are the
        same either way; see :func:`near_duplicates`.
    %(progress)s
        One bar per check that reads every memory.
    workers : int
        Processes for the sensitive-data detectors; see :func:`sensitive_memories`.

    Returns
    -------
    HygieneResult
        ``summary`` has ``check``, ``findings`` (pairs or findings: of the sampled memories
        with a sample), ``memories`` (memories checked that are involved), ``checked``
        (memories checked), ``share`` (memories / checked) and its 95% interval
        ``share_low``/``share_high`` (equal to ``share`` when every memory was checked;
        NaN when no memory was),
        ``what_it_means`` and ``what_to_do`` (strings); ``details`` the checks' DataFrames.
    """
    store = live_store(store)
    chosen = validate_choices(checks, HYGIENE_CHECKS, field="checks")
    min_similarity = validate_fraction(min_similarity, field="min_similarity")
    size, seed = validate_sample(sample), validate_seed(seed)
    duplicates = validate_sample(duplicates_sample, field="duplicates_sample")
    validate_pair_choice(pairs)
    validate_progress(progress)
    validate_workers(workers)
    total = _memories_in_scope(store, robots, timeframe)
    checked = total if size is None else min(size, total)
    searched = checked if duplicates is None else min(duplicates, checked)
    sampled = searched < total
    result = HygieneResult(pd.DataFrame(), total=total, checked=checked,
                           seed=seed if sampled else None, duplicates_checked=searched)
    options: dict[str, Any] = {"robots": robots, "timeframe": timeframe,
                               "sample": checked if checked < total else None, "seed": seed}
    rows = []
    # The supersession check is one statement of seconds, the others read every memory for
    # minutes: run first, it fails (at query_timeout, say) before they have been paid for.
    if "supersession" in chosen:
        candidates = supersession_candidates(
            store, max_similarity=max(min_similarity, 0.51), **options)
        result.details["supersession"] = candidates
        rows.append({
            "check": "supersession", "findings": len(candidates),
            "memories": len(set(candidates["node_old"]) | set(candidates["node_new"])),
            "what_it_means": (
                f"{len(candidates):,} pairs where a newer memory about the same subject (a shared "
                "specific tag, similar vectors) drops words of an older one: it may supersede "
                "it. About half such pairs are real supersessions on the labelled set "
                "(precision 0.54): review each.") if len(candidates) else
            "No newer memory seems to contradict an older one on the same subject.",
            "what_to_do": (
                "Review the pairs (htm-analytics hygiene supersession); where the newer one "
                "holds, forget the older or tag it as outdated. Nothing is merged or hidden "
                "automatically.") if len(candidates) else "Nothing to do."})
    if "near_duplicates" in chosen:
        found_pairs = near_duplicates(
            store, min_similarity=min_similarity, pairs=pairs, progress=progress,
            **{**options, "sample": searched if searched < total else None})
        result.details["near_duplicates"] = found_pairs
        memories = len(set(found_pairs["node_a"]) | set(found_pairs["node_b"]))
        clusters = found_pairs["cluster"].nunique()
        twins = int(found_pairs["text_twin"].sum())
        kept = "the strongest joining each group" if pairs == "tree" else "every pair"
        groups = (f"{len(found_pairs):,} pairs with a sampled memory (cosine >= "
                  f"{min_similarity:g})" if sampled else
                  f"{counted(clusters, 'group')} of memories saying nearly the same thing "
                  f"(cosine >= {min_similarity:g}); keeping one of each would leave "
                  f"{counted(memories - clusters, 'fewer memory', 'fewer memories')}")
        rows.append({
            "check": "near_duplicates", "findings": len(found_pairs), "memories": memories,
            "what_it_means": (
                f"{groups}. Of the {len(found_pairs):,} pairs kept ({kept}), {twins:,} "
                f"{'joins' if twins == 1 else 'join'} texts that differ only in case, spacing "
                "or punctuation (SHA-256 deduplication missed them)."),
            "what_to_do": (
                "Review the biggest clusters first; merge or delete the extra copies (HTM "
                "never merges by itself). Text twins are safe to merge: keep the older node "
                "and move its robots' links.") if len(found_pairs) else "Nothing to do."})
    if "sensitive" in chosen:
        found = sensitive_memories(store, progress=progress, workers=workers, **options)
        result.details["sensitive"] = found
        rows.append({
            "check": "sensitive", "findings": len(found), "memories": found["node_id"].nunique(),
            "what_it_means": f"{kinds_found(found['kind'])} found (masked excerpts)."
                             if len(found) else "No credential or personal data found.",
            "what_to_do": (
                "Rotate any credential found (it has been readable by every robot), then "
                "delete or redact those memories; check whether personal data may be kept "
                "(GDPR: erase what has no purpose).") if len(found) else "Nothing to do."})
    order = {check: i for i, check in enumerate(HYGIENE_CHECKS)}
    rows.sort(key=lambda row: order[str(row["check"])])
    result.details = dict(sorted(result.details.items(), key=lambda item: order[item[0]]))
    frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    frame["checked"] = result.total
    # no memory checked: no share (NaN, as wilson_interval gives), not 0%
    frame["share"] = frame["memories"] / result.total if result.total else math.nan
    frame["share_low"] = frame["share_high"] = frame["share"]
    result.summary = _estimated(frame, result).astype(SUMMARY_COLUMNS)
    return result


_ESTIMATED_SUBJECT = {
    "near_duplicates": "have a near-duplicate somewhere in the memory (each searched through "
                       "the HNSW index, which may miss a few)",
    "sensitive": "hold credentials or personal data",
    "supersession": "are in a pair where a newer memory may supersede an older one",
}


def _estimated(frame: pd.DataFrame, result: HygieneResult) -> pd.DataFrame:
    """The rows of the checks that read a sample: ``memories`` counts the sampled memories
    involved, their share estimates the whole memory's (95% Wilson interval), and
    ``what_it_means`` says so."""
    frame = frame.copy()
    for position, row in enumerate(frame.itertuples()):
        estimated = result.details[str(row.check)].attrs.get("sample")
        if estimated is None:  # every memory was checked
            continue
        involved, low, high = (estimated["involved"], estimated["share_low"],
                               estimated["share_high"])
        frame.loc[frame.index[position], ["memories", "checked", "share", "share_low",
                                          "share_high"]] = [
            involved, estimated["checked"], estimated["share"], low, high]
        estimate = (f"{involved:,} of the {estimated['checked']:,} sampled memories, "
                    f"{share_text(estimated['share'], low, high, digits=2)}, "
                    f"{_ESTIMATED_SUBJECT[str(row.check)]}: about {low * result.total:,.0f}-"
                    f"{high * result.total:,.0f} of the {result.total:,} memories.")
        if row.check == "near_duplicates":
            estimate += (" Groups and the copies they hold are not estimated from a sample "
                         "(htm-analytics hygiene duplicates compares every pair).")
        if row.check == "sensitive" and involved == 0:
            estimate += (" A sample cannot show that a rare credential is absent: "
                         "htm-analytics hygiene sensitive reads every memory.")
        frame.loc[frame.index[position], "what_it_means"] = (
            f"{estimate} In the sample: {row.what_it_means}")
    return frame


def _memories_in_scope(store: LongTermMemory, robots: Any, timeframe: Any) -> int:
    return store.count_in_scope(scope_params(timeframe=timeframe, robots=robots))

