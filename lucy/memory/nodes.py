"""What memory is made of: time-indexed text nodes at each level, and captions as captioners return them."""

from __future__ import annotations

from dataclasses import dataclass, field

INGEST_ORIGIN = "ingest"
# A coarse caption of the open end of a live stream, made by a question before ingest closed the span. It is
# partial: the next question with a later horizon replaces it, and the ingest caption of the whole span
# replaces it for good. A span holds at most one.
TAIL_ORIGIN = "tail"


def question_origin(question_id: int | str) -> str:
    """The origin recorded on nodes that a question created (reused by later questions)."""
    return f"question:{question_id}"


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open stretch of media time ``[start, end)`` in seconds from the stream's start."""

    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end

    def contains(self, other: Span) -> bool:
        return self.start <= other.start and other.end <= self.end


@dataclass(frozen=True, slots=True)
class MemoryNode:
    """One memory: what a captioner (or a summariser) said about ``[start, end)`` of a stream.

    ``level`` is a :class:`lucy.config.Level` value ("coarse", "fine", "ultra_fine") or a summary level
    ("summary1", "summary2", ... above coarse). ``id`` is None until the node is stored.
    """

    stream: str
    level: str
    start: float
    end: float
    text: str
    instruction: str = ""
    origin: str = INGEST_ORIGIN
    parent: int | None = None
    model: str = ""
    created: float = 0.0
    id: int | None = None

    @property
    def span(self) -> Span:
        return Span(self.start, self.end)


@dataclass(frozen=True, slots=True)
class Caption:
    """A captioner's answer for one clip, with what it cost."""

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_seconds: float = 0.0
    frames: int = 0
    extra: dict[str, object] = field(default_factory=dict)
