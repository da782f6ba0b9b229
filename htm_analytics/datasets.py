"""Readers for the Debian package-description corpus used in tests, demos and benchmarks.

The corpus (``debian-memories``) holds 63,666 real package descriptions with hierarchical
debtags and all-MiniLM-L6-v2 embeddings (384 dimensions). Its maintainers make natural robots.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .validation import TAG_PATTERN

__all__ = ["CORPUS_ENVIRONMENT_VARIABLE", "find_corpus", "read_corpus", "read_dev_queries",
           "normalize_tag"]

CORPUS_ENVIRONMENT_VARIABLE = "HTM_CORPUS_DIR"
_CORPUS_NAME = "debian-memories"


def find_corpus(directory: str | os.PathLike[str] | None = None) -> Path:
    """Locate the corpus: ``directory``, else ``$HTM_CORPUS_DIR``, else a ``shared/data``
    folder beside the current directory or one of its parents.

    Raises
    ------
    FileNotFoundError
        With the places searched.
    """
    candidates: list[Path] = []
    if directory is not None:
        candidates.append(Path(directory))
    elif os.environ.get(CORPUS_ENVIRONMENT_VARIABLE):
        candidates.append(Path(os.environ[CORPUS_ENVIRONMENT_VARIABLE]))
    else:
        here = Path.cwd().resolve()
        for parent in [here, *here.parents]:
            candidates.append(parent / "shared" / "data" / _CORPUS_NAME)
            candidates.append(parent.parent / "shared" / "data" / _CORPUS_NAME)
    for candidate in candidates:
        if (candidate / "corpus.jsonl.gz").is_file():
            return candidate
    raise FileNotFoundError(
        f"no {_CORPUS_NAME} corpus (corpus.jsonl.gz) found; looked in "
        f"{', '.join(str(c) for c in dict.fromkeys(candidates))}. "
        f"Set {CORPUS_ENVIRONMENT_VARIABLE} to its folder.")


def normalize_tag(tag: str) -> str | None:
    """Rewrite a debtag as a valid HTM tag, or None for placeholders (``*:TODO``).

    ``devel:lang:c++`` becomes ``devel:lang:cpp``; other characters outside ``a-z0-9-`` become
    ``-``.
    """
    if tag.endswith(":TODO"):
        return None
    tag = tag.lower().replace("c++", "cpp").replace("+", "plus")
    tag = ":".join(re.sub(r"[^a-z0-9-]+", "-", part).strip("-") for part in tag.split(":"))
    return tag if TAG_PATTERN.match(tag) else None


def read_corpus(directory: str | os.PathLike[str] | None = None, *, rows: int | None = None,
                embeddings: bool = True) -> tuple[pd.DataFrame, np.ndarray | None]:
    """Read the first ``rows`` rows of the corpus (all by default).

    Returns
    -------
    frame : pandas.DataFrame
        ``row`` (int64), ``package``, ``section``, ``maintainer``, ``title`` (str, title may be
        missing), ``content`` (str) and ``tags`` (list of valid HTM tags, placeholders
        dropped).
    vectors : numpy.ndarray or None
        float32 ``(rows, 384)`` MiniLM embeddings of ``content``, row-aligned with ``frame``.
    """
    path = find_corpus(directory)
    records = []
    with gzip.open(path / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            if rows is not None and len(records) >= rows:
                break
            record = json.loads(line)
            record["tags"] = sorted({t for t in map(normalize_tag, record["tags"]) if t})
            records.append(record)
    frame = pd.DataFrame.from_records(
        records, columns=["row", "package", "section", "maintainer", "title", "content", "tags"])
    frame = frame.astype({"row": "int64", "package": "string", "section": "string",
                          "maintainer": "string", "title": "string", "content": "string"})
    vectors = None
    if embeddings:
        matrix = np.load(path / "content-minilm.npy", mmap_mode="r")
        vectors = np.asarray(matrix[frame["row"].to_numpy()], dtype=np.float32)
    return frame, vectors


def read_dev_queries(directory: str | os.PathLike[str] | None = None, *,
                     rows: int | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """The retrieval task: a title (query) and the corpus ``row`` whose content answers it.

    Returns
    -------
    frame : pandas.DataFrame
        ``row`` (int64: the relevant corpus row) and ``title`` (str).
    vectors : numpy.ndarray
        float32 ``(n, 384)`` MiniLM embeddings of the titles.
    """
    path = find_corpus(directory)
    with gzip.open(path / "dev-queries.jsonl.gz", "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    frame = pd.DataFrame.from_records(records, columns=["row", "title"])
    frame = frame.astype({"row": "int64", "title": "string"})
    vectors = np.load(path / "dev-queries-minilm.npy").astype(np.float32)
    if rows is not None:
        frame, vectors = frame.iloc[:rows].reset_index(drop=True), vectors[:rows]
    return frame, vectors
