"""What a running question tells whoever waits for it, as typed events rather than ``(kind, dict)`` tuples.

The service runs the query engine on a loop of its own and hands these over, in the order they happened, to the
readers on the server's loop (SSE, the OpenAI-compatible stream, MQTT, the question's metrics record). They carry
the engine's own records (:class:`TraceStep`, :class:`QueryResult`), so a reader takes the figures it needs from
the answer instead of parsing them back out of its JSON; the JSON is made once, by the reader that sends it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lucy.query.trace import QueryResult, TraceStep


@dataclass(frozen=True, slots=True)
class StepBegun:
    """A step has begun (what it is about to do: a caption round can take minutes before it is done).
    ``step`` is a copy taken when it began: the engine goes on filling in its own."""

    step: TraceStep

    @classmethod
    def of(cls, step: TraceStep) -> StepBegun:
        return cls(dataclasses.replace(step))


@dataclass(frozen=True, slots=True)
class StepProgress:
    """Headway inside a running step, in a few words ("fine 1:10–1:20 captioned (2 of 7)")."""

    index: int
    agent: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "agent": self.agent, "text": self.text}


@dataclass(frozen=True, slots=True)
class QuestionStep:
    """A step of the trace, done (a copy taken then)."""

    step: TraceStep

    @classmethod
    def of(cls, step: TraceStep) -> QuestionStep:
        return cls(dataclasses.replace(step))


@dataclass(frozen=True, slots=True)
class QuestionAnswer:
    """The answer: the last event of a question that did not fail."""

    result: QueryResult


@dataclass(frozen=True, slots=True)
class QuestionFailed:
    """The question ended without an answer; ``error`` is what the reader raises (a service error or the engine's)."""

    error: Exception


# What a reader of a question's events sees: a failure is raised to it, not handed over.
QuestionUpdate = StepBegun | StepProgress | QuestionStep | QuestionAnswer
# What crosses from the question's loop to its reader.
QuestionEvent = QuestionUpdate | QuestionFailed
