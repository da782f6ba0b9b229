"""HTM: a robot that remembers and recalls, with a token-budgeted working memory."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from ..errors import EmbeddingError, HTMError, ValidationError
from ..store import LongTermMemory
from ..validation import (
    validate_content,
    validate_embedding_model,
    validate_flag,
    validate_id,
    validate_name,
    validate_number,
    validate_positive_int,
    validate_tag,
    validate_tag_list,
    validate_token_count,
)
from .embeddings import Embedder, get_embedder
from .timeframes import parse_timeframe
from .tokens import count_tokens
from .working_memory import WorkingMemory, checked_clock

__all__ = ["HTM"]


def _embedder(embedder: Any) -> Embedder:
    """HTM's ``embedder`` argument: a provider's name (or None) for :func:`get_embedder`, or
    an object with ``embed`` and the ``name`` and ``model`` it records with each vector."""
    if embedder is None or isinstance(embedder, str):
        try:
            return get_embedder(embedder)
        except ValidationError as exc:
            raise ValidationError(str(exc).removeprefix(f"{exc.field}: "),
                                  field="embedder") from None
    if not callable(getattr(embedder, "embed", None)):
        raise ValidationError(f"must be a provider name or an object with embed(), got "
                              f"{type(embedder).__name__}", field="embedder")
    validate_embedding_model((getattr(embedder, "name", None), getattr(embedder, "model", None)),
                             field="embedder")
    return cast(Embedder, embedder)


def _embedded(embedder: Embedder, texts: str | list[str]) -> np.ndarray:
    """``embedder``'s vectors of ``texts``, one row per text (a ``(d,)`` answer for one text
    is one row): whatever it raises or returns amiss is an :class:`EmbeddingError`, before
    anything is written."""
    where = f"the embedder {embedder.name}/{embedder.model}"
    count = 1 if isinstance(texts, str) else len(texts)
    try:
        vectors = embedder.embed(texts)
    except HTMError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
    try:
        matrix = np.asarray(vectors)
    except (TypeError, ValueError) as exc:  # ragged rows
        raise EmbeddingError(f"{where} returned no array of vectors: {exc}") from None
    if matrix.ndim == 1 and count == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or matrix.shape[0] != count:
        raise EmbeddingError(f"{where} returned an array of shape {matrix.shape} for {count} "
                             f"text(s), not one vector per text")
    declared = getattr(embedder, "dimensions", None)
    if isinstance(declared, int) and declared != matrix.shape[1]:
        raise EmbeddingError(f"{where} declares {declared} dimensions but returned "
                             f"{matrix.shape[1]}")
    return matrix


def _token_counter(counter: Any) -> Callable[[str], int]:
    """HTM's ``token_counter``: None (:func:`count_tokens`) or a callable."""
    if counter is None:
        return count_tokens
    if not callable(counter):
        raise ValidationError(f"must be a callable taking a text and returning an int, got "
                              f"{type(counter).__name__}", field="token_counter")
    return cast(Callable[[str], int], counter)


def _open_store(store: Any) -> tuple[LongTermMemory, bool]:
    """HTM's ``store``: a store to share, or one opened from a URL (or the default)."""
    if isinstance(store, LongTermMemory):
        return store, False
    if store is not None and not isinstance(store, str):
        raise ValidationError(f"must be a LongTermMemory, a database URL or None, got "
                              f"{type(store).__name__}", field="store")
    try:
        return LongTermMemory(store, init_schema=store is None), True
    except ValidationError as exc:
        if exc.field == "store":
            raise
        raise ValidationError(str(exc).removeprefix(f"{exc.field}: "),
                              field="store") from None


