"""Conversational memory benchmarks (LoCoMo, LongMemEval, JSON Lines) replayed into a scratch
memory and scored on the evidence turns, without an LLM.

Each conversation is remembered as an agent would remember it: each speaker a robot, each
turn a memory at its session's time (``bulk_add``); every question then runs through every
search strategy (:func:`~htm_analytics.evaluate_retrieval`, the toolkit's own API, cache
off). A turn whose text was said before is the same memory (HTM stores content once), so a
retrieved memory stands for every turn that said it.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .._plotting import axes_or_new, checked_plot
from .._progress import progress_bar
from ..agent.embeddings import get_embedder
from ..errors import ValidationError
from ..store import (
    SEARCH_STRATEGIES,
    VECTOR_STRATEGIES,
    LongTermMemory,
    database_name,
    scratch_database,
)
from ..store.connection import resolve_database_url
from ..validation import validate_positive_int
from .conversation_checks import (
    checked_conversations,
    checked_names,
    checked_strategies,
    document_frames,
)
from .conversation_formats import Conversation, Question, read_conversations
from .evaluation import EVALUATED_STRATEGIES, evaluate_retrieval

__all__ = ["ConversationEvaluation", "evaluate_conversations", "plot_conversations",
           "CONVERSATION_SCOPES"]

CONVERSATION_SCOPES = ("conversation", "benchmark")
_FRAMES = ("summary", "per_question", "abstention", "conversations")
_PREFIX = "htm_conversations"
_NATIVE_INDEX_BELOW = 2000  # a padded vector(2000) column gains nothing from a native index


@dataclass(frozen=True)
class ConversationEvaluation:
    """What :func:`evaluate_conversations` measured.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per strategy and question category, then one ``category == "all"`` row per
        strategy: ``strategy``, ``category`` (string), ``questions`` (int64),
        ``recall_any_at_1``, ``recall_any_at_5``, ``recall_any_at_{k}`` (share of questions
        with at least one evidence turn in the top 1/5/k), ``recall_all_at_{k}`` (every
        evidence turn in the top k), ``ndcg_at_{k}``, ``mrr_at_{k}`` (float64; cutoffs above
        ``k`` are left out), ``latency_p50_ms``, ``latency_p95_ms`` (float64) and ``k``
        (int64). Abstention questions are not in it.
    per_question : pandas.DataFrame
        One row per answerable question and strategy: ``conversation``, ``question_id``,
        ``question``, ``category``, ``strategy`` (string), ``evidence`` (object: turn ids),
        ``retrieved`` (object: the turn ids of the returned memories, best first; a memory
        said in several turns lists them all), ``first_evidence_rank`` (Int64: rank of the
        first memory holding an evidence turn, <NA> when none is in the top k),
        ``returned`` (int64), the metric columns of ``summary`` (float64) and ``latency_ms``
        (float64).
    abstention : pandas.DataFrame
        Questions that should find nothing (LongMemEval's ``_abs`` questions, LoCoMo's
        adversarial category 5, JSON Lines questions without evidence), one row per strategy
        and category: ``strategy``, ``category`` (string), ``questions`` (int64),
        ``returned_any`` (float64: share of them for which the search returned something),
        ``returned_mean``, ``latency_p50_ms`` (float64).
    conversations : pandas.DataFrame
        One row per conversation: ``conversation`` (string), ``turns``, ``memories``
        (distinct memories its turns became), ``questions`` (scored), ``abstention``,
        ``unresolved`` (questions dropped because no evidence id names a turn) (int64) and
        ``database`` (string: the scratch database when kept, else <NA>).
    interrupted : bool
        Ctrl-C stopped the run: the frames hold the conversations finished before it.
    """

    summary: pd.DataFrame
    per_question: pd.DataFrame
    abstention: pd.DataFrame
    conversations: pd.DataFrame
    interrupted: bool = False

    def to_json(self) -> dict[str, Any]:
        """One JSON document (what ``htm-analytics eval conversations --json`` prints):
        ``interrupted`` and each frame as a list of records."""
        return {"interrupted": self.interrupted,
                **{name: json.loads(getattr(self, name).to_json(
                    orient="records", date_format="iso", double_precision=15))
                   for name in _FRAMES}}

    @classmethod
    def from_json(cls, document: str | Path | Mapping[str, Any]) -> ConversationEvaluation:
        """The evaluation back from :meth:`to_json`'s document, or a file holding it.

        Raises
        ------
        ValidationError
            Not such a document (``field="document"``): not JSON, or no ``summary`` list
            of records with the summary's columns.
        """
        frames, interrupted = document_frames(document, _FRAMES)
        return cls(interrupted=interrupted, **frames)


def _cutoffs(k: int) -> list[int]:
    return sorted({c for c in (1, 5, k) if c <= k})


@dataclass
class _Replay:
    """One scratch database's worth of conversations."""

    conversations: list[Conversation]

    def keyed_turns(self) -> list[tuple[str, str]]:
        return [(c.conversation_id, t.turn_id) for c in self.conversations for t in c.turns]

    def questions(self) -> list[tuple[str, Question]]:
        return [(c.conversation_id, q) for c in self.conversations for q in c.questions]


