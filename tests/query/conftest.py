"""Fakes of the boundaries the query loop talks to: a frame store with known times, a captioner whose world is
a function of (level, span), and a reasoner scripted turn by turn that checks every prompt fits the budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lucy.config import PRESETS, Level
from lucy.ingest.frames import Clip, FrameStore, StreamInfo, pick_rate
from lucy.memory.captioners.base import Captioner, CaptionerError
from lucy.memory.nodes import Caption, MemoryNode
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.query import QueryConfig, QueryEngine, prompts
from lucy.query.reasoners.base import (
    AnswerReply,
    CheckReply,
    LocaliseReply,
    MemoryItem,
    Question,
    Reasoned,
    Reasoner,
    ReasonerError,
    SelectReply,
    SummaryReply,
    Usage,
)

COARSE_INSTRUCTION = "describe everything"


class FakeFrames(FrameStore):
    """``duration`` seconds of tiny black frames at ``fps``, the first at ``offset`` s (a file whose first pts is
    not 0); ``wall_start`` makes it a live stream."""

    def __init__(self, name: str = "cam", duration: float = 300.0, fps: float = 2.0,
                 wall_start: float | None = None, offset: float = 0.0) -> None:
        self.name = name
        self.fps = fps
        self.wall_start = wall_start
        self._times = offset + np.arange(0.0, duration - 1e-9, 1.0 / fps)

    def append(self, frames: np.ndarray, times: np.ndarray) -> int:
        self._times = np.concatenate([self._times, times])
        return len(self._times)

    def committed(self) -> int:
        return len(self._times)

    def times(self) -> np.ndarray:
        return self._times

    def read(self, start: float, end: float, fps: float | None = None) -> Clip:
        index = pick_rate(self._times, start, end, fps)
        return Clip(np.zeros((len(index), 4, 4, 3), np.uint8), self._times[index].copy())

    def info(self) -> StreamInfo:
        last = float(self._times[-1]) if len(self._times) else None
        return StreamInfo(name=self.name, source="fake", live=self.wall_start is not None, frames=len(self._times),
                          first_time=0.0 if last is not None else None, last_time=last, stored_fps=self.fps,
                          width=4, height=4, codec="zstd", wall_start=self.wall_start, complete=True, lost=None)


@dataclass
class FakeCaptioner(Captioner):
    """Text of a span = ``world(level, start, end, instruction)``; start/end from the clip's times snapped to
    the level's grid. Records every call."""

    world: Callable[[str, float, float, str], str]
    preset: Any = field(default_factory=lambda: PRESETS["live"])
    fail: bool = False
    calls: list[tuple[str, float, float, str]] = field(default_factory=list)
    name: str = "fake"
    model: str = "fake-eye"

    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        span = self.preset.level(level).span_seconds
        start = float(np.floor(clip.times[0] / span + 1e-9) * span)
        end = start + span
        self.calls.append((level.value, start, end, instruction))
        if self.fail:
            raise CaptionerError("captioner is down")
        return Caption(text=self.world(level.value, start, end, instruction), model=self.model, frames=len(clip))


AgentScript = Callable[..., Any]


