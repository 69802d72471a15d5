"""In-process events of the server (new memory nodes, stream status) for the MQTT bridge and the dashboard.

Producers are threads (ingest, caption builders, questions); consumers are asyncio tasks. :meth:`EventBus.publish`
is thread-safe and never blocks a producer: a consumer that falls behind loses its oldest events and the loss
is counted, so a stuck MQTT broker can never slow captioning.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any, Protocol

from lucy.memory.nodes import MemoryNode
from lucy.memory.store import MemoryObserver


def node_json(node: MemoryNode) -> dict[str, Any]:
    """A memory node as the API, the dashboard and MQTT show it."""
    return asdict(node)


class EventPublisher(Protocol):
    """Where events go: :class:`EventBus`, or whatever forwards to it from another process."""

    def publish(self, event: dict[str, Any]) -> None: ...


class Subscription:
    def __init__(self, loop: asyncio.AbstractEventLoop, maxsize: int) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize)
        self.dropped = 0

    def _offer(self, event: dict[str, Any]) -> None:  # runs on the subscriber's loop
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(event)

    async def get(self) -> dict[str, Any]:
        return await self.queue.get()


class EventBus:
    """Fan-out of events to asyncio subscribers, fed from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: list[Subscription] = []

    @asynccontextmanager
    async def subscribe(self, maxsize: int = 1000) -> AsyncIterator[Subscription]:
        sub = Subscription(asyncio.get_running_loop(), maxsize)
        with self._lock:
            self._subs.append(sub)
        try:
            yield sub
        finally:
            with self._lock:
                self._subs.remove(sub)

    def publish(self, event: dict[str, Any]) -> None:
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            try:
                sub.loop.call_soon_threadsafe(sub._offer, event)
            except RuntimeError:
                pass  # that subscriber's loop has closed; it is being removed


class NodeAnnouncer(MemoryObserver):
    """Announces every node a memory store stores as a ``node`` event on a bus (the server's :class:`EventBus`,
    or a stream worker's pipe to it). Register it with :meth:`MemoryStore.add_observer`."""

    def __init__(self, bus: EventPublisher) -> None:
        self.bus = bus

    def on_nodes_added(self, nodes: Sequence[MemoryNode]) -> None:
        for node in nodes:
            self.bus.publish({"type": "node", "stream": node.stream, "node": node_json(node)})
