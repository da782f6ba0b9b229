"""Nodes: remembering content once per SHA-256, retrieving, deleting, embedding provenance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import errors as pg_errors

from ..errors import ConcurrencyError, ValidationError
from ..validation import (
    prepare_embedding,
    tag_ancestors,
    validate_content,
    validate_id,
    validate_ids,
    validate_tag,
    validate_tag_list,
)
from ._base import StoreBase
from ._common import (
    LOG_EVENTS,
    NODE_COLUMNS,
    content_hash,
    content_too_large,
    embedding_model_names,
    to_numpy,
)
from .tagging import TAG_NODE, ensure_tags

__all__ = ["NodesMixin"]

_INSERT_NODE = """
INSERT INTO nodes (content, content_hash, token_count, embedding, embedding_dimension)
VALUES (%(content)s, %(hash)s, %(token_count)s, %(embedding)s, %(dimension)s)
ON CONFLICT (content_hash) DO NOTHING
RETURNING id"""

_FIND_NODE_BY_HASH = "SELECT id FROM nodes WHERE content_hash = %s"

_RECORD_EMBEDDING_MODEL = """
INSERT INTO node_embedding_models (node_id, provider, model, dimension)
VALUES (%(node_id)s, %(provider)s, %(model)s, %(dimension)s)
ON CONFLICT (node_id) DO NOTHING"""

_FILL_MISSING_EMBEDDING = """
UPDATE nodes SET embedding = %(embedding)s, embedding_dimension = %(dimension)s,
                 updated_at = CURRENT_TIMESTAMP
WHERE id = %(node_id)s AND embedding IS NULL"""

_LINK_ROBOT = """
INSERT INTO robot_nodes AS rn (robot_id, node_id)
VALUES (%(robot_id)s, %(node_id)s)
ON CONFLICT (robot_id, node_id) DO UPDATE
   SET remember_count = rn.remember_count + 1,
       last_remembered_at = CURRENT_TIMESTAMP,
       updated_at = CURRENT_TIMESTAMP
