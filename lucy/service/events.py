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
from typing import Any

from lucy.memory.nodes import MemoryNode
from lucy.memory.store import MemoryStore


def node_json(node: MemoryNode) -> dict[str, Any]:
    """A memory node as the API, the dashboard and MQTT show it."""
    return asdict(node)


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


class ObservedMemoryStore(MemoryStore):
    """A :class:`MemoryStore` that announces every node stored through it (and delegates everything else)."""

    def __init__(self, inner: MemoryStore, bus: EventBus) -> None:
        self.inner = inner
        self.bus = bus

    def _announce(self, nodes: Sequence[MemoryNode]) -> None:
        for node in nodes:
            self.bus.publish({"type": "node", "stream": node.stream, "node": node_json(node)})

    def add(self, node: MemoryNode) -> MemoryNode:
        stored = self.inner.add(node)
        self._announce([stored])
        return stored

    def add_many(self, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        stored = self.inner.add_many(nodes)
        self._announce(stored)
        return stored

    def nodes(self, stream: str, **kwargs: Any) -> list[MemoryNode]:  # type: ignore[override]
        return self.inner.nodes(stream, **kwargs)

    def count(self, stream: str, **kwargs: Any) -> int:  # type: ignore[override]
        return self.inner.count(stream, **kwargs)

    def search(self, stream: str, text: str, **kwargs: Any) -> list[tuple[MemoryNode, float]]:  # type: ignore[override]
        return self.inner.search(stream, text, **kwargs)

    def captioned_until(self, stream: str, level: str = "coarse") -> float:
        return self.inner.captioned_until(stream, level)

    def add_question(self, stream: str, question: str, options: Sequence[str] = (), horizon: float = 0.0) -> int:
        return self.inner.add_question(stream, question, options, horizon)

    def set_answer(self, question_id: int, answer: dict[str, object]) -> None:
        self.inner.set_answer(question_id, answer)

    def questions(self, stream: str, limit: int = 50) -> list[dict[str, object]]:
        return self.inner.questions(stream, limit)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # Backend extras (e.g. SQLiteMemoryStore.node) stay reachable; only the interface's writes are observed.
        return getattr(self.inner, name)
