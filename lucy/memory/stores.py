"""The one place that picks the memory store from config: SQLite in the data directory, or PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from lucy.config import LucySettings
from lucy.memory.store import MemoryStore


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