class ScriptedReasoner(Reasoner):
    """Replies come from per-agent functions given what a real reasoner is given. Every prompt the agents
    would send is rendered with the real prompt builders and must fit ``budget`` tokens."""

    name = "scripted"
    model = "scripted-llm"

    def __init__(self, *, answer: AgentScript | None = None, localise: AgentScript | None = None,
                 select: AgentScript | None = None, summarise: AgentScript | None = None,
                 budget: int | None = None) -> None:
        self._answer = answer or (lambda q, mem, final, n: AnswerReply(answer="?", confident=False,
                                                                        option_index=0 if q.options else None))
        self._localise = localise or (lambda q, mem, cands, n: LocaliseReply(span=cands[0].ref, instruction="look"))
        self._select = select or (lambda q, spans, k, n: SelectReply(spans=[s.ref for s in spans[:k]]))
        self._summarise = summarise or (lambda items, n: SummaryReply(summary=" ".join(i.text[:30] for i in items)))
        self.budget = budget
        self.calls: list[tuple[str, int]] = []  # (agent, prompt tokens)
        self.counts: dict[str, int] = {}

    def _check(self, agent: str, prompt: prompts.Prompt) -> int:
        tokens = prompt.tokens
        self.calls.append((agent, tokens))
        if self.budget is not None:
            assert tokens <= self.budget, f"{agent} prompt of {tokens} tokens exceeds the budget of {self.budget}"
        n = self.counts.get(agent, 0)
        self.counts[agent] = n + 1
        return n

    @staticmethod
    def _result(value: Any, tokens: int) -> Reasoned[Any]:
        if isinstance(value, Exception):
            raise value
        return Reasoned(value, Usage(prompt_tokens=tokens, completion_tokens=7, latency_seconds=0.001))

    async def answer(self, question: Question, memory: Sequence[MemoryItem], *, final: bool = False):
        prompt = prompts.answer_prompt(question, memory, final=final)
        n = self._check("answer", prompt)
        return self._result(self._answer(question, list(memory), final, n), prompt.tokens)

    async def localise(self, question: Question, memory: Sequence[MemoryItem], candidates: Sequence[MemoryItem]):
        prompt = prompts.localise_prompt(question, memory, candidates)
        n = self._check("localise", prompt)
        return self._result(self._localise(question, list(memory), list(candidates), n), prompt.tokens)

    async def select(self, question: Question, spans: Sequence[MemoryItem], k: int):
        prompt = prompts.select_prompt(question, spans, k)
        n = self._check("select", prompt)
        return self._result(self._select(question, list(spans), k, n), prompt.tokens)

    async def summarise(self, items: Sequence[MemoryItem], *, max_chars: int):
        prompt = prompts.summarise_prompt(items, max_chars)
        n = self._check("summarise", prompt)
        return self._result(self._summarise(list(items), n), prompt.tokens)

    async def check(self, watch_question: str, memory: Sequence[MemoryItem]):
        prompt = prompts.check_prompt(watch_question, memory)
        self._check("check", prompt)
        return self._result(CheckReply(verdict="no"), prompt.tokens)


def make_engine(tmp_path: Path, *, frames: FrameStore, reasoner: Reasoner, captioner: Captioner | None,
                memory: SQLiteMemoryStore | None = None, preset: str = "live", **config: Any) -> QueryEngine:
    memory = memory or SQLiteMemoryStore(tmp_path / "memory.sqlite")
    return QueryEngine(frames=frames, memory=memory, reasoner=reasoner, captioner=captioner,
                       preset=PRESETS[preset], config=QueryConfig(**config), coarse_instruction=COARSE_INSTRUCTION)


def coarse_nodes(stream: str, duration: float, text: Callable[[float, float], str], span: float = 60.0,
                 ) -> list[MemoryNode]:
    out, t = [], 0.0
    while t < duration - 1e-9:
        end = min(t + span, duration)
        out.append(MemoryNode(stream=stream, level="coarse", start=t, end=end, text=text(t, end),
                              instruction=COARSE_INSTRUCTION))
        t = end
    return out


@pytest.fixture
def fakes() -> Any:
    """The fakes and helpers of this folder, as one namespace (conftest modules are not importable)."""

    class _Namespace:
        pass

    ns = _Namespace()
    ns.FakeFrames = FakeFrames
    ns.FakeCaptioner = FakeCaptioner
    ns.ScriptedReasoner = ScriptedReasoner
    ns.make_engine = make_engine
    ns.coarse_nodes = coarse_nodes
    ns.ReasonerError = ReasonerError
    ns.COARSE_INSTRUCTION = COARSE_INSTRUCTION
    return ns
