"""What a question produced: the trace of its steps, streamed as they happen, and the final answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lucy.ingest.clips import clip_url
from lucy.text import clip_words, counted, hms

if TYPE_CHECKING:
    from lucy.query.reasoners.base import Usage

INSTRUCTION_CHARS = 100  # of a trace line's "look for:"
PROGRESS_INSTRUCTION_CHARS = 100  # the longest instruction a progress line quotes (whole)


@dataclass(slots=True)
class TraceStep:
    """One step of the loop: an agent call, a round of captioning, or the end.

    ``agent`` is one of: ``observe`` (an answer from what the detector observed, before anything else), ``tail``
    (coarse captions made on demand for the part not captioned yet), ``summarise``
    (summary nodes for long streams), ``answer``, ``select`` (sparse initialisation), ``localise``, ``caption``
    (a span looked at again, with its sub-spans one level deeper) and ``final`` (the forced last answer).
    """

    index: int
    agent: str
    level: str | None = None
    start: float | None = None
    end: float | None = None
    instruction: str = ""
    detail: str = ""
    iteration: int = 0  # backtracking round (0: before the loop)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_seconds: float = 0.0
    llm_calls: int = 0
    caption_calls: int = 0
    reused_nodes: int = 0
    created_nodes: int = 0
    error: str | None = None
    # The stream its span is on, for a question across streams (None: one stream, or a step of no one span, like
    # an answer from the memory of all of them).
    stream: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["latency_seconds"] = round(self.latency_seconds, 4)
        if self.stream is None:
            del out["stream"]
        return out

    def line(self) -> str:
        """One human-readable line (what ``lucy ask`` prints)."""
        where = ""
        if self.start is not None and self.end is not None:
            on = f" {self.stream}" if self.stream else ""
            where = f" {self.level or ''}{on} {self.start:g}-{self.end:g}s".rstrip()
        cost = []
        if self.llm_calls:
            cost.append(counted(self.llm_calls, "llm call"))
        if self.prompt_tokens or self.completion_tokens:  # only a model counts tokens (the embedded agents do not)
            cost.append(f"{self.prompt_tokens}+{self.completion_tokens} tok")
        if self.caption_calls:
            cost.append(counted(self.caption_calls, "caption"))
        if self.reused_nodes:
            cost.append(f"{self.reused_nodes} reused")
        cost.append(f"{self.latency_seconds:.2f}s")
        text = f"#{self.index:<2} r{self.iteration} {self.agent:<9}{where}"
        # One line whatever the texts hold (an instruction or an error may have several).
        if self.detail:
            text += f" | {_one_line(self.detail)}"
        if self.instruction:
            text += f" | look for: {clip_words(_one_line(self.instruction), INSTRUCTION_CHARS)}"
        if self.error:
            text += f" | ERROR: {_one_line(self.error)}"
        return f"{text} [{', '.join(cost)}]"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _span(step: Mapping[str, Any]) -> str:
    if step.get("start") is None or step.get("end") is None:
        return ""
    on = f"{step['stream']} " if step.get("stream") else ""  # a question across streams names the camera
    return f"{on}{hms(float(step['start']))}–{hms(float(step['end']))}"


def progress_line(step: Mapping[str, Any]) -> str:
    """What a step that has just begun is doing, in a few words for a person waiting (``step``: a
    :meth:`TraceStep.to_json` taken when it began; a chat reply shows these while the question runs)."""
    agent, span, round_ = step.get("agent", ""), _span(step), int(step.get("iteration") or 0)
    if agent == "observe":
        text = "reading what the detector observed"
    elif agent == "tail":
        text = f"captioning {span}, which ingest has not captioned yet"
    elif agent == "summarise":
        text = f"summarising memory of {span}"
    elif agent == "answer":
        text = "reading coarse memory" if round_ == 0 else f"answering again with what round {round_} found"
    elif agent == "select":
        text = "choosing the parts of the video to look at"
    elif agent == "localise":
        text = f"round {round_}: choosing where to look closer"
    elif agent == "caption":
        text = f"looking closer at {span}" if span else "looking closer"
        wanted = _one_line(str(step.get("instruction") or ""))
        if wanted and len(wanted) <= PROGRESS_INSTRUCTION_CHARS:  # a long one cut short says little: the trace has it
            text += f" for: {wanted}"
    elif agent == "final":
        text = "settling on a final answer"
    else:
        text = f"{agent} {span}".strip()
    return f"{text} …"


class TraceRecorder:
    """Records one question's steps and errors as its loop makes them (the lists its :class:`QueryResult` keeps)."""

    def __init__(self, on_begin: Callable[[TraceStep], None] | None = None,
                 on_progress: Callable[[TraceStep, str], None] | None = None) -> None:
        self.steps: list[TraceStep] = []
        self.errors: list[str] = []
        self.iteration = 0  # the backtracking round new steps belong to (0: before the rounds)
        # Told of each step as it begins, and of headway inside a long one: a step is yielded once done, and a
        # caption round can take minutes.
        self.on_begin = on_begin
        self.on_progress = on_progress

    def begin(self, agent: str, **fields: Any) -> TraceStep:
        """A new step, numbered and recorded now; the caller fills in what it did and cost."""
        step = TraceStep(index=len(self.steps) + 1, agent=agent, iteration=self.iteration, **fields)
        self.steps.append(step)
        if self.on_begin is not None:
            self.on_begin(step)
        return step

    def progress(self, step: TraceStep, text: str) -> None:
        """Headway of a running step, in a few words ("fine 1:10–1:20 captioned (2 of 7)")."""
        if self.on_progress is not None:
            self.on_progress(step, text)

    @staticmethod
    def charge(step: TraceStep, usage: Usage) -> None:
        """Add what an agent call cost to its step."""
        step.prompt_tokens += usage.prompt_tokens
        step.completion_tokens += usage.completion_tokens
        step.latency_seconds += usage.latency_seconds
        step.llm_calls += usage.llm_calls

    def agent_failed(self, step: TraceStep, error: Exception) -> None:
        """An agent gave no usable reply: its step says why and counts the call; the question goes on."""
        step.error = str(error)
        step.llm_calls = max(step.llm_calls, 1)
        self.errors.append(str(error))

    def error(self, message: str) -> None:
        """Record an error of the question that is not an agent's (a caption that failed, history not written)."""
        self.errors.append(message)