def _remember(store: LongTermMemory, replay: _Replay, embedder: Any, with_vectors: bool,
              speaker_prefix: bool) -> tuple[dict[tuple[str, str], int], dict[int, list[str]]]:
    """Replay the turns; returns each turn's node and each node's turn ids."""
    turns = [t for c in replay.conversations for t in c.turns]
    contents = [f"{t.speaker}: {t.text}" if speaker_prefix else t.text for t in turns]
    vectors = None
    if with_vectors:
        vectors = np.asarray(embedder.embed(contents), dtype=np.float32)
    provider, model = getattr(embedder, "name", None), getattr(embedder, "model", None)
    named = isinstance(provider, str) and isinstance(model, str) and vectors is not None
    nodes = store.bulk_add(contents, robots=[t.speaker for t in turns],
                           embeddings=vectors, remembered_at=[t.time for t in turns],
                           defer_indexes=True,
                           embedding_model=(str(provider), str(model)) if named else None)
    if vectors is not None and vectors.shape[1] < _NATIVE_INDEX_BELOW:
        store.create_native_index(int(vectors.shape[1]))
    node_of = dict(zip(replay.keyed_turns(), nodes["node_id"].tolist()))
    turns_of: dict[int, list[str]] = {}
    for (_, turn_id), node in node_of.items():
        turns_of.setdefault(node, []).append(turn_id)
    return node_of, turns_of


def _score(store: LongTermMemory, replay: _Replay, node_of: dict[tuple[str, str], int],
           turns_of: dict[int, list[str]], strategies: list[str], k: int,
           query_vectors: dict[str, np.ndarray] | None) -> pd.DataFrame:
    asked = [(c, q) for c, q in replay.questions() if not q.abstention]
    if not asked:
        return pd.DataFrame()
    queries = pd.DataFrame({
        "query": [q.question for _, q in asked],
        "relevant": [sorted({node_of[(c, t)] for t in q.evidence}) for c, q in asked]})
    if query_vectors is not None:
        queries["vector"] = pd.Series([query_vectors[q.question] for _, q in asked],
                                      dtype=object)
    frame = evaluate_retrieval(store, queries, strategies=strategies, k=k).per_query
    position = frame["query_id"].to_numpy()
    first = frame["first_relevant_rank"]
    result = pd.DataFrame({
        "conversation": [asked[i][0] for i in position],
        "question_id": [asked[i][1].question_id for i in position],
        "question": frame["query"], "category": [asked[i][1].category for i in position],
        "strategy": frame["strategy"],
        "evidence": [list(asked[i][1].evidence) for i in position],
        "retrieved": [[t for node in nodes for t in turns_of.get(node, [])]
                      for nodes in frame["retrieved"]],
        "first_evidence_rank": first, "returned": frame["returned"]})
    for cutoff in _cutoffs(k):
        result[f"recall_any_at_{cutoff}"] = (first.fillna(k + 1) <= cutoff).astype("float64")
    # trec_eval's recall is the share of relevant memories found: all of them when it is 1.
    result[f"recall_all_at_{k}"] = (frame[f"recall_at_{k}"] >= 1 - 1e-9).astype("float64")
    result[f"ndcg_at_{k}"] = frame[f"ndcg_at_{k}"]
    result[f"mrr_at_{k}"] = frame[f"mrr_at_{k}"]
    result["latency_ms"] = frame["latency_ms"]
    return result


