"""Wiring: a query engine for a stream of a data directory, with the backends configuration names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from lucy.config import LucySettings
from lucy.memory.captioners.base import Captioner
from lucy.memory.store import MemoryStore
from lucy.query.engine import QueryConfig, QueryEngine
from lucy.query.reasoners import Reasoner, make_reasoner


@asynccontextmanager
async def open_engine(settings: LucySettings, stream: str, *, memory: MemoryStore | None = None,
                      captioner: Captioner | None = None, reasoner: Reasoner | None = None,
                      ) -> AsyncIterator[QueryEngine]:
    """A :class:`QueryEngine` over ``stream`` (read-only frame store, shared memory store).

    Backends not passed in are made from ``settings`` and closed on exit; those passed in belong to the caller.
    Safe while another process ingests the same stream: the frame store is opened read-only and the memory
    store takes one short write transaction per node.
    """
    from lucy.ingest import ZarrFrameStore
    from lucy.memory.sqlite_store import SQLiteMemoryStore

    frames = ZarrFrameStore.open(settings.data, stream)
    own_memory = memory is None
    own_captioner = captioner is None and settings.captioner.backend != "none"
    own_reasoner = reasoner is None
    if memory is None:
        memory = SQLiteMemoryStore.for_data(settings)
    if own_captioner:
        from lucy.memory.captioners import make_captioner

        captioner = make_captioner(settings)
    if reasoner is None:
        reasoner = make_reasoner(settings)
    try:
        yield QueryEngine(frames=frames, memory=memory, reasoner=reasoner, captioner=captioner,
                          preset=settings.levels, config=QueryConfig.from_settings(settings),
                          coarse_instruction=settings.captioner.coarse_instruction)
    finally:
        if own_reasoner:
            await reasoner.aclose()
        if own_captioner and captioner is not None:
            await captioner.aclose()
        if own_memory:
            memory.close()