def wall_clock(wall_start: float | None, media_seconds: float) -> str | None:
    """ISO 8601 UTC time of a media time on a live stream (None for files)."""
    if wall_start is None:
        return None
    return datetime.fromtimestamp(wall_start + media_seconds, tz=UTC).isoformat(timespec="milliseconds")


@dataclass(slots=True)
class Evidence:
    start: float
    end: float
    wall_start: str | None = None
    wall_end: str | None = None
    stream: str | None = None  # the stream it is on, for a question across streams (None: the question's own)

    def to_json(self, stream: str | None = None) -> dict[str, Any]:
        """The span as answers show it, with ``clip_url``, the clip of it to watch (on ``stream``, the question's,
        unless the span names its own)."""
        out: dict[str, Any] = {"start": round(self.start, 3), "end": round(self.end, 3)}
        if self.stream is not None:
            out["stream"] = self.stream
        if self.wall_start is not None:
            out["wall_start"], out["wall_end"] = self.wall_start, self.wall_end
        on = self.stream or stream
        if on is not None:
            out["clip_url"] = clip_url(on, self.start, self.end)
        return out


@dataclass(slots=True)
class QueryResult:
    """The answer to one question, how it was reached, and what it cost."""

    question_id: int
    stream: str
    question: str
    options: list[str]
    answer: str
    option_index: int | None
    confident: bool
    evidence: list[Evidence]
    reason: str
    iterations: int
    horizon: float
    wall_seconds: float
    trace: list[TraceStep] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # A question across streams: the streams it looked at (``stream`` is then lucy.config.ALL_STREAMS); empty for
    # a question about one stream.
    streams: list[str] = field(default_factory=list)

    @property
    def llm_calls(self) -> int:
        return sum(s.llm_calls for s in self.trace)

    @property
    def caption_calls(self) -> int:
        return sum(s.caption_calls for s in self.trace)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.trace)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.trace)

    def to_json(self, *, trace: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"question_id": self.question_id, "stream": self.stream, "question": self.question,
                               "answer": self.answer}
        if self.streams:
            out["streams"] = list(self.streams)
        if self.options:
            out["options"] = list(self.options)
            out["option_index"] = self.option_index
        out.update({
            "confident": self.confident, "evidence": [e.to_json(self.stream) for e in self.evidence],
            "reason": self.reason,
            "iterations": self.iterations, "llm_calls": self.llm_calls, "caption_calls": self.caption_calls,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "horizon": round(self.horizon, 3), "wall_seconds": round(self.wall_seconds, 3), "errors": self.errors,
        })
        if trace:
            out["trace"] = [s.to_json() for s in self.trace]
        return out
