"""The one place that picks the memory store from config: SQLite in the data directory, or PostgreSQL."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from lucy.config import LucySettings
from lucy.errors import StoreError
from lucy.memory.store import MemoryStore

if TYPE_CHECKING:
    from lucy.memory.postgres_store import PostgresMemoryStore


def open_memory(settings: LucySettings) -> MemoryStore:
    """The memory store that ``settings.memory.backend`` names (created, or brought up to date, on first use)."""
    if settings.memory.backend == "postgres":
        from lucy.memory.postgres_store import PostgresMemoryStore  # psycopg is only needed on a cluster

        return PostgresMemoryStore.for_settings(settings)
    from lucy.memory.sqlite_store import SQLiteMemoryStore

    return SQLiteMemoryStore.for_data(settings)


def open_existing_memory(settings: LucySettings) -> MemoryStore | None:
    """The memory store, or None if it holds nothing yet (reading never creates one)."""
    if settings.memory.backend == "postgres":
        from lucy.memory.postgres_store import PostgresMemoryStore

        store = PostgresMemoryStore.for_settings(settings, migrate=False)
        try:
            if store.is_initialised():
                return store
        except BaseException:
            store.close()
            raise
        store.close()
        return None
    from lucy.memory.sqlite_store import DB_NAME, SQLiteMemoryStore

    if not (Path(settings.data) / DB_NAME).is_file():
        return None
    return SQLiteMemoryStore.for_data(settings)


def shared_postgres(settings: LucySettings) -> PostgresMemoryStore:
    """One PostgreSQL handle per process and database, for readers of the cluster's tables (the frame catalogue)
    that open often (each question opens its stream's frames): its connections, one per thread, are reused."""
    dsn = settings.memory.postgres_dsn
    if dsn is None:
        raise StoreError('memory.backend is "postgres" but memory.postgres_dsn is not set')
    return _postgres(dsn.get_secret_value(), settings.memory.busy_timeout_seconds)


@functools.cache
def _postgres(dsn: str, lock_timeout_seconds: float) -> PostgresMemoryStore:
    from lucy.memory.postgres_store import PostgresMemoryStore

    return PostgresMemoryStore(dsn, lock_timeout_seconds=lock_timeout_seconds)