def _abstain(store: LongTermMemory, replay: _Replay, strategies: list[str], k: int,
             query_vectors: dict[str, np.ndarray] | None) -> list[dict[str, Any]]:
    rows = []
    for conversation, question in replay.questions():
        if not question.abstention:
            continue
        vector = query_vectors[question.question] if query_vectors is not None else None
        for strategy in strategies:
            store.clear_cache()
            started = time.perf_counter()
            found = store.search_by_strategy(strategy, query=question.question, limit=k,
                                             embedding=vector)
            rows.append({"conversation": conversation, "category": question.category,
                         "strategy": strategy, "returned": len(found),
                         "latency_ms": (time.perf_counter() - started) * 1000})
    return rows


def _evaluate_replay(url: str, replay: _Replay, *, initialise: bool, strategies: list[str],
                     k: int, embedder: Any, speaker_prefix: bool
                     ) -> tuple[pd.DataFrame, list[dict[str, Any]], list[dict[str, Any]]]:
    with_vectors = bool(VECTOR_STRATEGIES & set(strategies))
    texts = list(dict.fromkeys(q.question for _, q in replay.questions()))
    query_vectors = None
    if with_vectors and texts:
        query_vectors = dict(zip(texts, np.asarray(embedder.embed(texts), dtype=np.float32)))
    with LongTermMemory(url, init_schema=initialise, pool_size=1, cache_size=0) as store:
        node_of, turns_of = _remember(store, replay, embedder, with_vectors, speaker_prefix)
        scored = _score(store, replay, node_of, turns_of, strategies, k, query_vectors)
        abstained = _abstain(store, replay, strategies, k, query_vectors)
    counts = []
    for conversation in replay.conversations:
        nodes = {node_of[(conversation.conversation_id, t.turn_id)] for t in conversation.turns}
        counts.append({"conversation": conversation.conversation_id,
                       "turns": len(conversation.turns), "memories": len(nodes),
                       "questions": sum(not q.abstention for q in conversation.questions),
                       "abstention": sum(q.abstention for q in conversation.questions),
                       "unresolved": conversation.unresolved})
    return scored, abstained, counts


def _metrics(k: int) -> list[str]:
    return [*(f"recall_any_at_{c}" for c in _cutoffs(k)), f"recall_all_at_{k}",
            f"ndcg_at_{k}", f"mrr_at_{k}"]


def _per_question(scored: list[pd.DataFrame], k: int) -> pd.DataFrame:
    """The scored questions in the columns and dtypes documented, when none was scored too
    (every question an abstention question, or Ctrl-C before the first)."""
    columns = {"conversation": "string", "question_id": "string", "question": "string",
               "category": "string", "strategy": "string", "evidence": "object",
               "retrieved": "object", "first_evidence_rank": "Int64", "returned": "int64",
               **dict.fromkeys(_metrics(k), "float64"), "latency_ms": "float64"}
    frames = [f for f in scored if len(f)]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        {name: pd.Series(dtype=dtype) for name, dtype in columns.items()})
    return frame[list(columns)].astype(columns)


def _summary(per_question: pd.DataFrame, k: int) -> pd.DataFrame:
    metrics = _metrics(k)
    columns = ["strategy", "category", "questions", *metrics, "latency_p50_ms",
               "latency_p95_ms", "k"]
    if not len(per_question):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in columns}).astype(
            {"strategy": "string", "category": "string", "questions": "int64", "k": "int64"})
    every = per_question.assign(category="all")
    frames = []
    for frame in (per_question, every):
        grouped = frame.groupby(["strategy", "category"], sort=False)
        table = grouped[metrics].mean()
        table.insert(0, "questions", grouped.size())
        table["latency_p50_ms"] = grouped["latency_ms"].median()
        table["latency_p95_ms"] = grouped["latency_ms"].quantile(0.95)
        frames.append(table.reset_index())
    summary = pd.concat(frames, ignore_index=True)
    order = {s: i for i, s in enumerate(dict.fromkeys(per_question["strategy"]))}
    summary = summary.sort_values("strategy", key=lambda s: s.map(order), kind="stable")
    return summary.assign(k=k)[columns].reset_index(drop=True).astype(
        {"strategy": "string", "category": "string", "questions": "int64", "k": "int64"})


def _abstention_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    columns = ["strategy", "category", "questions", "returned_any", "returned_mean",
               "latency_p50_ms"]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in columns}).astype(
            {"strategy": "string", "category": "string", "questions": "int64"})
    frame = pd.DataFrame(rows)
    grouped = frame.groupby(["strategy", "category"], sort=False)
    return pd.DataFrame({
        "questions": grouped.size(),
        "returned_any": grouped["returned"].apply(lambda r: float((r > 0).mean())),
        "returned_mean": grouped["returned"].mean().astype("float64"),
        "latency_p50_ms": grouped["latency_ms"].median()}).reset_index()[columns].astype(
        {"strategy": "string", "category": "string", "questions": "int64"})


