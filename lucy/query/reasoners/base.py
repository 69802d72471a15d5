"""The reasoner boundary: the LLM agents of the backtracking loop behind one interface.

Four agents (paper, §3): *answer* (answer, confidence, supporting spans, reason), *localise + instruct* (the
single most relevant unsearched span and what to look for in it), *select* (sparse initialisation: the most
relevant coarse spans, or all of them for a question about the whole video) and *summarise* (summary nodes
above coarse memory for long streams); and beside the loop, *check* (does one span's memory show what a standing
question, a watch, waits for: yes, no, or maybe). Every reply is a pydantic model, and every call reports what it
cost.

The engine decides what memory an agent sees (and keeps every prompt within the context budget); a reasoner
only turns what it is given into a reply. Memory text is data read from video, never instructions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lucy.errors import LucyError


class ReasonerError(LucyError):
    """An agent could not give a usable reply (server down, or a reply that still did not validate after the
    model was shown its error). The engine records it in the trace and carries on without that reply."""


# ------------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class ClassRow:
    """One object class in the period: distinct tracks, the most in view in one detected frame, first and last
    seen."""

    label: str
    tracks: int
    most_at_once: int
    first_seen: float
    last_seen: float


@dataclass(frozen=True, slots=True)
class TrackRow:
    """One tracked object: where it came from and went, whether it moved, how it looked (``looks``: "white",
    "red top and blue bottoms", or "")."""

    track_id: int
    label: str
    first_seen: float
    last_seen: float
    entered: str
    exited: str | None  # None: still tracked
    moving: bool
    looks: str
    score: float


@dataclass(frozen=True, slots=True)
class Sighting:
    """A line of text read on screen, or heard, and when: first and last seen (or the line's start and end), media
    seconds."""

    start: float
    end: float
    text: str


@dataclass(frozen=True, slots=True)
class ObservationTable:
    """What the detect stage, OCR and transcription stored for ``[start, end]`` of the stream, bounded: every class,
    the most telling tracks (``tracks_total`` says how many there were), text sightings and speech lines.
    ``coverage``: the share of the period the detector watched (a "none seen" means little below 1); None when the
    detect stage never reached the period (no classes or tracks for want of looking, not of things)."""

    start: float
    end: float
    coverage: float | None
    classes: tuple[ClassRow, ...] = ()
    tracks: tuple[TrackRow, ...] = ()
    tracks_total: int = 0
    texts: tuple[Sighting, ...] = ()
    speech: tuple[Sighting, ...] = ()


@dataclass(frozen=True, slots=True)
class QuestionBrief:
    """What the engine understood of a question (:mod:`lucy.query.kinds`) and what was observed in its period,
    for reasoners that show it to a model (:attr:`Reasoner.reads_observations`)."""

    kind: str  # a lucy.query.kinds.Kind value: "count", "presence", "time", ...
    subject: str | None = None  # the object class asked about ("person", "vehicle"), when the question names one
    period: tuple[float, float] | None = None  # the period the question names, media seconds; None: the whole stream
    period_words: str = ""  # how the question named it ("in the first minute")
    detail: str = ""  # the kind's detail ("at once" for a count of the most in view)
    table: ObservationTable | None = None  # None: nothing observed, read or heard in the period
    max_chars: int = 2400  # the table's share of a prompt, in characters (lucy.query.prompts.observation_chars)


@dataclass(frozen=True, slots=True)
class Question:
    """What is asked, about a stream seen up to ``horizon`` media seconds. ``brief``: what the engine understood of
    it and observed in its period (None: not read, as for reasoners that do not show it)."""

    text: str
    options: tuple[str, ...] = ()
    horizon: float = 0.0
    brief: QuestionBrief | None = None
    # A question across streams: each stream and the media seconds seen of it (each memory names its stream);
    # empty for a question about one stream.
    streams: tuple[tuple[str, float], ...] = ()

    @property
    def multiple_choice(self) -> bool:
        return bool(self.options)


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One memory as an agent sees it. ``ref`` is the number the prompt shows and replies refer to."""

    ref: int
    level: str  # "summary2", "summary1", "coarse", "fine", "ultra_fine"
    start: float
    end: float
    text: str
    instruction: str = ""  # what the captioner was told to look for (question-made nodes)
    # Cosine similarity of the memory's text to the question's (an embedder's vectors); None when semantic search
    # is off or the memory is a placeholder. Only comparable within one question.
    similarity: float | None = None
    note: str = ""  # what the engine knows of the span beyond its text ("searched: nothing found")
    stream: str = ""  # the stream (camera) it is of, for a question across streams ("" for one stream)


# The note of a candidate span that holds what the answer so far rests on (lucy.query.localisation): where looking
# closer can confirm or overturn it.
EVIDENCE_NOTE = "holds what the answer so far rests on"


# ------------------------------------------------------------------------------------------------- replies


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EvidenceSpan(_Reply):
    """A stretch of media time that supports an answer."""

    start: float = Field(ge=0, description="Start of the supporting span, media seconds.")
    end: float = Field(ge=0, description="End of the supporting span, media seconds.")
    stream: str | None = Field(None, description="The stream (camera) of the span, as the memory names it; "
                                                 "leave it out when the memory names no stream.")

    @model_validator(mode="after")
    def _ordered(self) -> EvidenceSpan:
        if self.end < self.start:
            raise ValueError(f"evidence span ends ({self.end}) before it starts ({self.start})")
        return self


class AnswerReply(_Reply):
    """The answering agent's reply."""

    answer: str = Field(description="A direct answer to the question in one short sentence of your own words "
                                    "(\"Gate 12.\", \"About 12 people walked by, 3 to 7 at a time.\"), never a "
                                    "copied memory line; with options, it says what the chosen option says.")
    option_index: int | None = Field(
        None, ge=0, description="Multiple choice: 0-based index of the chosen option; null for open questions.")
    confident: bool = Field(description="True only if the memory shown clearly supports the answer.")
    evidence: list[EvidenceSpan] = Field(
        default_factory=list, description="Media-time spans of the memories that support the answer.")
    reason: str = Field("", description="One or two sentences: why this answer, or what is missing.")


class LocaliseReply(_Reply):
    """The localisation agent's reply: where to look next, and for what."""

    span: int = Field(description="The ref number of one candidate span (from the candidate list).")
    instruction: str = Field(min_length=1, description="What the captioner should look for in that span.")
    reason: str = Field("", description="Why this span.")


class SelectReply(_Reply):
    """The sparse-initialisation reply: the most relevant spans, or all of them for a global question."""

    spans: list[int] = Field(default_factory=list, description="Ref numbers of the most relevant spans, best first.")
    global_question: bool = Field(
        False, description="True if answering needs the whole video (e.g. a summary or a count over all of it).")
    reason: str = Field("", description="Why these spans.")


class SummaryReply(_Reply):
    """A summary of consecutive memories (one node of a summary level)."""

    summary: str = Field(min_length=1, description="What happens in these spans, keeping names, text and numbers.")


class CheckReply(_Reply):
    """The check agent's reply: whether one span's memory shows what a watch waits for."""

    verdict: Literal["yes", "no", "maybe"] = Field(
        description="yes: the memory clearly shows it; maybe: it hints at it but a closer look is needed; no: not "
                    "shown.")
    evidence: list[EvidenceSpan] = Field(
        default_factory=list, description="Media-time spans of the memories that show it (empty for no).")
    reason: str = Field("", description="One sentence: what in the memory shows it, or what is missing.")


R = TypeVar("R", bound=BaseModel)


@dataclass(slots=True)
class Usage:
    """What one agent call cost (a call that was retried once counts two LLM calls)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_seconds: float = 0.0
    llm_calls: int = 1


@dataclass(slots=True)
class Reasoned(Generic[R]):
    """A validated reply and its cost."""

    reply: R
    usage: Usage = field(default_factory=Usage)


# ------------------------------------------------------------------------------------------------- checks


def check_answer(reply: AnswerReply, question: Question) -> AnswerReply:
    """Refuse what the schema cannot: an option index that does not exist. Raises ValueError."""
    if question.options:
        if reply.option_index is None:
            raise ValueError(f"option_index is required: choose one of the {len(question.options)} options "
                             f"(0 to {len(question.options) - 1})")
        if reply.option_index >= len(question.options):
            raise ValueError(f"option_index {reply.option_index} does not exist: choose 0 to "
                             f"{len(question.options) - 1}")
    return reply


def check_localise(reply: LocaliseReply, candidates: Sequence[int]) -> LocaliseReply:
    if reply.span not in candidates:
        shown = ", ".join(map(str, list(candidates)[:30]))
        raise ValueError(f"span {reply.span} is not a candidate; choose one of: {shown}")
    return reply


def check_evidence(reply: CheckReply, memory: Sequence[MemoryItem]) -> CheckReply:
    """A yes must point at the memory shown: evidence outside every memory's span is refused."""
    if not memory:
        return reply
    lo, hi = min(m.start for m in memory), max(m.end for m in memory)
    outside = [e for e in reply.evidence if e.end <= lo or e.start >= hi]
    if outside:
        raise ValueError(f"evidence {outside[0].start:g}-{outside[0].end:g}s lies outside the memory shown "
                         f"({lo:g}-{hi:g}s)")
    return reply


def check_select(reply: SelectReply, refs: Sequence[int]) -> SelectReply:
    allowed = set(refs)
    unknown = [r for r in reply.spans if r not in allowed]
    if unknown:
        raise ValueError(f"spans {unknown} are not in the list; use ref numbers that are shown")
    if not reply.spans and not reply.global_question:
        raise ValueError("choose at least one span (or set global_question to true)")
    return reply


# ------------------------------------------------------------------------------------------------- interface


class Reasoner(ABC):
    """The agents of the loop. Implementations must be safe to call from one event loop, one call at a time
    per question (several questions may run at once)."""

    name: str  # backend, e.g. "lexical", "openai"
    model: str  # recorded on summary nodes and in the trace
    # Whether its prompts show the question's brief (kind and observation table): the engine reads the observations
    # of the question's period only for a reasoner that uses them.
    reads_observations: bool = False
    # Whether it writes answers of its own from what memory says (a chat model): one that only quotes memory and
    # scores options (the embedded lexical reasoner) cannot say why someone did something, however closely the loop
    # looks, so the engine gives such a question the operator's honest account without backtracking.
    interprets: bool = False

    @abstractmethod
    async def answer(self, question: Question, memory: Sequence[MemoryItem], *,
                     final: bool = False) -> Reasoned[AnswerReply]:
        """Answer from ``memory``. ``final``: the last chance, an answer must be given even if unsure."""

    @abstractmethod
    async def localise(self, question: Question, memory: Sequence[MemoryItem],
                       candidates: Sequence[MemoryItem]) -> Reasoned[LocaliseReply]:
        """Pick one of ``candidates`` (by ref) to look at more closely, and say what to look for."""

    @abstractmethod
    async def select(self, question: Question, spans: Sequence[MemoryItem], k: int) -> Reasoned[SelectReply]:
        """Pick the ``k`` spans most relevant to the question (by ref), or say it needs all of them."""

    @abstractmethod
    async def summarise(self, items: Sequence[MemoryItem], *, max_chars: int) -> Reasoned[SummaryReply]:
        """Summarise consecutive memories into at most ``max_chars`` characters."""

    @abstractmethod
    async def check(self, watch_question: str, memory: Sequence[MemoryItem]) -> Reasoned[CheckReply]:
        """Whether ``memory`` (one span's: its coarse caption, deeper captions, what was heard) shows what the
        standing question ``watch_question`` waits for ("tell me when someone is at the door")."""

    async def aclose(self) -> None:
        """Release clients and connections."""