class HTM:
    """A robot's memory: remember, recall and forget, over a shared long-term store.

    Parameters
    ----------
    robot_name : str, optional
        Found or created in the store (default ``robot_`` + 8 random hex digits).
    working_memory_size : int
        Token budget of the in-process working memory.
    store : LongTermMemory, str or None
        A store to share (not closed by :meth:`close`), a database URL, or None for the
        default database (``HTM_DBURL`` ... or the embedded server).
    embedder : Embedder, str or None
        An embedding provider or its name (:func:`~htm_analytics.get_embedder`); default from
        ``HTM_EMBEDDING__PROVIDER``, else the offline ``hashing`` provider.
    token_counter : callable, optional
        ``str -> int``; default :func:`~htm_analytics.count_tokens` (words and punctuation,
        offline). A counter that fails or returns anything but a token count makes the call
        counting with it raise :class:`~htm_analytics.ValidationError` naming
        ``token_counter``, before anything is written.
    clock : callable, optional
        Returns the current aware datetime (default: UTC now); used for timeframe phrases
        and working memory. Read once here and once at the start of each call that uses it
        (:meth:`remember`, :meth:`remember_many` and :meth:`recall` use that one moment
        throughout): a clock that is not callable, fails or returns anything but an aware
        datetime from 1678 to 2261 raises :class:`~htm_analytics.ValidationError` naming
        ``clock``, before anything is written.
    buffer_writes : bool
        Write the working-memory steps of :meth:`recall` and :meth:`remember` (access
        counts, flags, ``recall`` and ``evict`` events) behind, in sets
        (:meth:`LongTermMemory.buffer_working_memory`; default True): a recall then costs
        about its search. They reach the database within a second, on :meth:`flush`,
        on :meth:`close` and at exit. False writes each step before returning.
    log_queries : int
        Where the database has the query log (``htm-analytics init-db``, migration 011) and
        this role may write to it, the first vector recall and then one in ``log_queries``
        log the query vector they searched with (one short statement; the log keeps the last
        1,000), for ``htm-analytics collect`` to measure recall on real questions. Default
        10; 1 logs every vector recall, 0 none.

    Raises
    ------
    ValidationError
        A bad argument, naming it; checked before the store is opened or anything written.

    Examples
    --------
    >>> with HTM("planner") as htm:                                    # doctest: +SKIP
    ...     htm.remember("PostgreSQL is our primary database", tags=["database:postgresql"])
    ...     htm.recall("which database?", timeframe="last 7 days")
    """

    def __init__(self, robot_name: str | None = None, *, working_memory_size: int = 128_000,
                 store: LongTermMemory | str | None = None,
                 embedder: Embedder | str | None = None,
                 token_counter: Callable[[str], int] | None = None,
                 clock: Callable[[], dt.datetime] | None = None,
                 buffer_writes: bool = True, log_queries: int = 10) -> None:
        # Checked before the store opens (which may create the schema): "" is no name.
        if robot_name is not None:
            robot_name = validate_name(robot_name, field="robot_name")
        working_memory_size = validate_positive_int(working_memory_size,
                                                    field="working_memory_size")
        self.log_queries = validate_number(log_queries, field="log_queries", minimum=0,
                                           integer=True)
        self._vector_recalls = 0
        self.embedder: Embedder = _embedder(embedder)
        self.token_counter = _token_counter(token_counter)
        # read once here; its working memory uses the same checked clock
        self._clock = checked_clock(clock, bounded=True)
        self.working_memory = WorkingMemory(working_memory_size, clock=self._clock)
        self.buffer_writes = validate_flag(buffer_writes, field="buffer_writes")
        self.store, self._owns_store = _open_store(store)
        self.robot_name = robot_name if robot_name is not None else \
            f"robot_{uuid.uuid4().hex[:8]}"
        self.robot_id = self.store.register_robot(self.robot_name)  # marks it active

    def _write_step(self, *, held: Sequence[int] = (), evicted: Sequence[int] = (),
                    recalled: Sequence[int] = ()) -> None:
        write = (self.store.buffer_working_memory if self.buffer_writes
                 else self.store.update_working_memory)
        write(self.robot_id, held=held, evicted=evicted, recalled=recalled)

    def _log_query(self, vector: np.ndarray | None) -> None:
        """Log the first vector recall's query vector, then one in ``log_queries``."""
        if vector is None or not self.log_queries:
            return
        turn, self._vector_recalls = self._vector_recalls, self._vector_recalls + 1
        if turn % self.log_queries == 0 and self.store.logs_query_vectors:
            self.store.log_query_vector(vector, robot_id=self.robot_id)

    def flush(self) -> int:
        """Write buffered working-memory steps now (of every robot of the store); returns
        how many steps were written."""
        return self.store.flush_recall_writes()

    @property
    def _model(self) -> tuple[str, str]:
        return (self.embedder.name, self.embedder.model)

    def _count(self, content: str, token_count: int | None) -> int:
        if token_count is not None:
            return validate_token_count(token_count)
        try:
            counted = self.token_counter(content)
        except ValidationError as exc:
            raise ValidationError(str(exc), field="token_counter") from exc
        except Exception as exc:
            raise ValidationError(f"failed on {content[:40]!r}: {type(exc).__name__}: {exc}",
                                  field="token_counter") from exc
        try:
            return validate_token_count(counted, field="token_counter")
        except ValidationError as exc:
            raise ValidationError(f"returned {counted!r} for {content[:40]!r}, not a token "
                                  "count (an int from 0 to 2**31 - 1)",
                                  field="token_counter") from exc

    def _hold(self, node_id: int, content: str, tokens: int, *, now: dt.datetime,
              access_count: int = 0,
              last_accessed: dt.datetime | None = None) -> list[int] | None:
        """Put a node in working memory at ``now`` (the call's one reading of the clock, taken
        before it wrote: a clock read here could fail after the write); return the keys
        evicted to make room (the caller flags them in the database), or None if the node is
        larger than the whole budget."""
        if tokens > self.working_memory.max_tokens:
            return None
        self.working_memory.remove(node_id)  # re-added below as the most recent entry
        evicted = self.working_memory.evict_to_make_space(tokens, now=now)
        self.working_memory.add(node_id, content, token_count=tokens,
                                access_count=access_count, last_accessed=last_accessed,
                                now=now)
        return [e["key"] for e in evicted]

    def remember(self, content: str, *, tags: Sequence[str] = (),
                 token_count: int | None = None) -> int:
        """Remember ``content``; returns its node id.

        The content is stripped and validated, its tokens counted, and it is embedded only if
        no robot has remembered it before. Node, robot link, tags (with ancestors) and the
        embedding's model are written in one transaction; then the node enters working memory
        (evicting the least valuable entries, flagged in the database) and the robot's
        ``last_active`` is updated.

        Raises
        ------
        ValidationError
            Bad content or tags, more tokens than the whole working memory, or a clock that
            fails (all checked before anything is written).
        EmbeddingError
            The provider failed (nothing is written).
        """
        content = validate_content(content)
        tags = [validate_tag(t) for t in validate_tag_list(tags)]
        tokens = self._count(content, token_count)
        if tokens > self.working_memory.max_tokens:
            raise ValidationError(f"{tokens} tokens do not fit this robot's working memory of "
                                  f"{self.working_memory.max_tokens}", field="content")
        # The one reading of the clock, before anything is written; reused below.
        now = self._clock()
        known = self.store.node_ids_by_content([content])[0]
        embedding = None if known is not None else _embedded(self.embedder, content)[0]
        result = self.store.add(content=content, robot_id=self.robot_id, token_count=tokens,
                                embedding=embedding,
                                embedding_model=self._model if embedding is not None else None,
                                tags=tags)
        node_id = int(result["node_id"])
        evicted = self._hold(node_id, content, tokens, now=now) or []
        self._write_step(held=[node_id], evicted=evicted)
        return node_id

    def remember_many(self, contents: Sequence[str], *,
                      tags: Sequence[Sequence[str]] | None = None,
                      token_counts: Sequence[int] | None = None) -> list[int]:
        """Remember a batch of memories at once; returns their node ids, in order.

        What :meth:`remember` does for each item, with the writes batched: the contents are
        validated, counted and checked against the working-memory budget first (nothing is
        written if one is bad); only contents no robot has remembered are embedded, in one
        call of the provider; the new ones are stored with one binary ``COPY`` and set-based
        statements (:meth:`LongTermMemory.bulk_add`, one transaction) and the already known
        ones are linked to this robot in a second one; then all enter working memory in one
        step. Repeated contents in a batch are one node remembered several times.

        Parameters
        ----------
        contents : sequence of str
        tags : sequence of sequences of str, optional
            Tags per memory (with their ancestors, as :meth:`remember`).
        token_counts : sequence of int, optional
            Tokens per memory (default: this robot's ``token_counter``).

        Raises
        ------
        ValidationError
            A bad item (its index in ``field``), mismatched lengths, or ``tags`` or
            ``token_counts`` that are no list (a string or bytes is none).
        EmbeddingError
            The provider failed (nothing is written).
        """
        if isinstance(contents, str) or not isinstance(contents, Sequence):
            raise ValidationError("must be a list of strings", field="contents")
        texts = [validate_content(c, field=f"contents[{i}]") for i, c in enumerate(contents)]
        n = len(texts)
        if not n:
            return []
        tag_lists: list[list[str]] = [[] for _ in texts]
        if tags is not None:
            if isinstance(tags, str) or not isinstance(tags, Sequence) or len(tags) != n:
                raise ValidationError(f"must have one list of tags per content ({n})",
                                      field="tags")
            for i, row in enumerate(tags):
                if isinstance(row, str):
                    raise ValidationError("must be a list of tags, not one string",
                                          field=f"tags[{i}]")
                tag_lists[i] = [validate_tag(t, field=f"tags[{i}]")
                                for t in validate_tag_list(row, field=f"tags[{i}]")]
        if token_counts is not None and (isinstance(token_counts, (str, bytes, bytearray))
                                         or not isinstance(token_counts, Sequence)
                                         or len(token_counts) != n):
            raise ValidationError(f"must be a list of integers, one count per content ({n})",
                                  field="token_counts")
        tokens = [self._count(text, None if token_counts is None else token_counts[i])
                  for i, text in enumerate(texts)]
        for i, count in enumerate(tokens):
            if count > self.working_memory.max_tokens:
                raise ValidationError(f"{count} tokens do not fit this robot's working memory "
                                      f"of {self.working_memory.max_tokens}",
                                      field=f"contents[{i}]")
        # The one reading of the clock, before anything is written; reused below.
        now = self._clock()
        known = self.store.node_ids_by_content(texts)
        new = [i for i in range(n) if known[i] is None]
        old = [i for i in range(n) if known[i] is not None]
        node_ids: list[int] = [0] * n
        if new:
            distinct = list(dict.fromkeys(texts[i] for i in new))
            vectors = dict(zip(distinct, _embedded(self.embedder, distinct)))
            stored = self.store.bulk_add(
                [texts[i] for i in new], robots=self.robot_name,
                embeddings=np.stack([vectors[texts[i]] for i in new]),
                tags=[tag_lists[i] for i in new], token_counts=[tokens[i] for i in new],
                embedding_model=self._model, defer_indexes=False)
            for i, node in zip(new, stored["node_id"].tolist()):
                node_ids[i] = int(node)
        if old:
            stored = self.store.bulk_add(
                [texts[i] for i in old], robots=self.robot_name,
                tags=[tag_lists[i] for i in old], token_counts=[tokens[i] for i in old],
                defer_indexes=False)
            for i, node in zip(old, stored["node_id"].tolist()):
                node_ids[i] = int(node)
        evicted: list[int] = []
        for node, text, count in zip(node_ids, texts, tokens):
            evicted += self._hold(node, text, count, now=now) or []
        self._write_step(held=[k for k in dict.fromkeys(node_ids) if k in self.working_memory],
                         evicted=[k for k in dict.fromkeys(evicted)
                                  if k not in self.working_memory])
        return node_ids

    def recall(self, topic: str, *, timeframe: Any = None, limit: int = 20,
               strategy: str = "vector_bm25", raw: bool = False) -> list[Any]:
        """Find memories about ``topic``.

        Parameters
        ----------
        topic : str
        timeframe : None, (start, end), date or phrase
            See :func:`~htm_analytics.agent.timeframes.parse_timeframe` ("today", "last 7 days",
            "last week", "this month", "recently"...). An unreadable phrase is an error.
        limit : int
        strategy : {'vector_bm25', 'vector', 'fulltext', 'fulltext_any', 'fuzzy', 'hybrid', 'rrf'}
            Any of :data:`~htm_analytics.store.SEARCH_STRATEGIES`. ``vector_bm25`` (the
            default): vector similarity and BM25 on one bounded candidate set
            (:meth:`LongTermMemory.search_vector_bm25`), the most accurate on the corpus
            benchmark (docs/retrieval.md). Or vector similarity alone (the query embedded by
            this robot's provider, which must be the model of the stored vectors), full text
            (every word, or any word ranked), trigram similarity, the reference 0.7/0.3
            hybrid, or reciprocal rank fusion of vectors and any-word full text.
        raw : bool
            Return the store's rows (dicts with ids and scores) instead of the contents.

        Recalled memories enter working memory and count as accessed (written behind unless
        ``buffer_writes=False``: see :meth:`flush`); a vector recall's query vector may be
        logged (``log_queries``).
        """
        # The store validates the topic, limit and strategy, embeds the topic with this
        # robot's provider and checks its model against the stored vectors', all once.
        raw = validate_flag(raw, field="raw")
        now = self._clock()  # the one reading, before anything changes; reused below
        window = parse_timeframe(timeframe, now=now)
        try:
            rows = self.store.search_by_strategy(strategy, query=topic, limit=limit,
                                                 timeframe=window,
                                                 embedding_service=self.embedder)
        except ValidationError as exc:
            if exc.field != "query":
                raise
            raise ValidationError(str(exc).removeprefix("query: "), field="topic") from None
        # Counted first: a counter that fails does so before anything changes.
        counts = [int(row.get("token_count") or self._count(row["content"], None))
                  for row in rows]
        self._log_query(getattr(rows, "query_vector", None))
        held, evicted = [], []
        for row, tokens in zip(rows, counts):
            made_room = self._hold(int(row["id"]), row["content"], tokens, now=now,
                                   access_count=int(row.get("access_count") or 0) + 1,
                                   last_accessed=now)
            if made_room is not None:
                held.append(int(row["id"]))
                evicted += made_room
        # One write for the whole recall; a node evicted and then recalled stays held.
        self._write_step(
            recalled=[int(r["id"]) for r in rows],
            held=[k for k in held if k in self.working_memory],
            evicted=[k for k in dict.fromkeys(evicted) if k not in self.working_memory])
        return list(rows) if raw else [r["content"] for r in rows]

    def forget(self, node_id: int, *, permanent: bool = False,
               confirm: str | None = None) -> bool:
        """Forget a memory, for every robot, as the database's HTM era does.

        On the current gem's schema (soft deletes) the memory is marked deleted and
        :meth:`restore` brings it back; ``permanent=True`` with ``confirm="confirmed"``
        deletes it. On the seed-era schema forgetting is always permanent and needs
        ``confirm="confirmed"``. See :meth:`LongTermMemory.forget`.

        Raises
        ------
        ValidationError
            A permanent deletion without the confirmation (nothing is deleted).
        NotFoundError
            No such node.
        """
        node_id = validate_id(node_id, field="node_id")
        self.store.forget(node_id, permanent=permanent, confirm=confirm)
        self.working_memory.remove(node_id)
        self.store.update_robot_activity(self.robot_id)
        return True

    def restore(self, node_id: int) -> bool:
        """Bring back a memory forgotten softly (the current gem's schema).

        Raises
        ------
        NoSoftDeleteError
            The schema has no soft delete (seed era): a forgotten memory is gone.
        NotFoundError
            No such node.
        ValidationError
            The memory is not forgotten (as the gem's ``restore``).
        """
        node_id = validate_id(node_id, field="node_id")
        if not self.store.restore(node_id):
            raise ValidationError(f"memory {node_id} is not forgotten", field="node_id")
        self.store.update_robot_activity(self.robot_id)
        return True

    def purge_deleted(self, *, older_than: dt.datetime | dt.date | dt.timedelta,
                      confirm: str | None = None) -> int:
        """Delete for good the memories forgotten before ``older_than`` (an aware datetime, a
        date or an age); needs ``confirm="confirmed"``. Returns how many were deleted. See
        :meth:`LongTermMemory.purge_deleted`."""
        return self.store.purge_deleted(older_than=older_than, confirm=confirm)

    def clear_working_memory(self) -> int:
        """Empty working memory (flagging the nodes evicted); returns how many were held."""
        keys = self.working_memory.clear()
        if keys:
            self.store.mark_evicted(cast(list[int], keys), robot_id=self.robot_id)
        return len(keys)

    def assemble_context(self, strategy: str = "balanced", max_tokens: int | None = None) -> str:
        """Working memory as one text for a prompt; see :meth:`WorkingMemory.assemble_context`."""
        return self.working_memory.assemble_context(strategy, max_tokens)

    def close(self) -> None:
        """Flush buffered writes; close the store if this HTM opened it."""
        if self._owns_store:
            self.store.close()
        else:
            self.store.flush_recall_writes()

    def __enter__(self) -> HTM:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"HTM(robot_name={self.robot_name!r}, robot_id={self.robot_id}, "
                f"embedder={self.embedder.name}/{self.embedder.model}, "
                f"working_memory={self.working_memory!r})")
