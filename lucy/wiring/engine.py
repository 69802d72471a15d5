"""The one place a query engine is assembled for a stream of a data directory: its stores (from
:mod:`lucy.wiring.stores`) and its backends (from :mod:`lucy.backends`). The query package itself knows neither.
:func:`open_engine` opens what it needs (the CLI, the demo, ``lucy eval``); the server, which holds its stores and
backends for its lifetime, has :func:`build_engine` put them together."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from lucy.backends import Backends
from lucy.config import LucySettings
from lucy.ingest import FrameStore
from lucy.memory.captioners.base import Captioner
from lucy.memory.retrieval import MemoryIndex
from lucy.memory.store import MemoryStore
from lucy.perception.detect import detector_labels
from lucy.query.engine import QueryConfig, QueryEngine
from lucy.query.reasoners import Reasoner
from lucy.wiring.stores import open_frames, open_memory


def build_engine(settings: LucySettings, frames: FrameStore | Sequence[FrameStore], memory: MemoryStore, *,
                 reasoner: Reasoner, captioner: Captioner | None, index: MemoryIndex | None) -> QueryEngine:
    """A :class:`QueryEngine` over one stream's frame store (or several: questions across those streams), with the
    query settings of ``settings``."""
    return QueryEngine(frames=frames, memory=memory, reasoner=reasoner, captioner=captioner, preset=settings.levels,
                       config=QueryConfig.from_settings(settings),
                       coarse_instruction=settings.captioner.coarse_instruction, index=index,
                       detector_labels=detector_labels(settings.detect))


@asynccontextmanager
async def open_engine(settings: LucySettings, stream: str | Sequence[str], *, memory: MemoryStore | None = None,
                      backends: Backends | None = None, captioner: Captioner | None = None,
                      reasoner: Reasoner | None = None) -> AsyncIterator[QueryEngine]:
    """A :class:`QueryEngine` over ``stream`` (read-only frame store, shared memory store); over several streams
    (a sequence of names), one that answers across them.

    The captioner and reasoner are ``captioner`` and ``reasoner`` if given, else those of ``backends`` (shared by
    every engine opened with it; pass one to ask several questions on one event loop). Without ``backends`` the
    engine gets a :class:`Backends` of its own, closed on exit; what is passed in belongs to the caller, and so
    does ``memory``. Safe while another process ingests the same stream: the frame store is opened read-only and
    the memory store takes one short write transaction per node.
    """
    stores = open_frames(settings)
    frames = stores.open(stream) if isinstance(stream, str) else [stores.open(name) for name in stream]
    own_memory, own_backends = memory is None, backends is None
    memory = open_memory(settings) if memory is None else memory
    backends = Backends() if backends is None else backends
    # A store of the caller's is shared, with its index; one opened here lives as long as the engine, and so does its
    # index (the vectors stay stored, only the in-process cache goes).
    if own_memory:
        embedder = backends.embedder(settings)
        index = None if embedder is None else MemoryIndex(memory, embedder,
                                                          cache_vectors=settings.embedder.cache_vectors)
    else:
        index = backends.index(settings, memory)
    try:
        yield build_engine(settings, frames, memory,
                           reasoner=reasoner if reasoner is not None else backends.reasoner(settings),
                           captioner=captioner if captioner is not None else backends.captioner(settings),
                           index=index)
    finally:
        if own_backends:
            await backends.aclose()
        if own_memory:
            memory.close()
