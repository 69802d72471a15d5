"""The one place that picks the stores from config: the frame stores (a local Zarr folder, an S3 bucket, or the
cluster's segments catalogued in PostgreSQL) and the memory store (SQLite in the data directory, or PostgreSQL).

Nothing below this package reads ``frames.backend`` or ``memory.backend``: the ingest pipeline, the builder,
retention and the stream runtime are handed the stores they use, by whoever owns the process (the server, a stream
worker, each CLI command).
"""

from __future__ import annotations

from pathlib import Path

from lucy.config import LucySettings
from lucy.errors import StoreError
from lucy.ingest.frames import FrameStores
from lucy.ingest.zarr_store import ZarrFrameStores
from lucy.memory.store import MemoryStore


def open_frames(settings: LucySettings) -> FrameStores:
    """The frame stores ``settings.frames`` names: ``<data>/frames.zarr`` (backend ``local``), or a prefix of an S3
    bucket (backend ``s3``), catalogued in PostgreSQL on a cluster (``cluster.address``; see
    :mod:`lucy.cluster.frames`). Nothing is created until a stream is."""
    frames = settings.frames
    if frames.backend == "local":
        return ZarrFrameStores(settings.data)
    r = settings.retention
    if r.full_seconds or r.keep_seconds or r.max_bytes:
        raise StoreError("retention (retention.full_seconds, keep_seconds, max_bytes) is not supported with "
                         "frames.backend = 's3' yet: set them to 0 and use the bucket's lifecycle rules")
    if settings.cluster.enabled:
        from lucy.cluster.frames import open_cluster_frames  # the segment store: a backend of its own, for Ray

        return open_cluster_frames(settings)
    from lucy.ingest.object_store import S3Root  # obstore is imported only when used

    return ZarrFrameStores(S3Root.from_settings(frames))


def open_memory(settings: LucySettings) -> MemoryStore:
    """The memory store that ``settings.memory.backend`` names (created, or brought up to date, on first use)."""
    if settings.memory.backend == "postgres":
        from lucy.memory.postgres_store import PostgresMemoryStore  # psycopg is only needed on a cluster

        return PostgresMemoryStore.for_settings(settings)
    from lucy.memory.sqlite_store import SQLiteMemoryStore

    return SQLiteMemoryStore.for_data(settings)


def open_worker_stores(settings: LucySettings) -> tuple[MemoryStore, FrameStores]:
    """A stream worker process's own stores (memory, frames): the worker is a composition root of its own, handed
    this function by whoever starts it (it is pickled by name into the spawned process)."""
    memory = open_memory(settings)
    try:
        return memory, open_frames(settings)
    except BaseException:
        memory.close()
        raise


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
