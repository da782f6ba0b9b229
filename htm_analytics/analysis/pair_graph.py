"""Graphs of memory pairs: their connected groups, and the strongest pairs that join each group.

A group of 4,000 alike memories has 8 million pairs. :class:`PairCollector` can keep, instead
of every pair, a maximum spanning forest of the pairs seen so far (each group's members joined
by its strongest pairs, one pair fewer than members), so that its memory follows the memories
found rather than the pairs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# scipy.sparse is imported where a graph is built: with the module, every command importing
# the analysis package paid for it.

__all__ = ["PAIR_BASES", "PairCollector", "pair_clusters"]

PAIR_BASES = ("vector", "trigram", "text")
"""What a pair's similarity measures: cosine of two vectors, pg_trgm similarity of two texts,
or texts equal once normalised (similarity 1)."""
_TEXT = PAIR_BASES.index("text")


def pair_clusters(node_a: np.ndarray, node_b: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The connected groups of the pairs ``(node_a[i], node_b[i])``: the sorted distinct
    nodes, and per pair its group's number (0 for the biggest; of equal sizes, the group
    holding the lowest id first) and its group's size in nodes.

    A sparse graph, not a networkx one: a cluster of 4,000 alike memories has 8 million
    pairs, held by networkx at hundreds of bytes each.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    edges = len(node_a)
    nodes, position = np.unique(np.concatenate([node_a, node_b]), return_inverse=True)
    graph = coo_matrix((np.ones(edges, dtype=np.int8), (position[:edges], position[edges:])),
                       shape=(len(nodes), len(nodes)))
    count, component = connected_components(graph, directed=False)
    sizes = np.bincount(component, minlength=count)
    lowest = nodes[np.unique(component, return_index=True)[1]]  # nodes are sorted
    number = np.empty(count, dtype=np.int64)
    number[np.lexsort((lowest, -sizes))] = np.arange(count)
    of_pair = component[position[:edges]]
    return nodes, number[of_pair], sizes[of_pair].astype(np.int64)


class _Pairs:
    """Column arrays of pairs: ``a < b`` (int64), similarity (float64), basis and model
    codes (int8, int16)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, similarity: np.ndarray,
                 basis: np.ndarray, model: np.ndarray) -> None:
        self.a, self.b, self.similarity, self.basis, self.model = a, b, similarity, basis, model

    def __len__(self) -> int:
        return len(self.a)

    def take(self, index: np.ndarray) -> _Pairs:
        return _Pairs(self.a[index], self.b[index], self.similarity[index],
                      self.basis[index], self.model[index])

    @classmethod
    def concat(cls, parts: list[_Pairs]) -> _Pairs:
        return cls(*(np.concatenate([getattr(p, name) for p in parts])
                     for name in ("a", "b", "similarity", "basis", "model")))

    def distinct(self) -> _Pairs:
        """Each pair once: its highest similarity, a compared pair before a text pair."""
        order = np.lexsort((-self.similarity, self.basis == _TEXT, self.b, self.a))
        ordered = self.take(order)
        first = np.ones(len(order), dtype=bool)
        first[1:] = (ordered.a[1:] != ordered.a[:-1]) | (ordered.b[1:] != ordered.b[:-1])
        return ordered.take(first)

    def spanning_forest(self) -> _Pairs:
        """A maximum spanning forest of these distinct pairs, by similarity."""
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import minimum_spanning_tree

        edges = len(self)
        nodes, position = np.unique(np.concatenate([self.a, self.b]), return_inverse=True)
        rows, cols = position[:edges], position[edges:]
        # Similarities are in (0, 1]: 2 - s is positive (a stored zero would mean no edge)
        # and smallest for the strongest pair.
        graph = csr_matrix((2.0 - self.similarity, (rows, cols)), shape=(len(nodes),) * 2)
        tree = minimum_spanning_tree(graph).tocoo()
        keys = rows * len(nodes) + cols  # a < b, so each pair's key is unique
        order = np.argsort(keys, kind="stable")
        low = np.minimum(tree.row, tree.col).astype(np.int64)
        high = np.maximum(tree.row, tree.col).astype(np.int64)
        chosen = order[np.searchsorted(keys, low * len(nodes) + high, sorter=order)]
        return self.take(np.sort(chosen))


class PairCollector:
    """Pairs of memories gathered batch by batch: every pair, or a maximum spanning forest.

    Parameters
    ----------
    spanning : bool
        Keep only the strongest pairs that join each connected group (a maximum spanning
        forest by similarity), recomputed each time ``spill_rows`` pairs wait: the same groups
        and members as every pair, held in memory in proportion to the memories. A forest of
        the forest kept and the new pairs is a forest of all pairs seen (a pair left out of a
        forest is the weakest on a cycle, which more pairs cannot break).
    spill_rows : int
        Pairs gathered before the forest is recomputed.
    """

    def __init__(self, *, spanning: bool, spill_rows: int = 2_000_000) -> None:
        self.spanning, self.spill_rows = spanning, spill_rows
        self.compared = 0  # pairs given with basis "vector" or "trigram"
        self._models: list[str | None] = []
        self._parts: list[_Pairs] = []
        self._waiting = 0

    def add(self, node_a: np.ndarray, node_b: np.ndarray, similarity: np.ndarray, *,
            basis: str, model: str | None = None) -> None:
        """Add pairs of distinct ids (either order) of one basis and model."""
        if not len(node_a):
            return
        if model not in self._models:
            self._models.append(model)
        a = np.asarray(node_a, dtype=np.int64)
        b = np.asarray(node_b, dtype=np.int64)
        count = len(a)
        self._parts.append(_Pairs(
            np.minimum(a, b), np.maximum(a, b), np.asarray(similarity, dtype=np.float64),
            np.full(count, PAIR_BASES.index(basis), dtype=np.int8),
            np.full(count, self._models.index(model), dtype=np.int16)))
        if basis != "text":
            self.compared += count
        self._waiting += count
        if self.spanning and self._waiting >= self.spill_rows:
            self._parts = [self._kept()]
            self._waiting = 0

    def add_frame(self, pairs: pd.DataFrame, *, basis: str, model: str | None = None) -> None:
        """:meth:`add` the ``node_a``, ``node_b`` and ``similarity`` columns of ``pairs``
        (similarity 1 where it has none)."""
        similarity = pairs["similarity"] if "similarity" in pairs else np.ones(len(pairs))
        self.add(pairs["node_a"].to_numpy(), pairs["node_b"].to_numpy(),
                 np.asarray(similarity), basis=basis, model=model)

    def _kept(self) -> _Pairs:
        pairs = _Pairs.concat(self._parts).distinct()
        return pairs.spanning_forest() if self.spanning and len(pairs) else pairs

    def frame(self) -> pd.DataFrame:
        """The pairs kept: ``node_a < node_b`` (int64), ``similarity`` (float64), ``basis``
        and ``model`` (object), each pair once."""
        if not self._parts:
            return pd.DataFrame({"node_a": pd.Series(dtype="int64"),
                                 "node_b": pd.Series(dtype="int64"),
                                 "similarity": pd.Series(dtype="float64"),
                                 "basis": pd.Series(dtype="object"),
                                 "model": pd.Series(dtype="object")})
        pairs = self._kept()
        return pd.DataFrame({
            "node_a": pairs.a, "node_b": pairs.b, "similarity": pairs.similarity,
            "basis": np.array(PAIR_BASES, dtype=object)[pairs.basis],
            "model": np.array(self._models, dtype=object)[pairs.model]})
