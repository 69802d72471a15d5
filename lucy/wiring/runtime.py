"""The local stream runtime as ``lucy serve`` builds it: worker processes that open their own stores with
:func:`lucy.wiring.stores.open_worker_stores` (the cluster's runtime is
:class:`lucy.cluster.manager.ClusterStreamManager`)."""

from __future__ import annotations

from lucy.config import LucySettings
from lucy.ingest.frames import FrameStores
from lucy.memory.store import MemoryStore
from lucy.runtime.events import EventBus
from lucy.runtime.streams import StreamManager
from lucy.wiring.stores import open_worker_stores


def local_runtime(settings: LucySettings, memory: MemoryStore, bus: EventBus, *, frames: FrameStores) -> StreamManager:
    """Streams recorded by worker processes on this machine (a :class:`lucy.runtime.protocol.RuntimeFactory`)."""
    return StreamManager(settings, memory, bus, frames=frames, worker_stores=open_worker_stores)
