"""Near-duplicate memories: pairs of memories that say the same thing twice.

SHA-256 deduplication stores one node per exact text; it misses the same text with another
case, spacing or punctuation, and paraphrases. :func:`near_duplicates` finds both:

- **vectors**, per embedding model: every pair whose exact cosine similarity reaches the
  threshold. The stored vectors stream from the store in batches; each batch is compared
  with itself and with the batches before it by matrix products in tiles (float32, with the
  pairs within 1e-4 of the threshold recomputed in float64), so the result is that of a
  brute-force computation (measured in ``benchmarks/bench_hygiene.py``) while only one tile
  of similarities, and at most 512 MiB of vectors (more are read again in further passes),
  are held at a time;
- **text**, for memories without a vector: pg_trgm similarity of their text to every memory
  in scope (the trigram index pre-filters);
- **text twins**: texts equal once Unicode-normalised (NFKC), case-folded and stripped of
  punctuation and repeated white space, whatever their vectors say.

Pairs are joined into connected groups (``cluster``): a memory repeated five times is one
cluster of five.

With ``sample=``, only a seeded sample of memories is checked, each against the whole memory:
its own vector searched through the HNSW index (and, without a vector, its text through the
trigram index). That answers "does this memory have a near-duplicate anywhere?" for each
sampled memory, so the share of memories that do is estimated with an interval; the groups
and how many copies they hold are not (a group is seen only through its sampled members).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from .._docs import share_docs
from .._progress import Progress, progress_bar, validate_progress
from ..errors import ValidationError
from ..frames import scope_params
from ..store import LongTermMemory
from ..store.display import model_label
from ._common import MemorySample, draw_sample, live_store, shorten_text, validate_fraction
from .pair_graph import PairCollector, pair_clusters

__all__ = ["NEAR_DUPLICATE_COLUMNS", "PAIR_CHOICES", "model_groups", "near_duplicates",
           "normalise_text", "pair_clusters", "validate_pair_choice"]

NEAR_DUPLICATE_COLUMNS = {
    "cluster": "int64", "cluster_size": "int64", "node_a": "int64", "node_b": "int64",
    "similarity": "float64", "basis": "string", "text_twin": "bool", "model": "string",
    "content_a": "string", "content_b": "string", "robots_a": "string", "robots_b": "string",
}
PAIR_CHOICES = ("tree", "all")
"""What :func:`near_duplicates` returns of each cluster: the strongest pairs that join its
members (a maximum spanning tree), or every pair."""
_BATCH_ROWS = 4_096  # vectors per batch from the store, and rows per tile
_RECHECK_MARGIN = 1e-4  # float32 dot products are recomputed in float64 this close
_SKETCH_DIMENSIONS = 32  # principal coordinates kept in a sketch (see vector_pairs)
# Vectors (and their sketches) held by the full comparison: past this, it reads again.
_HELD_VECTOR_BYTES = 512 * 1024**2
_NOT_WORD = re.compile(r"[\W_]+")  # anything but letters and digits
SAMPLE_NEIGHBOURS = 10
"""Neighbours searched per sampled memory (the memory itself among them): a sampled memory
shows at most 9 near-duplicates."""
SAMPLE_EF_SEARCH = 100
"""``hnsw.ef_search`` of those searches (recall's own depth)."""


def normalise_text(text: str) -> str:
    """``text`` as the text-twin check compares it: NFKC, case-folded, letters and digits
    only, words separated by one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NOT_WORD.sub(" ", folded).split())


def model_groups(store: LongTermMemory, scope: dict[str, Any]) -> list[dict[str, Any]]:
    """The sets of vectors that are compared with each other.

    One per model and dimension. Vectors stored without a model's name are compared with the
    named model of their dimension when there is exactly one (as searches accept them), and
    among themselves otherwise.
    """
    groups = store.vector_groups(scope).astype(object)
    result = []
    for dimension in sorted({int(d) for d in groups["dimension"]}):
        rows = groups[groups["dimension"] == dimension]
        # One model recorded under two names is one group (its vectors are compared).
        by_label: dict[str, tuple[str, str, int]] = {}
        for p, m, n in zip(rows["provider"], rows["model"], rows["nodes"]):
            if not pd.isna(p):
                first = by_label.get(model_label(p, m), (str(p), str(m), 0))
                by_label[model_label(p, m)] = (first[0], first[1], first[2] + int(n))
        named = list(by_label.values())
        unnamed = sum(int(n) for p, n in zip(rows["provider"], rows["nodes"]) if pd.isna(p))
        for provider, model, nodes in named:
            merged = len(named) == 1 and unnamed > 0
            result.append({"dimension": dimension, "provider": provider, "model": model,
                           "unnamed": merged, "nodes": nodes + (unnamed if merged else 0),
                           "label": f"{model_label(provider, model)} ({dimension}-d)"})
        if unnamed and len(named) != 1:
            result.append({"dimension": dimension, "provider": None, "model": None,
                           "unnamed": True, "nodes": unnamed,
                           "label": f"unnamed model ({dimension}-d)"})
    return result


def _normalised_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows scaled to unit length (float32) and the mask of rows that have a direction."""
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    usable = norms > 0
    unit = np.zeros_like(vectors, dtype=np.float32)
    unit[usable] = (vectors[usable] / norms[usable, None]).astype(np.float32)
    return unit, usable


class _Block:
    """A tile's vectors: ids, unit vectors (for the exact check) and their sketch."""

    def __init__(self, ids: np.ndarray, unit: np.ndarray, basis: np.ndarray | None) -> None:
        self.ids, self.unit = ids, unit
        if basis is None:
            self.sketch = unit
        else:
            # The first coordinates in the principal basis, plus the length of the rest: the
            # sketches' dot product bounds the vectors' from above (Cauchy-Schwarz on the
            # remaining coordinates), so no pair above the threshold is pruned.
            rotated = unit @ basis
            head, tail = rotated[:, :_SKETCH_DIMENSIONS], rotated[:, _SKETCH_DIMENSIONS:]
            self.sketch = np.ascontiguousarray(np.hstack(
                [head, np.linalg.norm(tail, axis=1, keepdims=True)]), dtype=np.float32)


def _principal_basis(unit: np.ndarray) -> np.ndarray | None:
    """An orthonormal basis, most variance first, from the first batch (any orthonormal
    basis keeps the bound exact; this one makes it tight). None when sketching saves
    nothing."""
    if unit.shape[1] <= 2 * _SKETCH_DIMENSIONS or len(unit) < 2 * _SKETCH_DIMENSIONS:
        return None
    second_moment = unit.astype(np.float64).T @ unit.astype(np.float64)
    _, vectors = np.linalg.eigh(second_moment)
    return np.ascontiguousarray(vectors[:, ::-1], dtype=np.float32)


def _tile_pairs(left: _Block, right: _Block, threshold: float, *, same: bool,
                buffer: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row pairs ``(i, j, cosine)`` of two blocks at or above ``threshold`` (``i < j`` when
    the blocks are the same). ``buffer`` holds the sketch similarities: reusing it spares
    the page faults of a fresh 64 MiB array per tile."""
    bounds = buffer[: len(left.ids), : len(right.ids)]
    np.matmul(left.sketch, right.sketch.T, out=bounds)
    # Only the rows that may reach the threshold are searched for their columns.
    floor = threshold - _RECHECK_MARGIN
    candidates = np.flatnonzero(bounds.max(axis=1) >= floor)
    if not len(candidates):
        return candidates, candidates, np.zeros(0)
    sub_rows, cols = np.nonzero(bounds[candidates] >= floor)
    rows = candidates[sub_rows]
    if same:
        keep = rows < cols
        rows, cols = rows[keep], cols[keep]
    if not len(rows):
        return rows, cols, np.zeros(0)
    # The exact cosines of the candidates: one product of the rows and columns involved
    # (float32), then float64 for those within the margin of the threshold.
    row_set, row_at = np.unique(rows, return_inverse=True)
    col_set, col_at = np.unique(cols, return_inverse=True)
    exact = (left.unit[row_set] @ right.unit[col_set].T)[row_at, col_at].astype(np.float64)
    close = np.flatnonzero(np.abs(exact - threshold) < _RECHECK_MARGIN)
    if len(close):
        exact[close] = np.einsum("ij,ij->i", left.unit[rows[close]].astype(np.float64),
                                 right.unit[cols[close]].astype(np.float64))
    keep = exact >= threshold
    return rows[keep], cols[keep], exact[keep]


VectorReader = Callable[[int | None, int | None], Iterable[tuple[np.ndarray, np.ndarray]]]
"""``read(first_id, last_id)``: ``(ids, vectors)`` batches by id, ids in that range
(inclusive; None: unbounded)."""


def vector_pairs(read: VectorReader, threshold: float, *, tile_rows: int = _BATCH_ROWS,
                 sketch: bool = True, held_rows: int | None = None,
                 compared: Callable[[int], None] | None = None
                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every pair of ids whose vectors' cosine similarity reaches ``threshold``.

    The batches of ``read`` are consumed one at a time: each is compared with itself and with
    every batch held before it, tile by tile, first through a sketch (32 principal
    coordinates and the length of the rest, whose dot product is an upper bound of the
    cosine), then exactly in float64 for the pairs the bound lets through. At most
    ``held_rows`` vectors (and a tile) are held: once that many are, the rest of the pass is
    only compared with them, and another pass reads the vectors from the first one not held,
    up to the last id of the first pass (a block nested-loop join: ``n / held_rows`` passes).
    Yields ``(ids_a, ids_b, cosine)`` arrays per tile that found pairs, and tells
    ``compared`` how many pairs each tile compared. Vectors of length zero have no direction
    and are left out.
    """
    basis: list[np.ndarray | None] = []  # the first batch's, kept for every pass
    buffer = np.empty((tile_rows, tile_rows), dtype=np.float32)
    bounds: tuple[int | None, int | None] = (None, None)
    while True:
        held: list[_Block] = []
        held_count = 0
        resume_at: int | None = None
        last_id = bounds[1]
        for ids, vectors in read(*bounds):
            if bounds[1] is None and len(ids):
                last_id = int(ids[-1])
            unit, usable = _normalised_rows(vectors)
            ids, unit = ids[usable], unit[usable]
            if not basis and len(ids):
                basis.append(_principal_basis(unit) if sketch else None)
            for start in range(0, len(ids), tile_rows):
                block = _Block(ids[start:start + tile_rows], unit[start:start + tile_rows],
                               basis[0])
                for other in held:
                    i, j, cosine = _tile_pairs(block, other, threshold, same=False,
                                               buffer=buffer)
                    if compared is not None:
                        compared(len(block.ids) * len(other.ids))
                    if len(i):
                        yield block.ids[i], other.ids[j], cosine
                if resume_at is not None or (held_rows is not None
                                             and held_count >= held_rows):
                    resume_at = int(block.ids[0]) if resume_at is None else resume_at
                    continue
                i, j, cosine = _tile_pairs(block, block, threshold, same=True, buffer=buffer)
                if compared is not None:
                    compared(len(block.ids) * (len(block.ids) - 1) // 2)
                if len(i):
                    yield block.ids[i], block.ids[j], cosine
                held.append(block)
                held_count += len(block.ids)
        if resume_at is None:
            return
        bounds = (resume_at, last_id)


def _text_twin_groups(store: LongTermMemory, scope: dict[str, Any]) -> pd.DataFrame:
    """``node_id`` and ``group`` (int64) of the memories whose normalised text another
    memory shares (their SHA-256 differ), by group then id."""
    groups: dict[bytes, list[int]] = defaultdict(list)
    for batch in store.iter_contents(scope=scope):
        for node_id, content in zip(batch["id"].tolist(), batch["content"].tolist()):
            key = hashlib.blake2b(normalise_text(content).encode("utf-8"),
                                  digest_size=16).digest()
            groups[key].append(int(node_id))
    rows = [(node, number) for number, members in
            enumerate(sorted(m) for m in groups.values() if len(m) > 1) for node in members]
    return pd.DataFrame(rows, columns=["node_id", "group"], dtype="int64")


def _twin_pairs(twins: pd.DataFrame, *, star: bool) -> pd.DataFrame:
    """Every pair of each group of :func:`_text_twin_groups`, or (``star``) each member with
    its group's lowest id, which joins the group with one pair per member."""
    pairs: list[tuple[int, int]] = []
    for _, members in twins.groupby("group", sort=False)["node_id"]:
        ids = members.tolist()
        for i, first in enumerate(ids[:1] if star else ids[:-1]):
            pairs.extend((first, other) for other in ids[i + 1:])
    return pd.DataFrame(pairs, columns=["node_a", "node_b"], dtype="int64")


def validate_pair_choice(pairs: Any) -> None:
    """Raise :class:`ValidationError` (field ``pairs``) unless ``pairs`` is in
    :data:`PAIR_CHOICES`."""
    if not isinstance(pairs, str) or pairs not in PAIR_CHOICES:
        raise ValidationError(f"must be one of {', '.join(PAIR_CHOICES)}, got {pairs!r}",
                              field="pairs")


@share_docs
def near_duplicates(store: LongTermMemory, *, min_similarity: float = 0.95,
                    robots: str | list[str] | None = None, timeframe: Any = None,
                    content_width: int = 120, sample: int | None = None,
                    seed: int = 0, pairs: str = "tree", progress: bool = False
                    ) -> pd.DataFrame:
    """Pairs of memories that say nearly the same thing, grouped into clusters.

    Parameters
    ----------
    store : LongTermMemory
        The live store; only read.
    min_similarity : float
        Least cosine similarity of two stored vectors (of the same model), or pg_trgm
        similarity of two texts where one memory has no vector, for a pair to count; in
        (0, 1].
    robots : str or list of str, optional
        Only memories that one of these robots remembers.
    timeframe : (datetime, datetime), optional
        Only memories created in this range (inclusive, UTC).
    content_width : int
        Characters of each memory's text shown.
    sample : int, optional
        Check only this many memories in scope, chosen by a hash of their id and ``seed``,
        each against the whole memory: its vector's ``SAMPLE_NEIGHBOURS`` nearest through
        the HNSW index (approximate; a memory with more near-duplicates shows its nearest
        ones), without a vector its text through the trigram index. Every memory (the exact
        comparison) when None or when the scope holds no more.
    seed : int
        Chooses the sample; the same seed gives the same memories.
    pairs : {"tree", "all"}
        Per cluster the strongest pairs that join its members (a maximum spanning tree by
        similarity: ``cluster_size - 1`` pairs, one per extra copy), or every pair found.
        Both give the same clusters and memories. A cluster of ``n`` alike memories has up
        to ``n(n-1)/2`` pairs (8 million for 4,000), all held in memory with "all"; "tree"
        holds pairs in proportion to the memories found.
    %(progress)s

    Returns
    -------
    pandas.DataFrame
        One row per pair, by cluster (biggest first), then similarity (highest first):

        - ``cluster`` (int64): the connected group of near-duplicates the pair belongs to,
          numbered from 0, biggest first; ``cluster_size`` (int64): memories in it;
        - ``node_a`` < ``node_b`` (int64): the two memories' ids;
        - ``similarity`` (float64): cosine similarity of their vectors (``basis`` "vector"),
          trigram similarity of their texts ("trigram": one has no vector), or 1 for text
          twins without comparable vectors ("text");
        - ``text_twin`` (bool): the texts are equal once case, punctuation and white space
          are ignored (SHA-256 deduplication missed them);
        - ``model`` (string): the embedding model compared (NA for text comparisons);
        - ``content_a``, ``content_b`` (string): the texts, shortened;
        - ``robots_a``, ``robots_b`` (string): the robots that remember each, comma-separated.

        ``attrs["compared"]`` lists each model's vectors compared, ``attrs["pairs"]`` is
        ``pairs`` and ``attrs["pairs_compared"]`` counts the pairs whose vectors or texts
        reached ``min_similarity`` (kept or not). With a sample, every pair has a sampled side
        and ``attrs["sample"]`` holds ``checked``, ``memories`` (in scope), ``seed``,
        ``involved`` (sampled memories with a near-duplicate), ``share`` and its 95%
        interval ``share_low``/``share_high``; ``cluster`` then groups the pairs found.
    """
    store = live_store(store)
    threshold = validate_fraction(min_similarity, field="min_similarity")
    if isinstance(content_width, bool) or not isinstance(content_width, int) \
            or not 10 <= content_width <= 10_000:
        raise ValidationError(f"must be an integer from 10 to 10000, got {content_width!r}",
                              field="content_width")
    validate_pair_choice(pairs)
    validate_progress(progress)
    scope = scope_params(timeframe=timeframe, robots=robots)
    drawn = draw_sample(store, sample, seed, scope)
    if drawn is not None:
        return _sampled_near_duplicates(store, drawn, threshold, scope, content_width, pairs)
    groups = model_groups(store, scope)
    with progress_bar(progress, sum(g["nodes"] * (g["nodes"] - 1) // 2 for g in groups),
                      "near-duplicates", "pairs", scaled=True) as bar:
        return _every_near_duplicate(store, groups, threshold, scope, content_width, pairs,
                                     bar)


def _every_near_duplicate(store: LongTermMemory, groups: list[dict[str, Any]],
                          threshold: float, scope: dict[str, Any], content_width: int,
                          pairs: str, bar: Progress) -> pd.DataFrame:
    """:func:`near_duplicates` on every memory: each model's vectors compared, then the
    trigram pairs, the text twins and the shown texts."""
    collector = PairCollector(spanning=pairs == "tree")
    compared = []
    for group in groups:
        def read(first_id: int | None, last_id: int | None,
                 group: dict[str, Any] = group) -> Iterator[tuple[np.ndarray, np.ndarray]]:
            return store.iter_vectors(group["dimension"], provider=group["provider"],
                                      model=group["model"], unnamed=group["unnamed"],
                                      scope=scope, batch_rows=_BATCH_ROWS,
                                      first_id=first_id, last_id=last_id)

        bar.note(f"comparing {group['label']} vectors")
        held = _HELD_VECTOR_BYTES // (4 * (group["dimension"] + _SKETCH_DIMENSIONS + 1))
        for ids_a, ids_b, cosine in vector_pairs(read, threshold, held_rows=held,
                                                 compared=bar.update):
            collector.add(ids_a, ids_b, cosine, basis="vector", model=group["label"])
        compared.append({"model": group["label"], "vectors": group["nodes"]})
    if store.server_info.get("pg_trgm_version"):  # without pg_trgm: text twins only
        bar.note("texts without a vector")
        collector.add_frame(store.trigram_pairs(threshold, scope=scope), basis="trigram")
    bar.note("text twins")
    twin_groups = _text_twin_groups(store, scope)
    twins = _twin_pairs(twin_groups, star=pairs == "tree")
    if pairs == "tree":
        # Twins join the forest as pairs of similarity 1, where no comparison found them; a
        # kept pair is a twin when both memories are in one group.
        collector.add_frame(twins, basis="text")
        found = collector.frame()
        group_of = twin_groups.set_index("node_id")["group"]
        found["text_twin"] = (found["node_a"].map(group_of).to_numpy()
                              == found["node_b"].map(group_of).to_numpy())
    else:
        # Text twins flag their pairs, and are pairs themselves where no comparison found
        # them.
        found = collector.frame().merge(twins.assign(twin=True), how="outer",
                                        on=["node_a", "node_b"], sort=False)
        found["text_twin"] = found.pop("twin").notna()
        only_twins = found["similarity"].isna().to_numpy()
        if only_twins.any():
            found.loc[only_twins, "similarity"] = 1.0
            found.loc[only_twins, "basis"] = "text"
    bar.note("shown texts")
    frame = _with_clusters_and_texts(store, found, content_width)
    frame.attrs.update(compared=compared, min_similarity=threshold, pairs=pairs,
                       pairs_compared=collector.compared)
    return frame


def _sampled_near_duplicates(store: LongTermMemory, drawn: MemorySample, threshold: float,
                             scope: dict[str, Any], width: int, pairs: str) -> pd.DataFrame:
    """:func:`near_duplicates` on a sample: each sampled memory against the whole memory."""
    collector = PairCollector(spanning=pairs == "tree")
    groups = model_groups(store, scope)
    for group in groups:
        collector.add_frame(store.sampled_neighbours(
            drawn.ids, dimension=group["dimension"], provider=group["provider"],
            model=group["model"], unnamed=group["unnamed"], min_similarity=threshold,
            k=SAMPLE_NEIGHBOURS, ef_search=SAMPLE_EF_SEARCH, scope=scope),
            basis="vector", model=group["label"])
    if store.server_info.get("pg_trgm_version"):
        collector.add_frame(store.sampled_trigram_pairs(drawn.ids, min_similarity=threshold,
                                                        scope=scope), basis="trigram")
    frame = _with_clusters_and_texts(store, collector.frame(), width)
    involved = np.isin(drawn.ids, np.concatenate([frame["node_a"], frame["node_b"]]))
    frame.attrs.update(min_similarity=threshold, sample=drawn.estimate(int(involved.sum())),
                       compared=[{"model": g["label"], "vectors": g["nodes"]} for g in groups],
                       pairs=pairs, pairs_compared=collector.compared)
    return frame


def _with_clusters_and_texts(store: LongTermMemory, pairs: pd.DataFrame,
                             width: int) -> pd.DataFrame:
    if pairs.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in NEAR_DUPLICATE_COLUMNS.items()})
    nodes, cluster, size = pair_clusters(pairs["node_a"].to_numpy(np.int64),
                                         pairs["node_b"].to_numpy(np.int64))
    pairs = pairs.assign(cluster=cluster, cluster_size=size)
    if "text_twin" in pairs:  # only the shown beginning of each text is read
        described = store.describe_nodes(nodes.tolist(), width=width).set_index("id")
        texts = described["content"]
    else:  # a sample's pairs: compare the two texts themselves
        described = store.describe_nodes(nodes.tolist()).set_index("id")
        normalised = described["content"].map(normalise_text)
        pairs["text_twin"] = (pairs["node_a"].map(normalised).to_numpy()
                              == pairs["node_b"].map(normalised).to_numpy())
        texts = described["content"].map(lambda t: shorten_text(t, width))
    for side in ("a", "b"):
        pairs[f"content_{side}"] = pairs[f"node_{side}"].map(texts)
        pairs[f"robots_{side}"] = pairs[f"node_{side}"].map(described["robots"])
    pairs = pairs.sort_values(["cluster", "similarity", "node_a", "node_b"],
                              ascending=[True, False, True, True], kind="stable")
    return pairs[list(NEAR_DUPLICATE_COLUMNS)].astype(NEAR_DUPLICATE_COLUMNS) \
        .reset_index(drop=True)
