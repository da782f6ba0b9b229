"""Whether a REINDEX would bring unreachable memories back, measured on a scratch copy.

The user's database is only read: its live vectors are streamed (``COPY ... TO STDOUT``, a
read) into a scratch database on the same server, the index is built there from the user's
own definition (``pg_get_indexdef``: same method, operator class, expression, ``m`` and
``ef_construction``), and the memories are searched again as
:meth:`~htm_analytics.store.hygiene.HygieneMixin.self_search` does. The scratch database is
dropped afterwards, also on an error. Creating it needs the ``CREATEDB`` privilege (and
pgvector's ``CREATE EXTENSION``, a trusted extension): a read-only role gets a typed error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from ..errors import NotFoundError, SchemaError
from ..validation import (
    validate_dimension,
    validate_flag,
    validate_ids,
    validate_key,
    validate_positive_int,
)
from ._base import StoreBase
from ._errors import translate_database_error
from .databases import scratch_database
from .hygiene import read_self_search, self_search_statement

__all__ = ["ReindexCheckMixin"]

_VECTOR_TYPE = re.compile(r"vector(\(\d+\))?")
_INDEX = """
SELECT pg_get_indexdef(c.oid) AS definition
FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
WHERE s.nspname = 'public' AND c.relkind = 'i' AND c.relname = %s"""
_EMBEDDING_TYPE = """
SELECT format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
WHERE a.attrelid = 'public.nodes'::regclass AND a.attname = 'embedding'"""


class ReindexCheckMixin(StoreBase):
    """A rebuilt index measured on a scratch copy (see :class:`~htm_analytics.LongTermMemory`)."""

    def reindexed_self_search(self, index: str, ids: Sequence[int], *, dimension: int, k: int,
                              ef_search: int, padded: bool
                              ) -> dict[int, tuple[int | None, bool]]:
        """:meth:`self_search` of ``ids`` through a freshly built copy of ``index``.

        Only reads this database; writes only to a scratch database it creates on the same
        server and drops afterwards. Raises :class:`~htm_analytics.NotFoundError` when the
        index does not exist, and the mapped :class:`~htm_analytics.DatabaseError` when the
        role may not create a database or the extension.
        """
        index = validate_key(index, field="index")
        ids = validate_ids(ids, field="ids")
        dimension = validate_dimension(dimension)
        k = validate_positive_int(k, field="k", maximum=1000)
        ef_search = validate_positive_int(ef_search, field="ef_search", maximum=1000)
        padded = validate_flag(padded, field="padded")
        found = self._fetch(_INDEX, (index,))
        if not found:
            raise NotFoundError(f"no index {index!r} on this database")
        column_type = str(self._fetch(_EMBEDDING_TYPE)[0]["type"])
        if not _VECTOR_TYPE.fullmatch(column_type):
            raise SchemaError(f"nodes.embedding is {column_type}, not a vector")
        live = " AND deleted_at IS NULL" if self.schema_info.soft_deletes else ""
        statement = self_search_statement(dimension, k, native=not padded, live=False,
                                          schema=self.schema_info)
        with scratch_database(self._url, "htm_reindex_check") as url:
            try:
                with psycopg.connect(url, autocommit=True) as scratch:
                    scratch.execute("CREATE EXTENSION IF NOT EXISTS vector")
                    scratch.execute(sql.SQL(
                        "CREATE TABLE public.nodes (id bigint PRIMARY KEY, embedding {}, "
                        "embedding_dimension integer, deleted_at timestamptz)").format(
                        sql.SQL(column_type)))
                    self._copy_vectors(scratch, live)
                    scratch.execute(str(found[0]["definition"]))
                    scratch.execute("ANALYZE public.nodes")
                    with scratch.transaction():
                        scratch.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                                        "set_config('enable_seqscan', 'off', true), "
                                        "set_config('jit', 'off', true)",
                                        (str(ef_search),))
                        cursor = scratch.cursor(row_factory=dict_row)
                        rows = cursor.execute(statement, {"ids": ids}).fetchall()
            except psycopg.Error as exc:
                raise translate_database_error(exc, url=url) from exc
        return read_self_search(rows, ids)

    def _copy_vectors(self, scratch: psycopg.Connection, live: str) -> None:
        """Stream the live rows' vectors into the scratch table, in binary."""
        source = sql.SQL(
            "COPY (SELECT id, embedding, embedding_dimension FROM public.nodes "
            "WHERE embedding IS NOT NULL{}) TO STDOUT (FORMAT binary)").format(sql.SQL(live))
        with self._transaction() as cur, cur.copy(source) as out, \
                scratch.cursor().copy("COPY public.nodes (id, embedding, embedding_dimension) "
                                      "FROM STDIN (FORMAT binary)") as into:
            for data in out:
                into.write(data)
