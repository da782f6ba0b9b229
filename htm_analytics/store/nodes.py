"""Nodes: remembering content once per SHA-256, retrieving, deleting, embedding provenance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from psycopg import errors as pg_errors
from psycopg import sql

from ..errors import ConcurrencyError, NotFoundError, ValidationError
from ..validation import (
    MAX_EMBEDDING_DIMENSION,
    prepare_embedding,
    tag_ancestors,
    validate_content,
    validate_flag,
    validate_id,
    validate_ids,
    validate_list,
    validate_name,
    validate_positive_int,
    validate_tag,
    validate_tag_list,
    validate_token_count,
)
from ._base import StoreBase
from ._common import (
    NODE_COLUMNS,
    content_hash,
    content_too_large,
    embedding_model_names,
    to_numpy,
)
from ._vectors import (
    EMBEDDING_MODELS,
    check_against_stored,
    check_model,
    stored_embedding_models,
)
from .forgetting import set_forgotten
from .tagging import TAG_NODE, ensure_tags

__all__ = ["NodesMixin"]

_INSERT_NODE = """
INSERT INTO nodes (content, content_hash, token_count, embedding, embedding_dimension)
VALUES (%(content)s, %(hash)s, %(token_count)s, %(embedding)s, %(dimension)s)
ON CONFLICT (content_hash) DO NOTHING
RETURNING id"""

_FIND_NODE_BY_HASH = "SELECT id FROM nodes WHERE content_hash = %s"

# The seed-era gem hashed content as given, white space included; the toolkit hashes it
# stripped. A node stored unstripped is found through the seed's full-text index on its first
# words (0.1 ms on 20k memories, where a trigram LIKE on the whole text took 31 ms; no full
# scan), checked on the stripped text; the given text's own hash is tried first.
_FIND_TWIN = """
SELECT id FROM (
    SELECT id, 0 AS preference FROM nodes WHERE content_hash = ANY(%(hashes)s::text[])
    UNION ALL
    (SELECT id, 1 FROM nodes
     WHERE %(probe)s
       AND to_tsvector('english', content) @@ plainto_tsquery('english', %(words)s)
       AND btrim(content, E' \\t\\n\\r\\f\\x0b') = %(content)s
     LIMIT 1)) AS twins
ORDER BY preference, id LIMIT 1"""

_PROBE_CHARACTERS = 100  # the first words only: a short query is as selective, and faster
# (no ORDER BY in the probe: with one, the planner may walk the primary key instead of the
# full-text index, computing to_tsvector row by row)

# Whether any stored content has leading or trailing white space: asked once per store,
# on its first add, to know whether the probe above is ever needed.
_ANY_UNSTRIPPED = """
SELECT EXISTS (SELECT 1 FROM nodes WHERE content ~ '^[[:space:]]|[[:space:]]$') AS found"""

_RECORD_EMBEDDING_MODEL = """
INSERT INTO node_embedding_models (node_id, provider, model, dimension)
VALUES (%(node_id)s, %(provider)s, %(model)s, %(dimension)s)
ON CONFLICT (node_id) DO NOTHING"""

_FILL_MISSING_EMBEDDING = """
UPDATE nodes SET embedding = %(embedding)s, embedding_dimension = %(dimension)s,
                 updated_at = CURRENT_TIMESTAMP
WHERE id = %(node_id)s AND embedding IS NULL"""

_LINK_ROBOT = sql.SQL("""
INSERT INTO robot_nodes AS rn (robot_id, node_id)
VALUES (%(robot_id)s, %(node_id)s)
ON CONFLICT (robot_id, node_id) DO UPDATE
   SET remember_count = rn.remember_count + 1,
       last_remembered_at = CURRENT_TIMESTAMP,
       updated_at = CURRENT_TIMESTAMP{restore}
RETURNING id, robot_id, node_id, first_remembered_at, last_remembered_at, remember_count,
          created_at, updated_at""")
_LINK_ROBOT_PLAIN = _LINK_ROBOT.format(restore=sql.SQL(""))
# The current gem soft-deletes links too: remembering again brings the link back.
_LINK_ROBOT_RESTORING = _LINK_ROBOT.format(restore=sql.SQL(", deleted_at = NULL"))

_RETRIEVE = f"""
UPDATE nodes SET access_count = access_count + 1, last_accessed = CURRENT_TIMESTAMP
WHERE id = %s
RETURNING {NODE_COLUMNS},
       CASE WHEN embedding_dimension IS NOT NULL
            THEN subvector(embedding, 1, embedding_dimension) END AS embedding"""

# The current gem keeps working memory per robot, soft-deletes, leaves embedding_dimension
# NULL and may keep local times: the access is counted on the live row, which is then read
# through the store's view of the tables (StoreBase._read), in the same transaction.
_COUNT_ACCESS = sql.SQL("""
UPDATE nodes SET access_count = access_count + 1, last_accessed = CURRENT_TIMESTAMP
WHERE id = %s{live} RETURNING id""")
_COUNT_LIVE_ACCESS = _COUNT_ACCESS.format(live=sql.SQL(" AND deleted_at IS NULL"))
_COUNT_ANY_ACCESS = _COUNT_ACCESS.format(live=sql.SQL(""))
_READ_NODE = f"""
SELECT {NODE_COLUMNS},
       CASE WHEN embedding_dimension IS NOT NULL
            THEN subvector(embedding, 1, embedding_dimension) END AS embedding
