"""Readers for the Debian package-description corpus used in tests, demos and benchmarks.

The corpus (``debian-memories``) holds 63,666 real package descriptions with hierarchical
debtags and all-MiniLM-L6-v2 embeddings (384 dimensions). Its maintainers make natural robots.
"""

from __future__ import annotations

import datetime as dt
import gzip
import importlib.resources
import io
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..validation import (
    TAG_PATTERN,
    validate_datetime,
    validate_name,
    validate_number,
    validate_positive_int,
)
from .tokens import count_tokens

if TYPE_CHECKING:
    from ..store import LongTermMemory

__all__ = ["CORPUS_ENVIRONMENT_VARIABLE", "find_corpus", "read_corpus", "read_dev_queries",
           "normalize_tag", "DEMO_ROBOTS", "simulate_remembers", "remember_history",
           "read_demo"]

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
    records: list[dict[str, Any]] = []
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


DEMO_ROBOTS = ("planner", "researcher", "coder", "reviewer", "ops")


def simulate_remembers(frame: pd.DataFrame, *, robots: tuple[str, ...] = DEMO_ROBOTS,
                       days: int = 180, end: dt.datetime | None = None,
                       shared_probability: float = 0.3, repeat_probability: float = 0.4,
                       seed: int = 0) -> pd.DataFrame:
    """A plausible history of robots remembering the corpus rows in ``frame``.

    Each row is first remembered by one robot (mostly the robot that "owns" its Debian
    section) at a time in the ``days`` before ``end``, activity growing towards the end; with
    ``shared_probability`` another robot remembers it later too (the hive mind), and the
    first robot reinforces it a geometric number of times (at least once with
    ``repeat_probability``).

    Returns
    -------
    pandas.DataFrame
        One row per remember, in time order: ``position`` (int64: row position in ``frame``),
        ``robot`` (string), ``remembered_at`` (datetime64[us, UTC]).
    """
    if isinstance(robots, str) or not isinstance(robots, (list, tuple)) or not robots:
        raise ValidationError("must be a non-empty list or tuple of robot names, not one "
                              "string", field="robots")
    robots = tuple(validate_name(name, field="robots") for name in robots)
    # At most a century back, so that every simulated time stays in the calendar.
    days = validate_positive_int(days, field="days", maximum=36_500)
    for name, probability in (("shared_probability", shared_probability),
                              ("repeat_probability", repeat_probability)):
        validate_number(probability, field=name, minimum=0, maximum=1)
    if end is not None:
        end = validate_datetime(end, field="end").replace(microsecond=0)
    rng = np.random.default_rng(seed)
    n = len(frame)
    end = end or dt.datetime.now(dt.UTC).replace(microsecond=0)
    span = np.timedelta64(days * 86_400, "s")
    sections = frame["section"].fillna("misc").to_numpy(dtype=str)
    owners = {s: i % len(robots) for i, s in enumerate(rng.permutation(np.unique(sections)))}
    owner = np.array([owners[s] for s in sections], dtype=np.int64)
    first_robot = np.where(rng.random(n) < 0.7, owner, rng.integers(0, len(robots), n))
    # sqrt of a uniform: density grows linearly towards the end, as a busy agent's does.
    first_at = np.datetime64(end.replace(tzinfo=None), "s") - (
        (1 - np.sqrt(rng.random(n))) * span.astype(np.int64)).astype("timedelta64[s]")

    def later(times: np.ndarray, mean_days: float) -> np.ndarray:
        delay = (rng.exponential(mean_days * 86_400, len(times))).astype("timedelta64[s]")
        return times + delay

    positions = [np.arange(n)]
    robot_ids = [first_robot]
    times = [first_at]
    shared = np.flatnonzero(rng.random(n) < shared_probability)
    other = (first_robot[shared] + rng.integers(1, len(robots), len(shared))) % len(robots)
    positions.append(shared)
    robot_ids.append(other)
    times.append(later(first_at[shared], 14))
    repeats = np.where(rng.random(n) < repeat_probability, rng.geometric(0.5, n), 0)
    repeated = np.repeat(np.arange(n), repeats)
    positions.append(repeated)
    robot_ids.append(first_robot[repeated])
    times.append(later(first_at[repeated], 7))
    events = pd.DataFrame({
        "position": np.concatenate(positions),
        "robot": np.asarray(robots)[np.concatenate(robot_ids)],
        "remembered_at": pd.to_datetime(np.concatenate(times)).tz_localize("UTC"),
    })
    # A later remember that would fall after ``end`` has not happened yet: dropped, not moved
    # to ``end`` (which made a fake spike in the last week and every robot active at ``end``).
    cutoff = pd.Timestamp(end)
    cutoff = cutoff.tz_localize("UTC") if cutoff.tzinfo is None else cutoff.tz_convert("UTC")
    events = events[events["remembered_at"] <= cutoff]
    events = events.sort_values(["remembered_at", "position"], kind="stable")
    return events.reset_index(drop=True).astype(
        {"position": "int64", "robot": "string", "remembered_at": "datetime64[us, UTC]"})


