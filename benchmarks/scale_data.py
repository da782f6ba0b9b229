"""The fleet memory of ``bench_scale.py`` (and ``bench_tag_sql.py``): any number of
remembers made from the corpus, seeded, as :func:`fleet_memory` documents."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np

from htm_analytics.agent.datasets import read_corpus

END = dt.datetime(2026, 6, 30, 12, tzinfo=dt.UTC)
REPEAT_SHARE = 0.15      # rows that re-remember earlier content (dedup and remember_count)
NOISE = 0.01             # per-component noise of a variant's vector (cosine ~0.98)
ROWS_PER_ROBOT = 50      # a fleet: 2,000 robots at 100k rows
TEAMS = 40               # "fleet:team-NN" tags


def fleet_memory(rows: int, seed: int = 0) -> dict[str, Any]:
    """``rows`` remembers made from the corpus, seeded.

    - Corpus rows are taken in a seeded order, cycling through the corpus; the first pass
      keeps text and vector as they are. Later passes are variants: the text gets a line
      naming the pass and a host ("Seen again on host h0042, pass 2."), the vector a small
      Gaussian perturbation (sigma 0.01 per component), renormalised.
    - 15% of rows re-remember the exact text, vector and tags of an earlier row, by a robot
      of the fleet (so ``bulk_add`` deduplicates them and counts ``remember_count``).
    - Robots: ``rows // 50`` of them (at least 5), Zipf-like activity (weight 1/rank^0.8).
    - Times: over 365 days before 2026-06-30, denser towards the end, in row order.
    - Tags: the corpus row's own tags plus ``fleet:team-NN`` of the robot's team.
    """
    frame, vectors = read_corpus()
    assert vectors is not None
    rng = np.random.default_rng(seed)
    corpus_rows = len(frame)
    repeat = rng.random(rows) < REPEAT_SHARE
    repeat[0] = False
    originals = np.flatnonzero(~repeat)
    order = rng.permutation(corpus_rows)
    base = np.empty(rows, dtype=np.int64)
    variant = np.zeros(rows, dtype=np.int64)
    base[originals] = order[np.arange(len(originals)) % corpus_rows]
    variant[originals] = np.arange(len(originals)) // corpus_rows
    source = np.arange(rows)
    earlier = np.searchsorted(originals, np.flatnonzero(repeat))  # originals before each
    source[repeat] = originals[(rng.random(repeat.sum()) * earlier).astype(np.int64)]
    robots = max(5, rows // ROWS_PER_ROBOT)
    weights = 1.0 / np.arange(1, robots + 1) ** 0.8
    robot = rng.choice(robots, size=rows, p=weights / weights.sum())
    seconds = np.sort((np.sqrt(rng.random(rows)) * 365 * 86_400).astype(np.int64))
    start = END - dt.timedelta(days=365)
    hosts = rng.integers(0, 10_000, rows)
    contents: list[str] = []
    matrix = np.empty((rows, vectors.shape[1]), dtype=np.float32)
    tags: list[list[str]] = []
    texts, corpus_tags = frame["content"].tolist(), frame["tags"].tolist()
    for i in range(rows):
        s = source[i]
        b, v = base[s], variant[s]
        if s != i:
            contents.append(contents[s])
            matrix[i] = matrix[s]
            tags.append([*tags[s][:-1], f"fleet:team-{robot[i] % TEAMS:02d}"])
            continue
        text = texts[b] if v == 0 else \
            f"{texts[b]}\nSeen again on host h{hosts[i]:04d}, pass {v}."
        contents.append(text)
        vector = vectors[b] if v == 0 else vectors[b] + rng.normal(0, NOISE, vectors.shape[1])
        matrix[i] = vector / np.linalg.norm(vector)
        tags.append([*corpus_tags[b], f"fleet:team-{robot[i] % TEAMS:02d}"])
    return {"contents": contents, "vectors": matrix, "tags": tags,
            "robots": [f"robot-{r:05d}" for r in robot],
            "remembered_at": [start + dt.timedelta(seconds=int(x)) for x in seconds],
            "distinct": len(set(contents)), "robot_count": robots}
