"""Tag co-occurrence counted as a sparse matrix product, a page of memories at a time.

Topics (tags, or their first ``level`` segments) that two memories share are the entries of
``X.T @ X``, where ``X`` is the memories x topics incidence matrix. PostgreSQL counted them
with a self-join of the memory-topic pairs: about 20 joined rows per memory, grouped in one
hash aggregate on one core (14 s at a million memories). Here the server only streams the
(memory, tag) links of a range of memory ids at a time (binary COPY), and SciPy multiplies:
linear in the links, with memory bounded by one page and the topics x topics counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..frames import MemorySource

__all__ = ["COOCCURRENCE_DTYPES", "cooccurrence_counts"]

COOCCURRENCE_DTYPES = {
    "topic1": "string", "topic2": "string", "shared_nodes": "int64", "nodes1": "int64",
    "nodes2": "int64", "total_nodes": "int64", "jaccard": "float64", "lift": "float64",
}


class _Topics:
    """The topics of the tags in scope, in tree order: every topic right before its subtree,
    so that "b lies below a" is ``a < b <= last[a]``."""

    def __init__(self, tags: pd.DataFrame, prefix: str | None, level: int | None) -> None:
        names = tags["name"].astype(str).tolist()
        topic = [None if prefix is not None and name != prefix
                 and not name.startswith(prefix + ":")
                 else name if level is None else ":".join(name.split(":")[:level])
                 for name in names]
        self.names = sorted({t for t in topic if t is not None}, key=lambda t: t.split(":"))
        number = {name: i for i, name in enumerate(self.names)}
        self.last = np.arange(len(self.names))
        for i, name in enumerate(self.names):
            parts = name.split(":")
            for depth in range(1, len(parts)):
                ancestor = number.get(":".join(parts[:depth]))
                if ancestor is not None:
                    self.last[ancestor] = max(self.last[ancestor], i)
        ids = tags["id"].to_numpy(dtype=np.int64)
        order = np.argsort(ids)
        self.tag_ids = ids[order]
        self.of_tag = np.array([-1 if t is None else number[t] for t in topic],
                               dtype=np.int64)[order]

    def of(self, tag_ids: np.ndarray) -> np.ndarray:
        """The topic of each tag id (-1: out of scope, or a tag added since)."""
        if not len(self.tag_ids):
            return np.full(len(tag_ids), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.tag_ids, tag_ids), len(self.tag_ids) - 1)
        return np.where(self.tag_ids[at] == tag_ids, self.of_tag[at], -1)


def cooccurrence_counts(source: MemorySource, params: dict[str, Any]
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pairs of topics in scope found together on at least ``params["min_shared"]``
    memories, a topic and its own ancestor left out (columns of
    :data:`COOCCURRENCE_DTYPES`, ``topic1 < topic2`` by code point, unsorted), and every
    topic in scope with its size (``tag``, ``nodes``)."""
    import scipy.sparse as sp  # here, not with the module: every analysis command imports it

    topics = _Topics(source.analytics_frame("tag_names", {}, {"id": "int64", "name": "string"}),
                     params["prefix"], params["level"])
    count = len(topics.names)
    shared = sp.csr_matrix((count, count), dtype=np.int64)  # the diagonal: topic sizes
    total = 0
    for page in source.analytics_pages("node_tag_links", params, ("node_id", "tag_id")):
        topic = topics.of(page["tag_id"])
        kept = topic >= 0
        nodes, row = np.unique(page["node_id"][kept], return_inverse=True)
        if not len(nodes):
            continue
        # Summing duplicates then setting 1: tags rolled up into one topic count once.
        incidence = sp.csr_matrix((np.ones(len(row), dtype=np.int32), (row, topic[kept])),
                                  shape=(len(nodes), count))
        incidence.sum_duplicates()
        incidence.data[:] = 1
        total += len(nodes)
        shared = shared + (incidence.T @ incidence).astype(np.int64)
    sizes = shared.diagonal().astype(np.int64)
    upper = sp.triu(shared, k=1).tocoo()
    first, second, together = upper.row, upper.col, upper.data.astype(np.int64)
    kept = (second > topics.last[first]) & (together >= params["min_shared"])
    first, second, together = first[kept], second[kept], together[kept]
    names = np.array(topics.names, dtype=object)
    swap = names[first] > names[second]  # tree order is not code-point order ("a:b" < "a-b")
    first, second = np.where(swap, second, first), np.where(swap, first, second)
    size1, size2 = sizes[first], sizes[second]
    pairs = pd.DataFrame({
        "topic1": names[first], "topic2": names[second], "shared_nodes": together,
        "nodes1": size1, "nodes2": size2, "total_nodes": total,
        "jaccard": together / (size1 + size2 - together),
        "lift": together * float(total) / (size1.astype(float) * size2)})
    present = np.flatnonzero(sizes)
    sized = pd.DataFrame({"tag": names[present], "nodes": sizes[present]})
    return pairs.astype(COOCCURRENCE_DTYPES), sized.astype({"tag": "string", "nodes": "int64"})