def remember_history(store: LongTermMemory, frame: pd.DataFrame,
                     vectors: np.ndarray | None = None, *, days: int = 180,
                     end: dt.datetime | None = None, seed: int = 0, token_counts: bool = False,
                     embedding_model: tuple[str, str] | None = None) -> pd.DataFrame:
    """Load a simulated remembering history of the rows of ``frame`` into ``store``.

    The history is :func:`simulate_remembers`'s (robots, times, sharing, reinforcement);
    every remember becomes one row of a single
    :meth:`~htm_analytics.LongTermMemory.bulk_add`, with the row's tags, its vector (when
    ``vectors`` is given), its word count as ``token_count`` (``token_counts=True``) and
    the time it happened.

    Returns
    -------
    pandas.DataFrame
        The events (as :func:`simulate_remembers`) with ``node_id`` (int64) and ``is_new``
        (bool) from :meth:`~htm_analytics.LongTermMemory.bulk_add`.
    """
    events = simulate_remembers(frame, days=days, end=end, seed=seed)
    positions = events["position"].to_numpy()
    contents = frame["content"].to_numpy()[positions].tolist()
    loaded = store.bulk_add(
        contents, robots=events["robot"].tolist(),
        embeddings=None if vectors is None else vectors[positions],
        tags=[frame["tags"].iloc[i] for i in positions] if "tags" in frame else None,
        token_counts=[count_tokens(text) for text in contents] if token_counts else None,
        remembered_at=events["remembered_at"].tolist(), embedding_model=embedding_model)
    return events.assign(node_id=loaded["node_id"].to_numpy(),
                         is_new=loaded["is_new"].to_numpy())


def read_demo() -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, np.ndarray]:
    """The demo memory bundled with the package: 3,000 corpus rows and 1,000 queries.

    Returns
    -------
    memories : pandas.DataFrame
        ``package``, ``section``, ``content`` (string) and ``tags`` (list of str).
    vectors : numpy.ndarray
        float32 ``(3000, 384)`` MiniLM embeddings of ``content``.
    queries : pandas.DataFrame
        ``title`` (string, a package's one-line summary) and ``position`` (int64: the row of
        ``memories`` that answers it).
    query_vectors : numpy.ndarray
        float32 ``(1000, 384)`` MiniLM embeddings of the titles.
    """
    folder = importlib.resources.files("htm_analytics").joinpath("data")

    def records(name: str) -> list[dict[str, object]]:
        with gzip.open(io.BytesIO(folder.joinpath(name).read_bytes()), "rt",
                       encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]

    def matrix(name: str) -> np.ndarray:
        return np.load(io.BytesIO(folder.joinpath(name).read_bytes())).astype(np.float32)

    memories = pd.DataFrame.from_records(records("demo-memories.jsonl.gz")).astype(
        {"package": "string", "section": "string", "content": "string"})
    queries = pd.DataFrame.from_records(records("demo-queries.jsonl.gz"),
                                        columns=["title", "position"]).astype(
        {"title": "string", "position": "int64"})
    return memories, matrix("demo-minilm.npy"), queries, matrix("demo-queries-minilm.npy")
