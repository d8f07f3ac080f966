"""Durable state behind one protocol (docs/reference/behaviour.md#durable-state): memory, SQLite and
PostgreSQL stores, codecs.

Importing this package stays light: the PostgreSQL driver is imported only when a
:class:`~cronoq.store.postgres.PostgresStore` is opened.
"""

from __future__ import annotations

from cronoq.store.base import Store, TransientStoreError
from cronoq.store.codec import Codec, CodecError, JsonCodec
from cronoq.store.memory import MemoryStore
from cronoq.store.postgres import PostgresStore
from cronoq.store.sqlite import SqliteStore

__all__ = [
    "Codec",
    "CodecError",
    "JsonCodec",
    "MemoryStore",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "TransientStoreError",
]