RETURNING id, robot_id, node_id, first_remembered_at, last_remembered_at, remember_count,
          created_at, updated_at"""


_RETRIEVE = f"""
UPDATE nodes SET access_count = access_count + 1, last_accessed = CURRENT_TIMESTAMP
WHERE id = %s
RETURNING {NODE_COLUMNS},
       CASE WHEN embedding_dimension IS NOT NULL
            THEN subvector(embedding, 1, embedding_dimension) END AS embedding"""


_ADD_ATTEMPTS = 5


class _NodeDeletedMeanwhile(Exception):
    """Internal: the node found by its hash was deleted before this transaction linked it."""


class NodesMixin(StoreBase):
    """Adding, reading and deleting nodes (see :class:`~htm_analytics.LongTermMemory`)."""

    def add(
        self,
        *,
        content: str,
        robot_id: int,
        token_count: int = 0,
        embedding: Sequence[float] | np.ndarray | None = None,
        embedding_model: tuple[str, str] | None = None,
        tags: Sequence[str] = (),
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
        """
        content = validate_content(content)
        robot_id = validate_id(robot_id, field="robot_id")
        if isinstance(token_count, bool) or not isinstance(token_count, (int, np.integer)) \
                or token_count < 0 or token_count > 2**31 - 1:
            raise ValidationError(f"must be an integer >= 0, got {token_count!r}",
                                  field="token_count")
        vector, dimension = (prepare_embedding(embedding) if embedding is not None
                             else (None, None))
        provider, model = embedding_model_names(embedding_model)
        tag_names = list(dict.fromkeys(a for t in validate_tag_list(tags)
                                       for a in tag_ancestors(validate_tag(t))))
        digest = content_hash(content)
        for _attempt in range(_ADD_ATTEMPTS):
            try:
                node_id, is_new, robot_node = self._add_once(
                    content, digest, robot_id, int(token_count), vector, dimension,
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
        if vector is not None:
            self._embedding_models = None
        return {"node_id": node_id, "is_new": is_new, "robot_node": dict(robot_node or {})}

    def _add_once(self, content: str, digest: str, robot_id: int, token_count: int,
                  vector: np.ndarray | None, dimension: int | None,
                  model_names: tuple[str | None, str | None],
                  tag_names: list[str]) -> tuple[int, bool, dict[str, Any] | None]:
        """One attempt of :meth:`add`, in one transaction."""
        provider, model = model_names
        with self._transaction() as cur:
            try:
                row = cur.execute(_INSERT_NODE, {
                    "content": content, "hash": digest, "token_count": token_count,
                    "embedding": vector, "dimension": dimension}).fetchone()
            except pg_errors.ProgramLimitExceeded as exc:
                raise content_too_large(exc, "content") from exc
            is_new = row is not None
            stored_vector = is_new and vector is not None
            if row is None:
                # A committed twin exists (ON CONFLICT waited for any concurrent insert, and
                # this new statement's snapshot sees it).
                row = cur.execute(_FIND_NODE_BY_HASH, (digest,)).fetchone()
                if row is None:  # the twin was deleted meanwhile
                    raise _NodeDeletedMeanwhile
                if vector is not None:
                    cur.execute(_FILL_MISSING_EMBEDDING, {
                        "embedding": vector, "dimension": dimension, "node_id": row["id"]})
                    stored_vector = cur.rowcount == 1
            node_id = int(row["id"])
            try:
                robot_node = cur.execute(
                    _LINK_ROBOT, {"robot_id": robot_id, "node_id": node_id}).fetchone()
                cur.execute(LOG_EVENTS, {"kind": "remember", "robot_id": robot_id,
                                          "node_ids": [node_id]})
                if stored_vector and provider is not None:
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
        return node_id, is_new, robot_node

    def retrieve(self, node_id: int) -> dict[str, Any] | None:
        """Return a node and count the access (``access_count + 1``, ``last_accessed = now``).

        Returns
        -------
        dict or None
            Every column of ``nodes``; ``embedding`` is the unpadded float32 vector (or None).
            None when no such node exists.
        """
        node_id = validate_id(node_id, field="node_id")
        with self._transaction() as cur:
            row = cur.execute(_RETRIEVE, (node_id,)).fetchone()
            if row is None:
                return None
            cur.execute(LOG_EVENTS, {"kind": "retrieve", "robot_id": None,
                                      "node_ids": [node_id]})
        if row["embedding"] is not None:
            row["embedding"] = to_numpy(row["embedding"])
        return row

    def robots_of_nodes(self, node_ids: Sequence[int]) -> dict[int, list[str]]:
        """The names of the robots that remember each node: ``{node_id: [names]}``."""
        ids = validate_ids(node_ids, field="node_ids")
        rows = self._fetch("""SELECT rn.node_id, array_agg(r.name ORDER BY r.name) AS robots
                              FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
                              WHERE rn.node_id = ANY(%s) GROUP BY rn.node_id""", (ids,))
        found = {int(r["node_id"]): list(r["robots"]) for r in rows}
        return {node: found.get(node, []) for node in ids}

    def node_ids_by_content(self, contents: Sequence[str]) -> list[int | None]:
        """The node id storing each text (compared by SHA-256 of the stripped text), or None."""
        hashes = [content_hash(validate_content(c)) for c in contents]
        rows = self._fetch("SELECT content_hash, id FROM nodes WHERE content_hash = ANY(%s)",
                           (hashes,))
        found = {r["content_hash"]: int(r["id"]) for r in rows}
        return [found.get(h) for h in hashes]

    def exists(self, node_id: int) -> bool:
        """Whether a node with this id exists."""
        node_id = validate_id(node_id, field="node_id")
        return bool(self._fetch("SELECT EXISTS (SELECT 1 FROM nodes WHERE id = %s) AS e",
                                (node_id,))[0]["e"])

    def delete(self, node_id: int) -> bool:
        """Delete a node permanently; its robot links and tag links go with it (cascade).

        The query cache is cleared. Returns True if a node was deleted, False if none existed.
        """
        node_id = validate_id(node_id, field="node_id")
        with self._transaction() as cur:
            deleted = cur.execute("DELETE FROM nodes WHERE id = %s RETURNING id",
                                  (node_id,)).fetchone()
            if deleted:
                cur.execute(LOG_EVENTS, {"kind": "delete", "robot_id": None,
                                          "node_ids": [node_id]})
        self._cache.clear()
        return deleted is not None