def evaluate_conversations(
    source: str | Path | Sequence[Conversation],
    *,
    format: str | None = None,
    strategies: str | Sequence[str] = EVALUATED_STRATEGIES,
    k: int = 10,
    embedding_service: Any = None,
    scope: Literal["conversation", "benchmark"] = "conversation",
    conversations: Sequence[str] | None = None,
    speaker_prefix: bool = True,
    server_url: str | None = None,
    keep: bool = False,
    progress: bool = True,
) -> ConversationEvaluation:
    """Replay a conversational benchmark into scratch memory and score every search strategy.

    Each conversation is remembered in a new database on the server (each speaker a robot,
    each turn a memory ``"<speaker>: <text>"`` at its session's time, through ``bulk_add``;
    an image's caption is kept in the text), then every question
    runs through every strategy with the cache off. A question counts as found when a
    memory holding one of its evidence turns is returned; nothing is judged by an LLM.

    Parameters
    ----------
    source : path or sequence of Conversation
        A LoCoMo, LongMemEval or JSON Lines file (see
        :func:`~htm_analytics.conversation_formats.read_conversations`), or conversations
        already read.
    format : {"locomo", "longmemeval", "jsonl"}, optional
        The file's layout; detected when not given.
    strategies : sequence of str
        Search strategies (:data:`~htm_analytics.store.SEARCH_STRATEGIES`).
    k : int
        Results per search and the metrics' cutoff, 1 to 1000.
    embedding_service : embedder, optional
        Embeds turns and questions for the vector strategies; default
        :func:`~htm_analytics.get_embedder` (``HTM_EMBEDDING__PROVIDER``, else the hashing
        embedder, which is lexical: it matches words, not meaning; use ``"minilm"`` for a
        semantic model).
    scope : {"conversation", "benchmark"}
        ``"conversation"``: one scratch database per conversation (per question for
        LongMemEval, whose questions each have their own history), as the benchmarks
        intend; ``"benchmark"``: every conversation in one database, each question then
        searching all of them.
    conversations : sequence of str, optional
        Only these conversations (e.g. LoCoMo's ``["conv-26", "conv-30"]``).
    speaker_prefix : bool
        Remember each turn as ``"<speaker>: <text>"``, as a chat agent's memory holds it
        (default), rather than the bare text. Questions name the speaker ("When did
        Caroline ..."): on LoCoMo's first three conversations the prefix lifts exact
        MiniLM search from 0.27 to 0.55 recall_any@10.
    server_url : str, optional
        The server to create the scratch databases on; default the configured one
        (``HTM_DBURL`` ... or the embedded server).
    keep : bool
        Keep the scratch databases (their names are in ``conversations["database"]``);
        by default each is dropped when its conversation is scored, on an error, or on
        Ctrl-C.
    progress : bool
        Show a progress bar (tqdm), counting questions times strategies.

    Returns
    -------
    ConversationEvaluation
        ``summary`` (strategy x category), ``per_question``, ``abstention`` and
        ``conversations`` frames. Ctrl-C returns what was finished, with
        ``interrupted=True`` and a ``RuntimeWarning``.

    Raises
    ------
    BenchmarkFormatError
        A malformed file, naming the record at fault (before any database is created).
    ValidationError
        Unknown strategies, scope or conversations, or a bad ``k``; a ``source`` that is
        neither a path nor conversations, or conversations that cannot be remembered or
        scored (an id given twice, a speaker no robot can be named, a time or text no
        memory can hold, evidence naming no turn), naming the conversation at fault
        (``field="source"``); all before any database is created.
    """
    k = validate_positive_int(k, field="k", maximum=1000)
    chosen = checked_strategies(strategies, SEARCH_STRATEGIES)
    if scope not in CONVERSATION_SCOPES:
        raise ValidationError(f"must be one of {CONVERSATION_SCOPES}, got {scope!r}",
                              field="scope")
    if isinstance(source, (str, os.PathLike)):
        try:
            source = read_conversations(source, format=format)
        except ValidationError as exc:
            if exc.field != "path":
                raise
            raise ValidationError(str(exc).removeprefix("path: "), field="source") from None
    # What bulk_add and the scoring would refuse, refused before any database exists.
    read = checked_conversations(source, speaker_prefix=bool(speaker_prefix))
    if conversations is not None:
        wanted = checked_names(conversations, field="conversations")
        unknown = set(wanted) - {c.conversation_id for c in read}
        if unknown:
            raise ValidationError(f"no conversation {sorted(unknown)} in the benchmark",
                                  field="conversations")
        read = [c for c in read if c.conversation_id in set(wanted)]
    if not any(c.questions for c in read):
        raise ValidationError("the benchmark has no question with evidence to score",
                              field="source")
    embedder = embedding_service if embedding_service is not None else get_embedder()
    server = resolve_database_url(server_url)
    replays = [_Replay([c]) for c in read] if scope == "conversation" else [_Replay(read)]
    scored: list[pd.DataFrame] = []
    abstained: list[dict[str, Any]] = []
    counts: list[dict[str, Any]] = []
    interrupted = False
    with progress_bar(bool(progress), sum(len(c.questions) for c in read) * len(chosen),
                      "conversations", "search") as bar:
        try:
            with scratch_database(server, f"{_PREFIX}_template") as template:
                with LongTermMemory(template, init_schema=True, pool_size=1):
                    pass  # the schema once; each conversation's database is a copy of it
                for replay in replays:
                    bar.note(replay.conversations[0].conversation_id
                             if len(replay.conversations) == 1 else "all")
                    with scratch_database(server, _PREFIX, template=database_name(template),
                                          keep=keep) as url:
                        frame, abstention, rows = _evaluate_replay(
                            url, replay, initialise=False, strategies=chosen, k=k,
                            embedder=embedder, speaker_prefix=speaker_prefix)
                        kept = database_name(url) if keep else None
                    scored.append(frame)
                    abstained += abstention
                    counts += [{**row, "database": kept} for row in rows]
                    bar.update(sum(len(c.questions) for c in replay.conversations)
                               * len(chosen))
        except KeyboardInterrupt:
            interrupted = True
            warnings.warn(f"evaluation interrupted: returning the {len(counts)} conversations "
                          "finished so far", RuntimeWarning, stacklevel=2)
    per_question = _per_question(scored, k)
    conversation_frame = pd.DataFrame(
        counts, columns=["conversation", "turns", "memories", "questions", "abstention",
                         "unresolved", "database"]).astype(
        {"conversation": "string", "turns": "int64", "memories": "int64",
         "questions": "int64", "abstention": "int64", "unresolved": "int64",
         "database": "string"})
    return ConversationEvaluation(summary=_summary(per_question, k),
                                  per_question=per_question,
                                  abstention=_abstention_frame(abstained),
                                  conversations=conversation_frame, interrupted=interrupted)


