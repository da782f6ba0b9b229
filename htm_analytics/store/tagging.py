"""Tags: hierarchical colon tags on nodes, topics, popularity and pairs of tags."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from ..errors import NotFoundError, ValidationError
from ..validation import (
    tag_ancestors,
    validate_flag,
    validate_id,
    validate_positive_int,
    validate_tag,
    validate_timeframe,
)
from ._base import StoreBase
from ._common import MAX_LIMIT, NODE_COLUMNS, SEARCH_COLUMNS, Timeframe, bind_timeframe

__all__ = ["TaggingMixin", "TAG_NODE", "ensure_tags", "matching_tags"]

_ENSURE_TAGS = """
INSERT INTO tags (name) SELECT unnest(%(names)s::text[])
ON CONFLICT (name) DO NOTHING"""

_TAG_IDS = "SELECT id, name FROM tags WHERE name = ANY(%(names)s::text[])"

TAG_NODE = """
INSERT INTO node_tags (node_id, tag_id)
SELECT %(node_id)s, unnest(%(tag_ids)s::bigint[])
ON CONFLICT (node_id, tag_id) DO NOTHING"""


def ensure_tags(cur: psycopg.Cursor[dict[str, Any]], names: list[str]) -> dict[str, int]:
    """Create the tags that do not exist yet; return ``{name: id}`` for all of ``names``."""
    cur.execute(_ENSURE_TAGS, {"names": names})
    # A new statement: its snapshot sees tags that concurrent writers committed meanwhile.
    rows = cur.execute(_TAG_IDS, {"names": names}).fetchall()
    return {r["name"]: int(r["id"]) for r in rows}


_MATCHING_TAGS = """SELECT name FROM tags
                    WHERE regexp_split_to_array(name, '[:-]') && %s::text[]
                    ORDER BY name"""


def matching_tags(cur: psycopg.Cursor[Any], query: str) -> list[str]:
    """:meth:`TaggingMixin.find_query_matching_tags` on an open cursor (no validation)."""
    words = sorted({w for w in re.findall(r"[a-z0-9]+", query.lower()) if len(w) >= 3})
    if not words:
        return []
    return [r["name"] for r in cur.execute(_MATCHING_TAGS, (words,), prepare=True)]


class TaggingMixin(StoreBase):
    """Tags and topics (see :class:`~htm_analytics.LongTermMemory`)."""

    def find_query_matching_tags(self, query: str) -> list[str]:
        """Tags in which some hierarchy level matches a word of the query.

        Words are the query's lowercase runs of letters and digits, three or more characters
        long. A tag matches when one of its ``:`` segments, or a ``-`` part of one, equals a
        word: ``"PostgreSQL database"`` finds ``database:postgresql`` and
        ``devel:lang:postgresql-plpython``... but ``"data"`` does not find ``database``.

        Returns
        -------
        list of str
            Matching tag names, sorted.
        """
        if not isinstance(query, str):
            raise ValidationError(f"must be a string, got {type(query).__name__}",
                                  field="query")
        with self._transaction(memory_operation=True) as cur:
            return matching_tags(cur, query)

    def add_tag(self, *, node_id: int, tag: str, ancestors: bool = True) -> list[str]:
        """Tag a node. By default every ancestor is attached too, as HTM does.

        ``add_tag(node_id=7, tag="database:postgresql")`` also tags node 7 with ``database``,
        so that prefix and exact topic queries, popularity and co-occurrence see the whole
        hierarchy. Tagging twice is harmless.

        Returns
        -------
        list of str
            The tag names attached (the tag and, with ``ancestors``, its ancestors).

        Raises
        ------
        ValidationError
            A malformed tag.
        NotFoundError
            No such node.
        """
        node_id = validate_id(node_id, field="node_id")
        # A flag, not any truthy value: ancestors="no" must not attach them.
        ancestors = validate_flag(ancestors, field="ancestors")
        names = tag_ancestors(validate_tag(tag)) if ancestors else [validate_tag(tag)]
        with self._transaction(memory_operation=True) as cur:
            tag_ids = ensure_tags(cur, names)
            try:
                cur.execute(TAG_NODE, {"node_id": node_id,
                                        "tag_ids": [tag_ids[n] for n in names]})
            except pg_errors.ForeignKeyViolation as exc:
                raise NotFoundError(f"no node with id {node_id}") from exc
        self._cache.clear()
        return names

    def get_node_tags(self, node_id: int) -> list[str]:
        """Names of the tags on a node, sorted (empty for an unknown node)."""
        node_id = validate_id(node_id, field="node_id")
        rows = self._fetch("""SELECT t.name FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                              WHERE nt.node_id = %s ORDER BY t.name""", (node_id,),
                           memory_operation=True)
        return [r["name"] for r in rows]

    def node_topics(self, node_id: int) -> list[str]:
        """Alias of :meth:`get_node_tags`."""
        return self.get_node_tags(node_id)

    def nodes_by_topic(self, topic_path: str, *, exact: bool = False,
                       limit: int = 50) -> list[dict[str, Any]]:
        """Nodes carrying a topic, newest first.

        ``exact=False`` matches whole segments: ``database`` finds nodes tagged ``database``
        or ``database:postgresql``, never ``databases``. ``exact=True`` needs the tag itself.

        Returns
        -------
        list of dict
            Every column of ``nodes`` except the vector.
        """
        topic = validate_tag(topic_path, field="topic_path")
        exact = validate_flag(exact, field="exact")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        condition = "t.name = %(topic)s"
        if not exact:
            # Tags are validated to [a-z0-9:-], so the LIKE pattern has no wildcards of its own;
            # the text_pattern_ops index serves the prefix.
            condition += " OR t.name LIKE %(prefix)s"
        return self._fetch(f"""
            SELECT {NODE_COLUMNS} FROM nodes
            WHERE id IN (SELECT nt.node_id FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                         WHERE {condition})
            ORDER BY created_at DESC, id DESC LIMIT %(limit)s""",
            {"topic": topic, "prefix": topic + ":%", "limit": limit}, memory_operation=True)

    def search_by_tags(self, *, tags: Sequence[str], match_all: bool = False,
                       timeframe: Timeframe = None, limit: int = 20) -> list[dict[str, Any]]:
        """Nodes carrying any (or, with ``match_all``, all) of the given tags.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count``,
            ``matched_tags`` (list of the requested tags the node has), ``relevance`` (share
            of the requested tags matched, 0 to 1) and ``tags`` (all the node's tags), most
            relevant then newest first.
        """
        if isinstance(tags, str) or not isinstance(tags, Sequence) or not tags:
            raise ValidationError("must be a non-empty list of tags", field="tags")
        names = sorted({validate_tag(t, field="tags") for t in tags})
        match_all = validate_flag(match_all, field="match_all")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        params: dict[str, Any] = {"tags": names, "limit": limit, "n": len(names)}
        where = bind_timeframe(params, frame)
        having = "HAVING count(DISTINCT t.name) = %(n)s" if match_all else ""
        return self._fetch(f"""
            WITH matched AS (
                SELECT nt.node_id, array_agg(DISTINCT t.name ORDER BY t.name) AS matched_tags
                FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                WHERE t.name = ANY(%(tags)s::text[])
                GROUP BY nt.node_id {having})
            SELECT {SEARCH_COLUMNS}, m.matched_tags,
                   cardinality(m.matched_tags)::float8 / %(n)s AS relevance,
                   ARRAY(SELECT t.name FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
                         WHERE nt.node_id = n.id ORDER BY t.name) AS tags
            FROM matched m JOIN nodes n ON n.id = m.node_id
            WHERE true{where}
            ORDER BY relevance DESC, n.created_at DESC, n.id DESC LIMIT %(limit)s""", params,
                           memory_operation=True)

    def popular_tags(self, *, limit: int = 20, timeframe: Timeframe = None) -> list[dict[str, Any]]:
        """Most used tags: ``[{"name": ..., "usage_count": ...}, ...]``, most used first.

        ``timeframe`` counts only nodes created in the range.
        """
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        params: dict[str, Any] = {"limit": limit}
        where = bind_timeframe(params, frame)
        return self._fetch(f"""
            SELECT t.name, count(*) AS usage_count
            FROM node_tags nt JOIN tags t ON t.id = nt.tag_id JOIN nodes n ON n.id = nt.node_id
            WHERE TRUE{where}
            GROUP BY t.name ORDER BY usage_count DESC, t.name LIMIT %(limit)s""", params,
                           memory_operation=True)

    def topic_relationships(self, *, min_shared_nodes: int = 2,
                            limit: int = 50) -> list[dict[str, Any]]:
        """Pairs of tags found together on nodes: ``topic1 < topic2``, ``shared_nodes``.

        Only pairs sharing at least ``min_shared_nodes`` nodes; most shared first.
        """
        min_shared = validate_positive_int(min_shared_nodes, field="min_shared_nodes")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        return self._fetch("""
            SELECT t1.name AS topic1, t2.name AS topic2,
                   count(DISTINCT nt1.node_id) AS shared_nodes
            FROM node_tags nt1
            JOIN node_tags nt2 ON nt1.node_id = nt2.node_id AND nt1.tag_id <> nt2.tag_id
            JOIN tags t1 ON t1.id = nt1.tag_id
            JOIN tags t2 ON t2.id = nt2.tag_id
            WHERE t1.name < t2.name
            GROUP BY t1.name, t2.name
            HAVING count(DISTINCT nt1.node_id) >= %(min)s
            ORDER BY shared_nodes DESC, topic1, topic2 LIMIT %(limit)s""",
            {"min": min_shared, "limit": limit}, memory_operation=True)
