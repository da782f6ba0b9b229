"""The loaders and dumpers of a store's connections, looked up once per store.

pgvector's types have per-database OIDs: ``register_vector`` reads them in four small
transactions. A store reads them once, when it opens, and every connection it opens later
starts from a copy of the result (psycopg's ``context``): no lookup, no transaction.
"""

from __future__ import annotations

from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.adapt import AdaptersMap

from .timestamps import register_infinite_timestamps

__all__ = ["session_adapters"]


def session_adapters(conn: psycopg.Connection[Any]) -> AdaptersMap:
    """The adapters a store's connections use, read through ``conn``.

    Parameters
    ----------
    conn : psycopg.Connection
        An open connection to the store's database (pgvector installed). Its own adapters
        gain the same registrations.

    Returns
    -------
    psycopg.adapt.AdaptersMap
        pgvector's types (vector, bit, halfvec, sparsevec; numpy arrays dumped as vectors)
        and infinite timestamps read as the extremes; pass it as ``context`` to
        ``psycopg.connect``.
    """
    register_vector(conn)
    register_infinite_timestamps(conn)
    return AdaptersMap(conn.adapters)