FROM nodes WHERE id = %s"""


_ADD_ATTEMPTS = 5


class _NodeDeletedMeanwhile(Exception):
    """Internal: the node found by its hash was deleted before this transaction linked it."""


class NodesMixin(StoreBase):
    """Adding, reading and deleting nodes, and the models of their embeddings (see
    :class:`~htm_analytics.LongTermMemory`)."""

    def add(
        self,
        *,
        content: str,
        robot_id: int,
        token_count: int = 0,
        embedding: Sequence[float] | np.ndarray | None = None,
        embedding_model: tuple[str, str] | None = None,
        tags: Sequence[str] = (),
        check_models: bool = True,
    ) -> dict[str, Any]:
        """Remember ``content`` for a robot, storing identical content once.

        The SHA-256 of the content finds an existing node. The same robot remembering it
        again increments its ``remember_count`` and ``last_remembered_at``; another robot gets
        its own ``robot_nodes`` row. One transaction: nothing is half-written, and concurrent
        callers adding the same content end with one node and exact counts.

        Parameters
        ----------
        content : str
            Text of the memory; leading and trailing white space is stripped first.
        robot_id : int
            A registered robot (:meth:`register_robot`).
        token_count : int
            Tokens in the content, for working-memory budgets.
        embedding : sequence of float or numpy.ndarray, optional
            Up to 2000 finite numbers; stored zero-padded to 2000 with its real dimension in
            ``embedding_dimension``. Given for content that is already stored without an
            embedding, it fills the gap.
        embedding_model : (provider, model), optional
            Which model produced ``embedding`` (``("ollama", "nomic-embed-text")``), recorded
            so that searches can refuse query vectors from another model.
        tags : sequence of str
            Tags to attach, with their ancestors, in the same transaction.
        check_models : bool
            Refuse an ``embedding`` of another model or dimension than the stored vectors,
            as searches do (default); False stores it as it is (a copy of another system's
            memory), and ``htm-analytics advise`` then reports the mix.

        Returns
        -------
        dict
            ``node_id`` (int), ``is_new`` (bool) and ``robot_node`` (dict: the robot's
            ``robot_nodes`` row with ``remember_count``, ``first_remembered_at``,
            ``last_remembered_at``).

        Raises
        ------
        ValidationError
            Empty content, NUL bytes, a bad embedding, a negative token count or an unknown
            robot.
        EmbeddingMismatchError
            ``embedding`` of another model or dimension than the stored vectors (as
            :meth:`check_embedding_model`); nothing is written.
        """
        given = content
        content = validate_content(content)
        robot_id = validate_id(robot_id, field="robot_id")
        token_count = validate_token_count(token_count)
        vector, dimension = (prepare_embedding(embedding) if embedding is not None
                             else (None, None))
        provider, model = embedding_model_names(embedding_model)
        tag_names = list(dict.fromkeys(a for t in validate_tag_list(tags)
                                       for a in tag_ancestors(validate_tag(t))))
        if validate_flag(check_models, field="check_models") and dimension is not None:
            check_against_stored(self, provider, model, dimension, writing=True,
                                 field="embedding_model" if provider else "embedding")
        digest = content_hash(content)
        for _attempt in range(_ADD_ATTEMPTS):
            try:
                node_id, is_new, robot_node, stored_vector = self._add_once(
                    content, given, digest, robot_id, int(token_count), vector, dimension,
                    (provider, model), tag_names)
                break
            except _NodeDeletedMeanwhile:
                continue  # a concurrent delete won: insert the content again
        else:
            raise ConcurrencyError(
                f"the node of this content was deleted by another session {_ADD_ATTEMPTS} "
                "times while it was being remembered; nothing was written")
        if is_new or tag_names:
            self._cache.clear()
        if stored_vector:
            self._vectors_added(provider, model, dimension, 1)
        return {"node_id": node_id, "is_new": is_new, "robot_node": dict(robot_node or {})}

    def _add_once(self, content: str, given: str, digest: str, robot_id: int,
                  token_count: int, vector: np.ndarray | None, dimension: int | None,
                  model_names: tuple[str | None, str | None],
                  tag_names: list[str]) -> tuple[int, bool, dict[str, Any] | None, bool]:
        """One attempt of :meth:`add`, in one transaction: the node, whether it is new, its
        robot link and whether its vector was stored."""
        provider, model = model_names
        with self._transaction(memory_operation=True) as cur:
            self._claim_event_logging(cur)
            row = self._find_twin(cur, content, given)
            is_new = False
            if row is None:
                try:
                    row = cur.execute(_INSERT_NODE, {
                        "content": content, "hash": digest, "token_count": token_count,
                        "embedding": vector, "dimension": dimension}).fetchone()
                except pg_errors.ProgramLimitExceeded as exc:
                    raise content_too_large(exc, "content") from exc
                is_new = row is not None
                if row is None:
                    # A committed twin exists (ON CONFLICT waited for any concurrent insert,
                    # and this new statement's snapshot sees it).
                    row = cur.execute(_FIND_NODE_BY_HASH, (digest,)).fetchone()
                    if row is None:  # the twin was deleted meanwhile
                        raise _NodeDeletedMeanwhile
            stored_vector = is_new and vector is not None
            if not is_new:
                if vector is not None:
                    cur.execute(_FILL_MISSING_EMBEDDING, {
                        "embedding": vector, "dimension": dimension, "node_id": row["id"]})
                    stored_vector = cur.rowcount == 1
                if self.schema_info.soft_deletes:  # the gem's add restores a forgotten twin
                    try:
                        set_forgotten(cur, self.schema_info, int(row["id"]), forgotten=False)
                    except NotFoundError as exc:  # deleted meanwhile: insert it again
                        raise _NodeDeletedMeanwhile from exc
            node_id = int(row["id"])
            try:
                link = (_LINK_ROBOT_RESTORING if self.schema_info.has_column(
                    "robot_nodes", "deleted_at") else _LINK_ROBOT_PLAIN)
                robot_node = cur.execute(
                    link, {"robot_id": robot_id, "node_id": node_id}).fetchone()
                self._log_events(cur, "remember", robot_id, [node_id])
                if stored_vector and provider is not None \
                        and self.schema_info.has_table("node_embedding_models"):
                    cur.execute(_RECORD_EMBEDDING_MODEL, {
                        "node_id": node_id, "provider": provider, "model": model,
                        "dimension": dimension})
                if tag_names:
                    tag_ids = ensure_tags(cur, tag_names)
                    cur.execute(TAG_NODE, {"node_id": node_id,
                                            "tag_ids": [tag_ids[n] for n in tag_names]})
            except pg_errors.ForeignKeyViolation as exc:
                # Which key is missing: the robot (a caller's mistake) or the node (deleted
                # by another session after this one found it: try again).
                if "(node_id)" in (exc.diag.message_detail or ""):
                    raise _NodeDeletedMeanwhile from exc
                raise ValidationError(
                    f"no robot with id {robot_id}; register it first with register_robot()",
                    field="robot_id") from exc
        return node_id, is_new, robot_node, stored_vector

    def _find_twin(self, cur: Any, content: str, given: str) -> dict[str, Any] | None:
        """The node already holding ``content`` stored unstripped (seed-era gem), if any.

        Only asked when some stored content is unstripped (checked once per store) or the
        caller's text was; a plain hash match is left to the insert's ON CONFLICT.
        """
        if self._unstripped_content is None:
            self._unstripped_content = bool(cur.execute(_ANY_UNSTRIPPED).fetchone()["found"])
        if not self._unstripped_content and given == content:
            return None
        # Whole words only: a cut word would be another lexeme.
        words = content if len(content) <= _PROBE_CHARACTERS else \
            content[:_PROBE_CHARACTERS + 1].rsplit(None, 1)[0]
        probe = self._unstripped_content and self.schema_info.has_content_fulltext_index
        hashes = list(dict.fromkeys([content_hash(content), content_hash(given)]))
        row: dict[str, Any] | None = cur.execute(_FIND_TWIN, {
            "hashes": hashes, "probe": probe, "words": words, "content": content,
        }).fetchone()
        return row

    def retrieve(self, node_id: int) -> dict[str, Any] | None:
        """Return a node and count the access (``access_count + 1``, ``last_accessed = now``).

        Returns
        -------
        dict or None
            Every column of ``nodes``; ``embedding`` is the unpadded float32 vector (or None).
            None when no such node exists.
        """
        node_id = validate_id(node_id, field="node_id")
        with self._transaction(memory_operation=True) as cur:
            if self._read_prefix:
                row = cur.execute(_COUNT_LIVE_ACCESS if self.schema_info.soft_deletes
                                  else _COUNT_ANY_ACCESS, (node_id,)).fetchone()
                if row is not None:
                    row = cur.execute(self._read(_READ_NODE), (node_id,)).fetchone()
            else:
                row = cur.execute(_RETRIEVE, (node_id,)).fetchone()
            if row is None:
                return None
            self._log_events(cur, "retrieve", None, [node_id])
        if row["embedding"] is not None:
            row["embedding"] = to_numpy(row["embedding"])
        return row

    def robots_of_nodes(self, node_ids: Sequence[int]) -> dict[int, list[str]]:
        """The names of the robots that remember each node: ``{node_id: [names]}``."""
        ids = validate_ids(node_ids, field="node_ids")
        rows = self._fetch("""SELECT rn.node_id, array_agg(r.name ORDER BY r.name) AS robots
                              FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
                              WHERE rn.node_id = ANY(%s) GROUP BY rn.node_id""", (ids,),
                           memory_operation=True)
        found = {int(r["node_id"]): list(r["robots"]) for r in rows}
        return {node: found.get(node, []) for node in ids}

    def node_ids_by_content(self, contents: Sequence[str]) -> list[int | None]:
        """The node id storing each text (compared by SHA-256 of the stripped text), or None."""
        contents = validate_list(contents, field="contents")
        stripped = [validate_content(c, field=f"contents[{i}]") for i, c in enumerate(contents)]
        hashes = [content_hash(c) for c in stripped]
        given = [content_hash(c) if isinstance(c, str) else h for c, h in zip(contents, hashes)]
        rows = self._fetch("SELECT content_hash, id FROM nodes WHERE content_hash = ANY(%s)",
                           (list(set(hashes + given)),), memory_operation=True)
        found = {r["content_hash"]: int(r["id"]) for r in rows}
        result = [found.get(h, found.get(g)) for h, g in zip(hashes, given)]
        missing = [i for i, node in enumerate(result) if node is None]
        if missing:
            # Stored unstripped by the seed-era gem?
            with self._transaction(memory_operation=True) as cur:
                for i in missing:
                    twin = self._find_twin(cur, stripped[i], contents[i])
                    result[i] = int(twin["id"]) if twin else None
        return result

    def exists(self, node_id: int, *, forgotten: bool = False) -> bool:
        """Whether a node with this id exists (with ``forgotten``, also one forgotten softly,
        which reads leave out)."""
        node_id = validate_id(node_id, field="node_id")
        forgotten = validate_flag(forgotten, field="forgotten")
        # public.nodes: every row, past the read prefix's live-rows-only nodes.
        table = "public.nodes" if forgotten else "nodes"
        return bool(self._fetch(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE id = %s) AS e",
                                (node_id,), memory_operation=True)[0]["e"])

    def existing_node_ids(self, node_ids: Sequence[int]) -> set[int]:
        """Which of ``node_ids`` are memories here (live ones, where the schema forgets)."""
        wanted = validate_ids(node_ids, field="node_ids")
        rows = self._fetch("SELECT id FROM nodes WHERE id = ANY(%s::bigint[])", (wanted,),
                           memory_operation=True)
        return {int(r["id"]) for r in rows}

    def delete(self, node_id: int) -> bool:
        """Delete a node permanently; its robot links and tag links go with it (cascade).

        The query cache is cleared. Returns True if a node was deleted, False if none existed.
        """
        node_id = validate_id(node_id, field="node_id")
        with self._transaction(memory_operation=True) as cur:
            self._claim_event_logging(cur)
            deleted = cur.execute("DELETE FROM nodes WHERE id = %s RETURNING id",
                                  (node_id,)).fetchone()
            if deleted:
                self._log_events(cur, "delete", None, [node_id])
        self._cache.clear()
        self._forget_stored_models()
        return deleted is not None

    def embedding_models(self) -> pd.DataFrame:
        """Which models produced the stored embeddings.

        Returns
        -------
        pandas.DataFrame
            ``provider``, ``model`` (string, NA for embeddings stored without that
            information), ``dimension`` and ``nodes`` (int64), most nodes first.
        """
        return self.fetch_frame(EMBEDDING_MODELS, dtypes={
            "provider": "string", "model": "string", "dimension": "int64", "nodes": "int64"})

    def check_embedding_model(self, provider: str, model: str, dimension: int) -> None:
        """Refuse to search with vectors of ``provider``/``model`` at ``dimension`` when the
        stored vectors come from another model or have another dimension.

        Embeddings stored without a model name pass if their dimension matches (there is no
        way to tell them apart). The stored models are read once and kept, with this
        store's own vectors counted in, for ``cache_ttl`` seconds (then read again, to see
        other processes' vectors); every vector search makes the same check.

        Raises
        ------
        EmbeddingError
            Naming the stored models and the query's.
        """
        provider = validate_name(provider, field="provider")
        model = validate_name(model, field="model")
        dimension = validate_positive_int(dimension, field="dimension",
                                          maximum=MAX_EMBEDDING_DIMENSION)
        check_model(stored_embedding_models(self), provider, model, dimension, field="model")
