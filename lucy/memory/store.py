"""The memory-store boundary: nodes by stream, level, time and text, plus the question/answer history."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from lucy.memory.nodes import MemoryNode


class MemoryStore(ABC):
    """Time-indexed text memory of every stream in a data directory.

    Safe for one ingest process writing and several question processes reading and writing at once.
    """

    @abstractmethod
    def add(self, node: MemoryNode) -> MemoryNode:
        """Store a node; returns it with ``id`` (and ``created``) set.

        A span (stream, level, start) holds at most one ingest node and one tail node: storing another replaces
        it, and an ingest node replaces the span's tail node (see :data:`lucy.memory.nodes.TAIL_ORIGIN`)."""

    @abstractmethod
    def add_many(self, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        """Store several nodes in one transaction."""

    @abstractmethod
    def nodes(self, stream: str, *, level: str | None = None, start: float | None = None,
              end: float | None = None, origin: str | None = None, limit: int | None = None) -> list[MemoryNode]:
        """Nodes overlapping ``[start, end)`` (all times when None), ordered by start time then level."""

    def count(self, stream: str, *, level: str | None = None, origin: str | None = None) -> int:
        """How many nodes a stream holds (of ``level`` / ``origin`` when given)."""
        return len(self.nodes(stream, level=level, origin=origin))

    @abstractmethod
    def search(self, stream: str, text: str, *, level: str | None = None, start: float | None = None,
               end: float | None = None, limit: int = 20) -> list[tuple[MemoryNode, float]]:
        """Full-text search over node text; best first, with a relevance score (higher is better)."""

    @abstractmethod
    def captioned_until(self, stream: str, level: str = "coarse") -> float:
        """End of the last contiguous ingest-made node of ``level`` from time 0 (0.0 when none)."""

    @abstractmethod
    def add_question(self, stream: str, question: str, options: Sequence[str] = (), horizon: float = 0.0) -> int:
        """Record a question as it arrives; returns its id (used as the origin of the nodes it creates)."""

    @abstractmethod
    def set_answer(self, question_id: int, answer: dict[str, object]) -> None:
        """Record the answer object of a question."""

    @abstractmethod
    def questions(self, stream: str, limit: int = 50) -> list[dict[str, object]]:
        """Recent questions of a stream with their answers, newest first."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""
