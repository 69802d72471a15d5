"""The backtracking loop (VideoLucy, Algorithm 1) over what a stream has ingested, with memory that persists.

For a question that arrives when the stream's frame store holds media up to ``horizon``:

0. Coarse memory up to the horizon is gathered; coarse spans the builder has not captioned yet at the end
   (the *tail*, up to ``query.tail_max_spans``) are captioned now from the frame store. When even a short view
   of all coarse memory would not fit ``query.context_budget_tokens``, summary nodes above coarse
   (``summary1``, ``summary2``, ...) are built for the complete groups that lack one, and stored.
1. The answering agent answers from coarse memory (and any deeper memory earlier questions left inside the
   horizon); a confident answer ends the question.
2. Sparse initialisation: the most relevant ``query.init_spans`` coarse spans, each widened by its neighbours,
   become the current memory (all of them for a question about the whole video). On long streams the choice
   goes top-down through the summary levels.
3. Up to ``query.max_iterations`` rounds: the localisation agent picks one span of the current memory not yet
   searched and says what to look for; that span is captioned again at its own depth with the instruction and
   its sub-spans at the next depth (coarse -> fine -> ultra_fine, each at its level's fps), and all of it joins
   the current memory; the answering agent answers again; a confident answer ends the question.
4. Otherwise a final answer is forced and marked not confident.

Every node a question makes is stored with origin ``question:<id>`` and parent links. A later question starts
from all nodes inside its horizon and reuses deeper nodes instead of captioning a span again, so the same
question asked twice needs no new captions. No prompt exceeds the context budget: memory is packed into it
(texts clipped, the least relevant memories dropped). The loop yields a :class:`TraceStep` per step.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from lucy.config import Level, LucySettings, Preset
from lucy.errors import LucyError
from lucy.ingest.frames import FrameStore
from lucy.memory.captioners.base import Captioner, CaptionerError
from lucy.memory.captioners.guard import CaptionerUnavailable
from lucy.memory.nodes import INGEST_ORIGIN, TAIL_ORIGIN, MemoryNode, question_origin
from lucy.memory.store import MemoryStore
from lucy.query import prompts
from lucy.query.reasoners.base import (
    AnswerReply,
    MemoryItem,
    Question,
    Reasoned,
    Reasoner,
    ReasonerError,
    Usage,
)
from lucy.query.text import BM25, clip_text, terms
from lucy.query.trace import Evidence, QueryResult, TraceStep, wall_clock

_EPS = 1e-3
_DEPTH = {"coarse": 0, "fine": 1, "ultra_fine": 2}
_LEVELS = [level.value for level in Level]
PLACEHOLDER_TEXT = "(not captioned yet)"


def summary_level(n: int) -> str:
    return f"summary{n}"


def _summary_depth(level: str) -> int:
    """1 for summary1, 2 for summary2, ...; 0 for the memory levels."""
    if level.startswith("summary") and level[7:].isdigit():
        return int(level[7:])
    return 0


def _key(level: str, start: float, end: float) -> tuple[str, int, int]:
    return level, round(start * 1000), round(end * 1000)


def _expired(before: float) -> str:
    return f"frames before {before:g} s have expired (retention)"


def _norm(instruction: str) -> str:
    return " ".join(instruction.lower().split())


@dataclass(frozen=True)
class QueryConfig:
    """What the loop needs from configuration (see :class:`lucy.config.settings.QuerySettings`)."""

    max_iterations: int = 5
    init_spans: int = 3
    neighbours: int = 1
    context_budget_tokens: int = 16_384
    summary_fanout: int = 12
    summary_max_chars: int = 800
    tail_max_spans: int = 2
    max_in_flight: int = 4

    @classmethod
    def from_settings(cls, settings: LucySettings) -> QueryConfig:
        q = settings.query
        return cls(max_iterations=q.max_iterations, init_spans=q.init_spans, neighbours=q.neighbours,
                   context_budget_tokens=q.context_budget_tokens, summary_fanout=q.summary_fanout,
                   summary_max_chars=q.summary_max_chars, tail_max_spans=q.tail_max_spans,
                   max_in_flight=settings.captioner.max_in_flight)


class QueryEngine:
    """Answers questions about one stream. Knows only the four boundaries (frame store, memory store,
    captioner, reasoner); backends are chosen by the caller. Several questions may run at once."""

    def __init__(self, *, frames: FrameStore, memory: MemoryStore, reasoner: Reasoner, captioner: Captioner | None,
                 preset: Preset, config: QueryConfig | None = None, coarse_instruction: str = "") -> None:
        self.frames = frames
        self.memory = memory
        self.reasoner = reasoner
        self.captioner = captioner
        self.preset = preset
        self.config = config or QueryConfig()
        self.coarse_instruction = coarse_instruction
        self.stream = frames.name
        self._semaphore: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def _captions(self) -> asyncio.Semaphore:
        """Bounds captions in flight across all questions of this engine (one per event loop)."""
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore[0] is not loop:
            self._semaphore = (loop, asyncio.Semaphore(self.config.max_in_flight))
        return self._semaphore[1]

    def run(self, question: str, options: Sequence[str] = ()) -> QueryRun:
        """Start answering; iterate the result for the trace, then read ``.result``."""
        return QueryRun(_Session(self, question, tuple(options)))

    async def ask(self, question: str, options: Sequence[str] = ()) -> QueryResult:
        """Answer and return the result (its ``trace`` holds every step)."""
        run = self.run(question, options)
        async for _ in run:
            pass
        assert run.result is not None
        return run.result


class QueryRun:
    """An answer in progress: an async iterator of :class:`TraceStep`; ``result`` is set when it ends."""

    def __init__(self, session: _Session) -> None:
        self._session = session
        self.result: QueryResult | None = None

    def __aiter__(self) -> AsyncIterator[TraceStep]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TraceStep]:
        async for step in self._session.execute():
            yield step
        self.result = self._session.result


@dataclass
class _Span:
    level: str
    start: float
    end: float

    @property
    def key(self) -> tuple[str, int, int]:
        return _key(self.level, self.start, self.end)


@dataclass
class _Item:
    """A memory in this question's view: a stored node or a placeholder for an uncaptioned coarse span."""

    ref: int
    level: str
    start: float
    end: float
    text: str
    instruction: str = ""
    node: MemoryNode | None = None
    plain: bool = True  # a span's question-independent caption (not one made with an instruction)

    def view(self) -> MemoryItem:
        return MemoryItem(self.ref, self.level, self.start, self.end, self.text, self.instruction)


