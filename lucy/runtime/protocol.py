"""The one interface the HTTP service, MQTT and the dashboard know of the streams a process supervises.

vLLM's API routers know their engine only as an ``EngineClient`` (``vllm/engine/protocol.py``), whichever engine
serves behind it. Lucy's service knows the stream runtime only as :class:`StreamRuntime`: ``lucy serve`` picks an
implementation from the settings and hands it to the app, which never learns which one it got:

- :class:`lucy.runtime.streams.StreamManager`: streams recorded by worker processes on this machine;
- :class:`lucy.cluster.manager.ClusterStreamManager`: streams recorded by Ray owners on a cluster's ingest nodes,
  followed by any number of stateless API replicas.

Refusals are domain errors (:class:`lucy.errors.StreamNotFound`, :class:`lucy.errors.StreamConflict`,
:class:`lucy.errors.InvalidStream`); only the service turns them into HTTP statuses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lucy.config import LucySettings
from lucy.ingest import FrameStores
from lucy.memory.store import MemoryStore
from lucy.metrics import CaptionCallStats, QuestionStats, StreamSample
from lucy.runtime.events import EventBus

# How a stream's worker opens its own stores (memory, frames): handed in by the composition root (lucy.wiring), so the
# runtime never picks a backend itself.
StoreOpener = Callable[[LucySettings], tuple[MemoryStore, FrameStores]]


@dataclass(frozen=True)
class RetentionAges:
    """A stream's own retention ages (None: the server's ``retention.full_seconds`` / ``keep_seconds``)."""

    full_seconds: float | None = None
    keep_seconds: float | None = None


class StreamHandle(Protocol):
    """One stream the runtime supervises, as the service reads it."""

    name: str

    @property
    def history(self) -> Sequence[dict[str, Any]]:
        """Recent samples of the stream's status (the dashboard's charts), oldest first."""
        ...

    def status(self) -> dict[str, Any]:
        """What ``GET /v1/streams/{name}`` shows (and MQTT, and the dashboard)."""
        ...

    def sample(self) -> dict[str, Any]:
        """Append the current status to :attr:`history`; the point appended."""
        ...


class StreamRuntime(ABC):
    """The streams of one server (or of one cluster, as one replica sees them). Thread-safe; the blocking methods
    are meant for worker threads (``asyncio.to_thread``)."""

    settings: LucySettings
    frames: FrameStores

    # ------------------------------------------------------------------------------------ lookup

    @abstractmethod
    def get(self, name: str) -> StreamHandle | None:
        """The stream ``name`` if this runtime supervises it (None for one only stored, or unknown)."""

    @abstractmethod
    def managed(self) -> Sequence[StreamHandle]:
        """Every stream this runtime supervises."""

    @abstractmethod
    def names(self) -> list[str]:
        """Every stream of the data directory: the ones supervised and the ones only stored."""

    @abstractmethod
    def recorded(self) -> set[str]:
        """The streams this server records (the only ones retention may touch)."""

    @abstractmethod
    def require(self, name: str) -> str:
        """``name`` if such a stream exists (:class:`lucy.errors.InvalidStream` for a bad name,
        :class:`lucy.errors.StreamNotFound` for an unknown one)."""

    @abstractmethod
    def settings_for(self, name: str) -> LucySettings:
        """The settings a stream runs with (the server's for a stream only stored)."""

    @abstractmethod
    def question_stats(self, name: str) -> QuestionStats:
        """The stream's question figures (kept across restarts of the stream)."""

    @abstractmethod
    def caption_stats(self, name: str) -> CaptionCallStats:
        """The stream's captioner request figures (kept across restarts of the stream)."""

    @abstractmethod
    def status(self, name: str) -> dict[str, Any]:
        """The status of one stream (:class:`lucy.errors.StreamNotFound` if there is none)."""

    @abstractmethod
    def statuses(self) -> list[dict[str, Any]]:
        """The status of every stream."""

    @abstractmethod
    def figures(self) -> list[StreamSample]:
        """Figures of every stream for the metrics exporter."""

    # ------------------------------------------------------------------------------------ changes

    @abstractmethod
    def add(self, name: str, source: str, *, preset: str | None = None, captioner: str | None = None,
            realtime: bool = False, retention: RetentionAges | None = None,
            recording: bool | None = None) -> StreamHandle:
        """Register a stream and start it, or restart a stopped one with the same source; ``recording``: keep its
        original video (a live stream; None: ``recording.enabled``)."""

    @abstractmethod
    def remove(self, name: str, *, purge: bool = False) -> dict[str, Any]:
        """Stop a stream and forget it; with ``purge`` delete its frames and memory too. Its last status."""

    @abstractmethod
    def resume(self) -> list[str]:
        """Start every registered stream (at server start); the names started."""

    @abstractmethod
    def shutdown(self, timeout: float = 60.0) -> None:
        """Stop supervising (at server stop): what was registered is resumed at the next start."""

    # ------------------------------------------------------------------------------------ deployment

    @property
    @abstractmethod
    def replicated(self) -> bool:
        """Whether other API replicas serve the same streams: work done once per deployment (outward alert
        delivery, the MQTT bridge) then runs under :meth:`hold_duty`, and frames are kept by the shared store's
        own rules (no retention pass here)."""

    @abstractmethod
    def announce_nodes(self) -> None:
        """From now until :meth:`shutdown`, announce on the event bus every memory node stored by any writer of
        these streams (the dashboard's feed, MQTT)."""

    @abstractmethod
    async def hold_duty(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` while this replica is the one that does the deployment's once-only work, until
        cancelled (a single server always is)."""


class RuntimeFactory(Protocol):
    """How ``lucy serve`` tells the app which runtime to build, once its stores are open."""

    def __call__(self, settings: LucySettings, memory: MemoryStore, bus: EventBus, *,
                 frames: FrameStores) -> StreamRuntime: ...