@checked_plot
def plot_conversations(df: pd.DataFrame, *, metric: str | None = None, ax: Any = None,
                       **kwargs: Any) -> Any:
    """Bars of one metric per question category (x) and strategy (one bar each), from the
    ``summary`` of :func:`evaluate_conversations`; ``metric`` defaults to
    ``recall_any_at_{k}``. The ``"all"`` category comes last. Returns the Axes."""
    ax = axes_or_new(ax, (8, 3.8))
    if not len(df):
        ax.set_title("No conversation questions were scored")
        return ax
    k = int(df["k"].iloc[0])
    metric = metric or f"recall_any_at_{k}"
    if metric not in df:
        raise ValidationError(f"no column {metric!r} in the summary", field="metric")
    table = df.pivot(index="category", columns="strategy", values=metric)
    categories = [c for c in dict.fromkeys(df["category"]) if c != "all"] + ["all"]
    strategies = list(dict.fromkeys(df["strategy"]))
    table = table.reindex(index=[c for c in categories if c in table.index],
                          columns=strategies)
    width = 0.8 / max(len(strategies), 1)
    positions = np.arange(len(table))
    for i, strategy in enumerate(strategies):
        ax.bar(positions + (i - (len(strategies) - 1) / 2) * width, table[strategy],
               width=width, label=str(strategy), **kwargs)
    ax.set_xticks(positions, [str(c) for c in table.index])
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(metric.replace("_at_", "@").replace("_", " "))
    ax.legend(fontsize=8, ncols=min(len(strategies), 4), loc="upper center")
    ax.set_title("Which search finds the evidence turns, per question category")
    return ax