@dataclass
class _Answer:
    reply: AnswerReply | None
    step: TraceStep


class _Session:
    """State of one question."""

    def __init__(self, engine: QueryEngine, text: str, options: tuple[str, ...]) -> None:
        self.e = engine
        self.c = engine.config
        self.text = text.strip()
        self.options = options
        if not self.text:
            raise LucyError("the question is empty")
        self.question = Question(self.text, options)
        self.focus = frozenset(terms(self.text) + [t for o in options for t in terms(o)])
        self.steps: list[TraceStep] = []
        self.errors: list[str] = []
        self.items: dict[int, _Item] = {}
        self.by_key: dict[tuple[str, int, int], list[int]] = {}
        self.current: set[int] = set()
        self.searched: set[tuple[str, int, int]] = set()
        self.iteration = 0
        self.captioner_down: str | None = None  # why captions are not asked for any more in this question
        self.result: QueryResult | None = None
        self._next_ref = 1
        self._started = time.perf_counter()
        # The budget leaves room for one retry of a reply that did not validate.
        self.budget = max(256, self.c.context_budget_tokens - prompts.RETRY_RESERVE_TOKENS)

    # --------------------------------------------------------------------------------------- bookkeeping

    def _step(self, agent: str, **fields: Any) -> TraceStep:
        step = TraceStep(index=len(self.steps) + 1, agent=agent, iteration=self.iteration, **fields)
        self.steps.append(step)
        return step

    @staticmethod
    def _cost(step: TraceStep, usage: Usage) -> None:
        step.prompt_tokens += usage.prompt_tokens
        step.completion_tokens += usage.completion_tokens
        step.latency_seconds += usage.latency_seconds
        step.llm_calls += usage.llm_calls

    def _add_item(self, level: str, start: float, end: float, text: str, *, instruction: str = "",
                  node: MemoryNode | None = None, plain: bool = True) -> _Item:
        item = _Item(self._next_ref, level, start, end, text, instruction, node, plain)
        self._next_ref += 1
        self.items[item.ref] = item
        self.by_key.setdefault(_key(level, start, end), []).append(item.ref)
        return item

    def _add_node(self, node: MemoryNode) -> _Item:
        plain = node.origin == INGEST_ORIGIN or _norm(node.instruction) == _norm(self.e.coarse_instruction) \
            or node.level not in _DEPTH
        return self._add_item(node.level, node.start, node.end, node.text, instruction="" if plain else
                              node.instruction, node=node, plain=plain)

    def _span_item(self, level: str, start: float, end: float) -> _Item | None:
        """The item that stands for a span: its plain caption, else any caption of it, else None."""
        refs = self.by_key.get(_key(level, start, end), [])
        plain = [r for r in refs if self.items[r].plain]
        pick = plain or refs
        return self.items[pick[-1]] if pick else None

    def _spec(self, level: str) -> tuple[float, float]:
        spec = self.e.preset.level(Level(level))
        return spec.span_seconds, spec.fps

    def _relevance(self, items: Sequence[_Item]) -> list[float]:
        """Priority for packing: lexical match with the question, plus a bonus for depth and for memories
        made for this question's instructions (they are what backtracking found)."""
        if not items:
            return []
        bm25 = BM25([i.text for i in items])
        query = terms(self.text) + [t for o in self.options for t in terms(o)]
        raw = bm25.scores(query)
        top = max(raw) or 1.0
        out = []
        for item, score in zip(items, raw, strict=True):
            bonus = 0.15 * _DEPTH.get(item.level, -1) + (0.1 if not item.plain else 0.0)
            out.append(score / top + bonus)
        return out

    def _ordered(self, refs: Sequence[int]) -> list[_Item]:
        return sorted((self.items[r] for r in refs),
                      key=lambda i: (i.start, -_summary_depth(i.level), _DEPTH.get(i.level, -1), i.ref))

    # --------------------------------------------------------------------------------------- the loop

    async def execute(self) -> AsyncIterator[TraceStep]:
        e, c = self.e, self.c
        info = await asyncio.to_thread(e.frames.info)
        self.info = info
        horizon = info.media_seconds if info.frames else 0.0
        if horizon <= 0:
            raise LucyError(f"stream {e.stream!r} has no frames yet; ask again once ingest has stored some")
        self.horizon = horizon
        self.question = Question(self.text, self.options, horizon)
        self.qid = await asyncio.to_thread(e.memory.add_question, e.stream, self.text, list(self.options), horizon)
        self.origin = question_origin(self.qid)

        await self._load()
        async for step in self._caption_tail():
            yield step
        top_down = False
        if self._coarse_too_big():
            top_down = True
            async for step in self._build_summaries():
                yield step

        # 1. answer from coarse memory (and what earlier questions found inside the horizon)
        start_refs = [r for r, i in self.items.items() if not i.level.startswith("summary")]
        answer = await self._answer(start_refs, final=False)
        yield answer.step
        if answer.reply is not None and answer.reply.confident:
            yield await self._finish(answer.reply, confident=True)
            return

        # 2. sparse initialisation
        async for step in self._initialise(top_down):
            yield step

        # 3. backtracking rounds
        last: AnswerReply | None = answer.reply
        for round_ in range(1, c.max_iterations + 1):
            candidates = self._candidates()
            if not candidates:
                break
            self.iteration = round_
            span, instruction, step = await self._localise(candidates)
            yield step
            async for step in self._search(span, instruction):
                yield step
            if self.captioner_down is not None:
                break  # deeper memory cannot be made now: rounds would find nothing new
            answer = await self._answer(sorted(self.current), final=False)
            yield answer.step
            if answer.reply is not None:
                last = answer.reply
                if answer.reply.confident:
                    yield await self._finish(answer.reply, confident=True)
                    return

        # 4. forced final answer, never confident
        final = await self._answer(sorted(self.current), final=True)
        final.step.agent = "final"
        yield final.step
        reply = final.reply or last
        yield await self._finish(reply, confident=False)

    # --------------------------------------------------------------------------------------- memory

    async def _load(self) -> None:
        e = self.e
        nodes = await asyncio.to_thread(e.memory.nodes, e.stream, start=0.0, end=self.horizon)
        tc, _ = self._spec("coarse")
        self.coarse_grid = [(k * tc, min((k + 1) * tc, self.horizon))
                            for k in range(max(1, math.ceil(self.horizon / tc - 1e-9)))]
        for node in nodes:
            if node.end <= self.horizon + _EPS and node.end > node.start:
                self._add_node(node)
        # A coarse span's plain caption may be partial (a tail captioned by an earlier question with a smaller
        # horizon): it stands for the span until a whole caption exists.
        self.coarse: list[_Item | None] = []
        for start, end in self.coarse_grid:
            best: _Item | None = None
            for item in self.items.values():
                if item.level == "coarse" and item.plain and abs(item.start - start) < _EPS and \
                        item.end <= end + _EPS and (best is None or item.end > best.end):
                    best = item
            self.coarse.append(best)

    def _coarse_item(self, k: int) -> _Item:
        item = self.coarse[k]
        if item is None:  # a placeholder, so the span can still be chosen and captioned when searched
            start, end = self.coarse_grid[k]
            item = self._add_item("coarse", start, end, PLACEHOLDER_TEXT)
            self.coarse[k] = item
        return item

    async def _caption(self, level: str, start: float, end: float, instruction: str,
                       parent: int | None, *, origin: str | None = None) -> tuple[MemoryNode | None, str | None, bool]:
        """Caption one span from the frame store at its level's fps; the node is stored (write-back) with
        ``origin`` (default: this question's).

        Returns (node, error, whether the captioner was called)."""
        e = self.e
        if end <= self.info.expired_before + _EPS:  # retention deleted its frames: its memory text is all there is
            return None, _expired(self.info.expired_before), False
        if e.captioner is None:
            return None, "no captioner is configured (captioner.backend = none)", False
        if self.captioner_down is not None:  # it failed earlier in this question: don't wait on it again
            return None, self.captioner_down, False
        _, fps = self._spec(level)
        async with e._captions():
            clip = await asyncio.to_thread(e.frames.read, start, end, fps)
            if len(clip) == 0:
                expired = await asyncio.to_thread(e.frames.available_from)
                return None, _expired(expired) if start < expired else None, False
            try:
                caption = await e.captioner.describe(clip, instruction, level=Level(level))
            except CaptionerError as err:
                self.captioner_down = f"captioner unavailable, answering from memory: {err}"
                return None, f"caption of {level} {start:g}-{end:g}s failed: {err}", \
                    not isinstance(err, CaptionerUnavailable)
        node = MemoryNode(stream=e.stream, level=level, start=start, end=end, text=caption.text,
                          instruction=instruction, origin=origin or self.origin, parent=parent,
                          model=caption.model or e.captioner.model)
        node = await asyncio.to_thread(e.memory.add, node)
        return node, None, True

    async def _caption_tail(self) -> AsyncIterator[TraceStep]:
        """Coarse spans at the end that the builder has not captioned yet are captioned now."""
        missing = []
        for k in range(len(self.coarse_grid) - 1, -1, -1):
            item = self.coarse[k]
            start, end = self.coarse_grid[k]
            if item is not None and item.end >= end - _EPS:
                break
            missing.append(k)
        for k in sorted(missing[: self.c.tail_max_spans]):
            start, end = self.coarse_grid[k]
            step = self._step("tail", level="coarse", start=start, end=end,
                              detail="not captioned by ingest yet; captioned on demand")
            began = time.perf_counter()
            node, error, called = await self._caption("coarse", start, end, self.e.coarse_instruction, None,
                                                      origin=TAIL_ORIGIN)
            step.latency_seconds = time.perf_counter() - began
            step.caption_calls = int(called)
            if node is not None:
                step.created_nodes = 1
                self.coarse[k] = self._add_node(node)
            elif error:
                step.error = error
                self.errors.append(error)
            else:
                step.detail = "no frames in this span"
            yield step

    # --------------------------------------------------------------------------------------- summaries

    def _coarse_too_big(self) -> bool:
        """True when coarse memory exceeds the budget: a select prompt over all coarse spans, whole, would not
        fit (clipping every caption to a sliver would hide what localisation needs)."""
        view = [self._coarse_item(k).view() for k in range(len(self.coarse_grid))]
        return prompts.select_prompt(self.question, view, self.c.init_spans).tokens > self.budget

    def _children(self, level: str, start: float, end: float) -> list[_Item] | None:
        """The items one level below ``level`` covering ``[start, end)``; None unless complete."""
        depth = _summary_depth(level)
        tc, _ = self._spec("coarse")
        if depth == 1:
            first = round(start / tc)
            count = round((end - start) / tc)
            out = []
            for k in range(first, first + count):
                if k >= len(self.coarse) or self.coarse[k] is None:
                    return None
                item = self.coarse[k]
                assert item is not None
                if item.end < self.coarse_grid[k][1] - _EPS or self.coarse_grid[k][1] - self.coarse_grid[k][0] < \
                        tc - _EPS:
                    return None
                out.append(item)
            return out
        unit = (end - start) / self.c.summary_fanout
        below = summary_level(depth - 1)
        out = []
        for i in range(self.c.summary_fanout):
            item = self._span_item(below, start + i * unit, start + (i + 1) * unit)
            if item is None:
                return None
            out.append(item)
        return out

    async def _build_summaries(self) -> AsyncIterator[TraceStep]:
        """Summary nodes for every complete group that lacks one, level by level (stored: later questions and
        the builder's later growth reuse them)."""
        tc, _ = self._spec("coarse")
        fan = self.c.summary_fanout
        depth = 1
        while True:
            unit = tc * fan ** depth
            groups = int(math.floor(self.horizon / unit + 1e-9))
            if groups == 0:
                break
            level = summary_level(depth)
            for g in range(groups):
                start, end = g * unit, (g + 1) * unit
                if self._span_item(level, start, end) is not None:
                    continue
                children = self._children(level, start, end)
                if children is None:
                    continue
                step = self._step("summarise", level=level, start=start, end=end)
                views = [ch.view() for ch in children]
                max_chars = self.c.summary_max_chars
                packed = prompts.pack(lambda v: prompts.summarise_prompt(v, max_chars), views,
                                      [0.0] * len(views), self.budget)
                try:
                    reasoned = await self.e.reasoner.summarise(packed, max_chars=max_chars)
                except ReasonerError as err:
                    step.error = str(err)
                    step.llm_calls = 1
                    self.errors.append(str(err))
                    yield step
                    continue
                self._cost(step, reasoned.usage)
                node = MemoryNode(stream=self.e.stream, level=level, start=start, end=end,
                                  text=clip_text(reasoned.reply.summary, max_chars), origin=self.origin,
                                  model=self.e.reasoner.model)
                node = await asyncio.to_thread(self.e.memory.add, node)
                self._add_node(node)
                step.created_nodes = 1
                yield step
            depth += 1

    def _cover(self) -> list[_Item]:
        """The coarsest items that cover ``[0, horizon)`` once: summaries where they exist, else coarse."""
        tc, _ = self._spec("coarse")
        out: list[_Item] = []
        k = 0
        while k < len(self.coarse_grid):
            start = self.coarse_grid[k][0]
            chosen: _Item | None = None
            for item in self.items.values():
                d = _summary_depth(item.level)
                if d and abs(item.start - start) < _EPS and (chosen is None or d > _summary_depth(chosen.level)):
                    chosen = item
            if chosen is None:
                out.append(self._coarse_item(k))
                k += 1
            else:
                out.append(chosen)
                k = round(chosen.end / tc)
        return out

    # --------------------------------------------------------------------------------------- agents

    def _pack(self, build: Any, refs: Sequence[int], budget: int | None = None,
              boost: set[int] | None = None, prefer: str = "clip") -> list[MemoryItem]:
        items = self._ordered(refs)
        priority = self._relevance(items)
        if boost:
            priority = [p + (10.0 if i.ref in boost else 0.0) for p, i in zip(priority, items, strict=True)]
        return prompts.pack(build, [i.view() for i in items], priority, budget or self.budget, prefer=prefer,
                            focus=self.focus)

    async def _answer(self, refs: Sequence[int], *, final: bool) -> _Answer:
        step = self._step("answer")
        question = self.question
        view = self._pack(lambda v: prompts.answer_prompt(question, v, final=final), refs, prefer="drop")
        step.detail = f"{len(view)} memories shown"
        try:
            reasoned: Reasoned[AnswerReply] = await self.e.reasoner.answer(question, view, final=final)
        except ReasonerError as err:
            step.error, step.llm_calls = str(err), 1
            self.errors.append(str(err))
            return _Answer(None, step)
        self._cost(step, reasoned.usage)
        reply = reasoned.reply
        if final:
            reply = reply.model_copy(update={"confident": False})
        step.detail = (f"{clip_text(reply.answer, 120)!r} confident={reply.confident} "
                       f"({len(view)} memories shown)")
        return _Answer(reply, step)

    async def _initialise(self, top_down: bool) -> AsyncIterator[TraceStep]:
        """Sparse initialisation: the ``init_spans`` most relevant coarse spans and their neighbours."""
        k = self.c.init_spans
        tc, _ = self._spec("coarse")
        frontier = self._cover() if top_down else [self._coarse_item(i) for i in range(len(self.coarse_grid))]
        chosen_coarse: list[int] = []
        global_question = False
        while True:
            refs = [i.ref for i in frontier]
            step = self._step("select", detail=f"{len(refs)} spans offered")
            question = self.question
            view = self._pack(lambda v: prompts.select_prompt(question, v, k), refs)
            if frontier and _summary_depth(frontier[0].level):
                step.level = max((i.level for i in frontier), key=_summary_depth)
            try:
                reasoned = await self.e.reasoner.select(question, view, k)
                self._cost(step, reasoned.usage)
                picked = [self.items[r] for r in reasoned.reply.spans if r in self.items and r in set(refs)]
                global_question = reasoned.reply.global_question
            except ReasonerError as err:
                step.error, step.llm_calls = str(err), 1
                self.errors.append(str(err))
                # Fall back on the lexical order the packer uses, so the loop can still backtrack.
                prio = self._relevance(frontier)
                picked = [frontier[i] for i in sorted(range(len(frontier)), key=lambda i: -prio[i])[:k]]
            if global_question:
                step.detail = "global question: all coarse spans kept"
                yield step
                chosen_coarse = list(range(len(self.coarse_grid)))
                break
            picked = picked[:k]
            step.detail = "chose " + ", ".join(f"{i.level} {i.start:g}-{i.end:g}s" for i in picked)
            yield step
            if all(_summary_depth(i.level) == 0 for i in picked):
                chosen_coarse = [round(i.start / tc) for i in picked]
                break
            expanded: list[_Item] = []
            for item in picked:
                if _summary_depth(item.level) == 0:
                    expanded.append(item)
                elif _summary_depth(item.level) == 1:
                    first = round(item.start / tc)
                    expanded += [self._coarse_item(j) for j in range(first, min(len(self.coarse_grid),
                                                                                  round(item.end / tc)))]
                else:
                    expanded += self._children(item.level, item.start, item.end) or []
            frontier = expanded
        spans: list[int] = []
        for j in chosen_coarse:
            for n in range(j - self.c.neighbours, j + self.c.neighbours + 1):
                if 0 <= n < len(self.coarse_grid) and n not in spans:
                    spans.append(n)
        # Order: the chosen spans first (best first), then their neighbours: ties in localisation keep it.
        order = [j for j in chosen_coarse] + [n for n in spans if n not in chosen_coarse]
        self._candidate_order = {self._coarse_item(j).ref: pos for pos, j in enumerate(order)}
        for j in order:
            self._adopt_span(self.coarse_grid[j][0], self.coarse_grid[j][1])
            self.current.add(self._coarse_item(j).ref)

    def _adopt_span(self, start: float, end: float) -> None:
        """Everything already known inside a span joins the current memory (earlier questions' findings)."""
        for ref, item in self.items.items():
            if item.level in _DEPTH and start - _EPS <= item.start and item.end <= end + _EPS:
                self.current.add(ref)

    def _grid(self, level: str, start: float) -> tuple[float, float]:
        """The span of ``level``'s grid that starts at or before ``start`` (cut at the horizon)."""
        t, _ = self._spec(level)
        k = math.floor(start / t + 1e-9)
        return k * t, min((k + 1) * t, self.horizon)

    def _candidates(self) -> list[_Item]:
        """Spans of the current memory not searched yet, one item each (their plain caption when there is one).

        Spans are those of each level's grid: a caption made when the horizon was earlier (a partial span) stands
        for the whole grid span, so the same stretch is never offered twice."""
        seen: set[tuple[str, int, int]] = set()
        out: list[_Item] = []
        for ref in sorted(self.current):
            item = self.items[ref]
            if item.level not in _DEPTH:
                continue
            start, end = self._grid(item.level, item.start)
            key = _key(item.level, start, end)
            if key in self.searched or key in seen:
                continue
            seen.add(key)
            if item.level == Level.ULTRA_FINE.value and any(
                    self.items[r].node is not None and self.items[r].node.origin == self.origin
                    for r in self.by_key.get(key, [])):
                # This question captioned it moments ago with its instruction, and nothing lies deeper:
                # searching it again would only repeat that caption.
                continue
            if item.level == "coarse":
                span_item = self._coarse_item(round(start / self._spec("coarse")[0]))
            else:
                span_item = self._span_item(item.level, start, end) or item
            out.append(span_item)
        order = getattr(self, "_candidate_order", {})
        out.sort(key=lambda i: (order.get(i.ref, len(order)), -_DEPTH[i.level], i.start))
        return out

    async def _localise(self, candidates: list[_Item]) -> tuple[_Span, str, TraceStep]:
        step = self._step("localise", detail=f"{len(candidates)} candidates")
        question = self.question
        # Candidates are listed as short lines (at most 30% of the budget, the most relevant first)...
        base = prompts.localise_prompt(question, [], []).tokens
        cand_budget = base + int(0.3 * max(0, self.budget - base))
        cand_prio = self._relevance(candidates)
        cand_views = prompts.pack(lambda v: prompts.localise_prompt(question, [], v),
                                  [c.view() for c in candidates], cand_prio, cand_budget)
        cand_refs = {v.ref for v in cand_views}
        # ... and the memory with texts fills the rest, candidates' own captions first.
        view = self._pack(lambda v: prompts.localise_prompt(question, v, cand_views), sorted(self.current),
                          boost=cand_refs, prefer="drop")
        chosen: _Item | None = None
        instruction = ""
        try:
            reasoned = await self.e.reasoner.localise(question, view, cand_views)
            self._cost(step, reasoned.usage)
            chosen = next((c for c in candidates if c.ref == reasoned.reply.span), None)
            instruction = reasoned.reply.instruction.strip()
            if chosen is None:
                raise ReasonerError(f"localisation chose span {reasoned.reply.span}, which is not a candidate")
        except ReasonerError as err:
            step.error = str(err)
            step.llm_calls = max(step.llm_calls, 1)
            self.errors.append(str(err))
            # Fall back on the most relevant candidate so the round still looks somewhere.
            chosen = next(c for c in candidates if c.ref in cand_refs) if cand_refs else candidates[0]
        if not instruction:
            instruction = f"Look for anything that helps answer: {self.text}"
        # A caption of part of a span (made under an earlier horizon) stands for the whole grid span.
        span = _Span(chosen.level, *self._grid(chosen.level, chosen.start))
        step.level, step.start, step.end, step.instruction = span.level, span.start, span.end, instruction
        return span, instruction, step

    # --------------------------------------------------------------------------------------- searching a span

    def _existing(self, level: str, start: float, end: float, *, instruction: str | None) -> _Item | None:
        """A stored caption of exactly this span: with this instruction (``instruction`` given), or any whole
        one at a deeper level (sub-spans are reused whatever they were captioned for)."""
        refs = self.by_key.get(_key(level, start, end), [])
        for ref in reversed(refs):
            item = self.items[ref]
            if item.node is None:
                continue
            if instruction is None or (not item.plain and _norm(item.node.instruction) == _norm(instruction)):
                return item
        return None

    def _parent_id(self, level: str, start: float, end: float) -> int | None:
        """Id of the stored plain node of the span one level up that encloses ``[start, end)``."""
        if level == "coarse":
            return None
        up = _LEVELS[_LEVELS.index(level) - 1]
        t, _ = self._spec(up)
        k = math.floor(start / t + 1e-9)
        item = self._span_item(up, k * t, min((k + 1) * t, self.horizon))
        if item is None and up == "coarse" and 0 <= k < len(self.coarse):
            item = self.coarse[k]
        return item.node.id if item is not None and item.node is not None else None

    async def _search(self, span: _Span, instruction: str) -> AsyncIterator[TraceStep]:
        """Caption ``span`` again with the instruction, and its sub-spans one level deeper (reusing what exists)."""
        self.searched.add(span.key)
        step = self._step("caption", level=span.level, start=span.start, end=span.end, instruction=instruction)
        began = time.perf_counter()
        jobs: list[tuple[str, float, float, int | None]] = []
        reused: list[_Item] = []
        own = self._existing(span.level, span.start, span.end, instruction=instruction)
        if own is not None:
            reused.append(own)
        else:
            jobs.append((span.level, span.start, span.end, self._parent_id(span.level, span.start, span.end)))
        deeper = Level(span.level).deeper
        subs = 0
        if deeper is not None:
            t, _ = self._spec(deeper.value)
            holder = self._span_item(span.level, span.start, span.end)
            if span.level == "coarse":
                holder = self.coarse[round(span.start / self._spec("coarse")[0])]
            parent = holder.node.id if holder is not None and holder.node is not None else None
            s = span.start
            while s < span.end - _EPS:
                e = min(s + t, span.end)
                subs += 1
                sub = self._existing(deeper.value, s, e, instruction=None)
                if sub is not None:
                    reused.append(sub)
                else:
                    jobs.append((deeper.value, s, e, parent))
                s = e
        results = await asyncio.gather(*(self._caption(lv, s, e, instruction, p) for lv, s, e, p in jobs))
        created = 0
        for node, error, _ in results:
            if node is not None:
                self.current.add(self._add_node(node).ref)
                created += 1
            elif error:
                step.error = error if step.error is None else step.error
                if error not in self.errors:  # sub-spans of one expired span say the same
                    self.errors.append(error)
        for item in reused:
            self.current.add(item.ref)
        step.caption_calls = sum(1 for _, _, called in results if called)
        step.created_nodes = created
        step.reused_nodes = len(reused)
        step.latency_seconds = time.perf_counter() - began
        what = f"{span.level} again with the instruction" + (f" + {subs} {deeper.value} sub-spans" if deeper else "")
        step.detail = f"{what}: {created} captioned, {len(reused)} reused"
        yield step

    # --------------------------------------------------------------------------------------- the end

    async def _finish(self, reply: AnswerReply | None, *, confident: bool) -> TraceStep:
        wall = self.info.wall_start
        evidence: list[Evidence] = []
        if reply is not None:
            for span in reply.evidence:
                start, end = max(0.0, min(span.start, self.horizon)), max(0.0, min(span.end, self.horizon))
                if end < start:
                    continue
                evidence.append(Evidence(start, end, wall_clock(wall, start), wall_clock(wall, end)))
        result = QueryResult(
            question_id=self.qid, stream=self.e.stream, question=self.text, options=list(self.options),
            answer=reply.answer if reply is not None else "",
            option_index=reply.option_index if reply is not None and self.options else None,
            confident=bool(confident and reply is not None and reply.confident), evidence=evidence,
            reason=reply.reason if reply is not None else "no agent reply could be used",
            iterations=self.iteration, horizon=self.horizon, wall_seconds=time.perf_counter() - self._started,
            trace=self.steps, errors=self.errors)
        self.result = result
        try:
            await asyncio.to_thread(self.e.memory.set_answer, self.qid, result.to_json())
        except Exception as err:  # noqa: BLE001  (the answer stands even if history cannot be written)
            self.errors.append(f"could not record the answer in the question history: {err}")
        done = TraceStep(index=len(self.steps) + 1, agent="done", iteration=self.iteration,
                         detail=f"{clip_text(result.answer, 120)!r} confident={result.confident}",
                         latency_seconds=result.wall_seconds)
        return done
