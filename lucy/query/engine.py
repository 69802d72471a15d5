"""The backtracking loop (VideoLucy, Algorithm 1) over what a stream has ingested, with memory that persists.

For a question that arrives when the stream's frame store holds media up to ``horizon``:

*. The question's kind (:mod:`lucy.query.kinds`: count, presence, time, order, text, speech, ...) picks an
   operator (:mod:`lucy.query.operators`) over the stored tracks and counts and over the text sightings and
   transcript lines of the memory already stored (coarse memory first of all); a confident answer ends the question
   there, before any caption or agent call (VideoLucy's first step). Anything else goes on as below, unchanged.
0. Coarse memory up to the horizon is gathered, on the coarse builder's grid (a finished stream's last span
   reaches its media end); coarse spans the builder has not captioned yet at the end (the *tail*, up to
   ``query.tail_max_spans``) are captioned now from the frame store. When even a short view
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
   the current memory; the answering agent answers again; a confident answer ends the question, and so does an
   answer that :data:`STEADY_ROUNDS` rounds of looking closer where its evidence lies left unchanged.
4. Otherwise a final answer is forced and marked not confident. When the last reply chose an option from the
   memories a final call would be shown, that choice stands without another call.
5. An open question's answer that is a memory line becomes the sentence of the question's kind ("Gate 12 (the text
   ... was seen ...)"), with the line kept in the reason.

A question across streams (several frame stores) is the same loop over one candidate pool: each stream's memory
lies in a lane of the question's timeline (:mod:`lucy.query.lanes`), coarse memory of all of them is ranked and
selected together, a round searches the best span whichever stream it is on, and the operators answer per stream,
combined by kind (:mod:`lucy.query.operators.across`). Every trace step with a span, every evidence span and the
answer name the stream.

Every node a question makes is stored with origin ``question:<id>`` and parent links. A later question starts
from all nodes inside its horizon and reuses deeper nodes instead of captioning a span again, so the same
question asked twice needs no new captions. No prompt exceeds the context budget: memory is packed into it
(texts clipped, the least relevant memories dropped). The loop yields a :class:`TraceStep` per step.

The loop itself (:class:`_QuestionLoop`, :meth:`~_QuestionLoop.execute`) reads as the steps above; each job is a
part of its own: the question's view of memory (:mod:`lucy.query.memory_view`), the similarity of memories to the
question (:mod:`lucy.query.semantic`), ranking memories by words and meaning and packing them into prompts
(:mod:`lucy.query.packing`), captions made on demand (:mod:`lucy.query.captioning`), the tail
(:mod:`lucy.query.tail`), summary levels (:mod:`lucy.query.summaries`), sparse initialisation and localisation
(:mod:`lucy.query.localisation`), searching a span (:mod:`lucy.query.search`), the answering agent
(:mod:`lucy.query.answering`) and the result (:mod:`lucy.query.result`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lucy.config import ALL_STREAMS, LucySettings, Preset
from lucy.errors import LucyError
from lucy.ingest.frames import FrameStore, StreamInfo
from lucy.memory.captioners.base import Captioner
from lucy.memory.nodes import MemoryNode, question_origin
from lucy.memory.store import MemoryStore
from lucy.query import prompts
from lucy.query.answering import Answerer, Attempt
from lucy.query.briefing import question_brief
from lucy.query.captioning import SpanCaptioner
from lucy.query.kinds import Kind, asks_first, parse
from lucy.query.lanes import Lanes
from lucy.query.localisation import Localiser
from lucy.query.memory_view import MemoryView
from lucy.query.operators import OperatorAnswer, answer_question, restate
from lucy.query.operators.across import StreamAnswer, combine, per_stream
from lucy.query.packing import PromptPacker
from lucy.query.reasoners.base import AnswerReply, EvidenceSpan, Question, Reasoner
from lucy.query.result import done_step, make_result
from lucy.query.search import SpanSearcher
from lucy.query.semantic import QuestionSimilarity
from lucy.query.summaries import SummaryLevels
from lucy.query.tail import caption_tail
from lucy.query.trace import QueryResult, TraceRecorder, TraceStep
from lucy.text import clip_words, hms

if TYPE_CHECKING:
    from lucy.memory.retrieval import MemoryIndex

MIN_BUDGET_TOKENS = 256  # the least a prompt gets, however small the configured budget
# Rounds end early when looking closer where the evidence is leaves the answer as it was this many times in a row:
# finer captions of the same moment say no more (a detail the captioner cannot make out), and each further round
# would cost two LLM calls for nothing. Rounds that explore elsewhere never count.
STEADY_ROUNDS = 2


def same_answer(a: AnswerReply, b: AnswerReply) -> bool:
    """Whether two replies give the same answer (the same option; for an open question, the same words)."""
    if a.option_index is not None or b.option_index is not None:
        return a.option_index == b.option_index
    return " ".join(a.answer.lower().split()) == " ".join(b.answer.lower().split())


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
    """Answers questions about one stream, or across several (``frames``: a sequence of their frame stores). Knows
    only the four boundaries (frame store, memory store, captioner, reasoner); backends are chosen by the caller.
    Several questions may run at once."""

    def __init__(self, *, frames: FrameStore | Sequence[FrameStore], memory: MemoryStore, reasoner: Reasoner,
                 captioner: Captioner | None, preset: Preset, config: QueryConfig | None = None,
                 coarse_instruction: str = "", index: MemoryIndex | None = None,
                 detector_labels: frozenset[str] | None = None) -> None:
        self.streams: tuple[FrameStore, ...] = (frames,) if isinstance(frames, FrameStore) else tuple(frames)
        if not self.streams:
            raise LucyError("a question needs at least one stream")
        self.frames = self.streams[0]
        self.memory = memory
        self.reasoner = reasoner
        self.captioner = captioner
        self.preset = preset
        self.config = config or QueryConfig()
        self.coarse_instruction = coarse_instruction
        self.index = index  # similarity of memories to a question (None: ranking by words alone)
        # What the stream's detector can name (None: not known, any COCO label): a count or presence question about
        # anything else is never answered from observations, where "none seen" would mean nothing.
        self.detector_labels = detector_labels
        # The stream questions are recorded under: its name, or ALL_STREAMS for a question across several.
        self.stream = self.frames.name if len(self.streams) == 1 else ALL_STREAMS
        self._semaphore: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def _caption_slots(self) -> asyncio.Semaphore:
        """Bounds captions in flight across all questions of this engine (one per event loop)."""
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore[0] is not loop:
            self._semaphore = (loop, asyncio.Semaphore(self.config.max_in_flight))
        return self._semaphore[1]

    def run(self, question: str, options: Sequence[str] = (), *, on_begin: Callable[[TraceStep], None] | None = None,
            on_progress: Callable[[TraceStep, str], None] | None = None) -> QueryRun:
        """Start answering; iterate the result for the trace, then read ``.result``. ``on_begin`` is told of each
        step as it begins (the iteration yields it once done) and ``on_progress`` of headway inside one (each
        caption of a round), for progress shown while a long step runs."""
        return QueryRun(_QuestionLoop(self, question, tuple(options), TraceRecorder(on_begin, on_progress)))

    async def ask(self, question: str, options: Sequence[str] = ()) -> QueryResult:
        """Answer and return the result (its ``trace`` holds every step)."""
        run = self.run(question, options)
        async for _ in run:
            pass
        assert run.result is not None
        return run.result


class QueryRun:
    """An answer in progress: an async iterator of :class:`TraceStep`; ``result`` is set when it ends."""

    def __init__(self, question: _QuestionLoop) -> None:
        self._question = question
        self.result: QueryResult | None = None

    def __aiter__(self) -> AsyncIterator[TraceStep]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TraceStep]:
        async for step in self._question.execute():
            yield step
        self.result = self._question.result


class _QuestionLoop:
    """One question, answered by Algorithm 1 of VideoLucy (:meth:`execute`). The parts that do each job are made
    once the question's horizon is fixed (:meth:`_open`)."""

    info: StreamInfo  # the (first) frame store when the question arrived
    lanes: Lanes  # the streams it is about, on one timeline (one lane: one stream)
    horizon: float  # view time the question is about: [0, horizon) (one stream's media time, for one stream)
    question_id: int
    view: MemoryView
    span_captioner: SpanCaptioner
    summaries: SummaryLevels
    localiser: Localiser
    searcher: SpanSearcher
    answerer: Answerer
    similarity: QuestionSimilarity

    def __init__(self, engine: QueryEngine, text: str, options: tuple[str, ...],
                 trace: TraceRecorder | None = None) -> None:
        self.engine = engine
        self.config = engine.config
        self.text = text.strip()
        self.options = options
        if not self.text:
            raise LucyError("the question is empty")
        self.trace = trace or TraceRecorder()
        # Steps are named (their stream and media time, across streams) before whoever waits on them is told.
        self._told, self.trace.on_begin = self.trace.on_begin, self._begun
        self.result: QueryResult | None = None
        self.parsed = parse(self.text)  # its kind, subject and period (lucy.query.kinds)
        self.nodes: list[MemoryNode] = []  # memory inside the horizon when the question arrived (set by _open)
        self.operator: OperatorAnswer | None = None  # the operator's answer of the fast path, if any
        self._started = time.perf_counter()
        # The budget leaves room for one retry of a reply that did not validate.
        self.budget = max(MIN_BUDGET_TOKENS, self.config.context_budget_tokens - prompts.RETRY_RESERVE_TOKENS)

    async def execute(self) -> AsyncIterator[TraceStep]:
        """Answer the question, yielding each step as it happens; ``result`` is set at the end."""
        try:
            async for step in self._steps():
                self._name(step)
                yield step
        finally:
            # The trace (which the result keeps) no longer calls back into the loop: without that cycle a
            # question's memory view is freed when it ends, not at the collector's next full pass (a server held
            # dozens of finished questions' views, and grew with them).
            self.trace.on_begin = self._told

    def _begun(self, step: TraceStep) -> None:
        self._name(step)
        if self._told is not None:
            self._told(step)

    def _name(self, step: TraceStep) -> None:
        """Across streams: a step's span from view time into its stream's media time, naming the stream (once)."""
        lanes = getattr(self, "lanes", None)
        if lanes is None or lanes.single or step.stream is not None or step.start is None or step.end is None:
            return
        lane, step.start, step.end = lanes.local(step.start, step.end)
        step.stream = lane.stream

    async def _steps(self) -> AsyncIterator[TraceStep]:
        await self._open()
        # 0. a count, presence or summary question that what the detector observed answers: no captions, no agents
        async for step in self._observed_first():
            yield step
        if self.result is not None:
            return
        async for step in caption_tail(self.view, self.span_captioner, self.trace, max_spans=self.config.tail_max_spans,
                                       instruction=self.engine.coarse_instruction):
            yield step
        top_down = self.summaries.needed()
        if top_down:
            async for step in self.summaries.build():
                yield step

        # 1. answer from coarse memory (and what earlier questions found inside the horizon). Meaning counts only
        # where memories are ranked: here when not all of them fit the prompt whole, and from step 2 on. A question
        # answered from memories that all fit needs no embedder (`lucy ask` then loads no model).
        shown = self.view.below_summaries()
        if not self.answerer.fits_whole(shown):
            await self.similarity.update()
        answer = await self.answerer.answer(shown, final=False)
        yield answer.step
        if answer.confident:
            yield await self._finish(answer.reply, confident=True)
            return

        # 2. sparse initialisation (by the question's kind: every span of the period for a count or a "no")
        await self.similarity.update()  # where to look closer is chosen by words and meaning
        async for step in self.localiser.initialise(top_down, answer.reply.evidence if answer.reply else (),
                                                    within=self._every_span(), earliest_first=asks_first(self.parsed)):
            yield step

        # 3. backtracking rounds
        last: AnswerReply | None = answer.reply
        steady = 0  # rounds in a row that looked closer where the evidence is, and left the answer as it was
        for round_ in range(1, self.config.max_iterations + 1):
            candidates = self.localiser.candidates()
            if not candidates:
                break
            self.trace.iteration = round_
            span, instruction, step = await self.localiser.localise(candidates)
            yield step
            self.localiser.opened(span)
            yield await self.searcher.search(span, instruction)
            await self.similarity.update()
            if self.span_captioner.down is not None:
                break  # deeper memory cannot be made now: rounds would find nothing new
            shown = sorted(self.view.current)
            answer = await self.answerer.answer(shown, final=False)
            self.localiser.answered(answer.reply)
            yield answer.step
            if not answer.confident and (read := await self._from_observations(self._nodes_now(), again=True)):
                # What the round captioned may settle the question for the kind's operator, by its evidence.
                yield read.step
                if read.confident:
                    yield await self._finish(read.reply, confident=True)
                    return
            if answer.reply is not None:
                unchanged = last is not None and same_answer(last, answer.reply) and self.localiser.found_last()
                steady = steady + 1 if unchanged else 0
                last = answer.reply
                if answer.confident:
                    yield await self._finish(answer.reply, confident=True)
                    return
                if steady >= STEADY_ROUNDS:
                    answer.step.detail += f"; unchanged after looking closer {steady} times: no more rounds"
                    break

        # 4. forced final answer, never confident
        async for step in self._final(last, shown):
            yield step

    async def _observed_first(self) -> AsyncIterator[TraceStep]:
        """Step 0: the kind's operator reads what the detector observed; a confident reading (or one that a
        reasoner which cannot interpret could only repeat) finishes the question."""
        observed = await self._from_observations()
        if observed is not None:
            yield observed.step
            if observed.confident:
                yield await self._finish(observed.reply, confident=True)
                return
            if self.parsed.kind is Kind.BEYOND and not self.engine.reasoner.interprets:
                # A reasoner that quotes and scores cannot say why, however closely the loop looks: the operator's
                # honest account of what memory holds is the answer, not confident.
                observed.step.detail += "; the reasoner cannot interpret beyond it: no backtracking"
                yield await self._finish(observed.reply, confident=False)
                return

    async def _final(self, last: AnswerReply | None, shown: list[int]) -> AsyncIterator[TraceStep]:
        """Step 4, the forced final answer, never confident: a choice made from the very memories it would be
        shown stands; an open question the operator answers takes the operator's sentence over a quoted line."""
        if last is not None and last.option_index is not None and sorted(shown) == sorted(self.view.current):
            step = self.trace.begin("final")
            step.detail = (f"{clip_words(last.answer, 120)!r} confident=False: the last answer stands (memory has "
                           "not changed since it was chosen)")
            yield step
            yield await self._finish(last, confident=False)
            return
        final = await self.answerer.answer(sorted(self.view.current), final=True)
        final.step.agent = "final"
        yield final.step
        reply = final.reply or last
        operator = self.operator
        if operator is not None and not self.options and not self.engine.reasoner.reads_observations and (
                reply is None or (restate(self.parsed, reply.answer) is None and not operator.partial)):
            # An open question: the operator's sentence rests on what was observed and read; a reasoner that never
            # saw the observations can only quote a memory line. The quote stands where the kind's operator can read
            # an answer in it (restate, in _finish), or where the operator's own evidence lacks some of what the
            # question names (the quote, chosen over memory made closer, may hold it).
            final.step.detail += f"; the {self.parsed.kind.value} operator's answer stands instead"
            reply = self._reply(operator)
        yield await self._finish(reply, confident=False)

    def _every_span(self) -> list[tuple[float, float]] | None:
        """The period whose every coarse span the loop must look at: a count of an object class the detector
        observed (one missed span misses some), or a "no" the operator gave without being sure of it (only all of
        the period can make sure). Without an operator's answer the selecting agent chooses as before."""
        parsed, operator = self.parsed, self.operator
        if operator is None:
            return None
        if parsed.kind is Kind.COUNT or (parsed.kind is Kind.PRESENCE and operator.value is False):
            # The period of each stream (in view time): "in the last minute" is each stream's last minute.
            return [(lane.offset + a, lane.offset + b) for lane in self.lanes.lanes
                    for a, b in [parsed.period.bounds(lane.horizon)]]
        return None

    def _nodes_now(self) -> list[MemoryNode]:
        """The memory the question sees now: what was stored when it arrived and what its rounds captioned since."""
        known = {id(n) for n in self.nodes}
        made = [item.node or MemoryNode(self.engine.stream, item.level, item.start, item.end, item.text)
                for item in self.view.items.values() if item.node is None or id(item.node) not in known]
        return [*self.nodes, *made]

    @staticmethod
    def _reply(found: OperatorAnswer) -> AnswerReply:
        return AnswerReply(answer=found.answer, option_index=found.option_index, confident=found.confident,
                           evidence=[EvidenceSpan(start=a, end=max(a, b)) for a, b in found.evidence],
                           reason=f"{found.reason} (confidence {found.confidence:.2f})")

    async def _from_observations(self, nodes: Sequence[MemoryNode] | None = None, *,
                                 again: bool = False) -> Attempt | None:
        """The answer of the operator for the question's kind (:mod:`lucy.query.operators`), or None when the
        question is of another kind or about something the detector did not observe (then no step is recorded).
        ``nodes``: the memory it reads (default: as it was when the question arrived); ``again``: a look after a
        round, recorded only when it answers (an unchanged answer is no news)."""
        parsed = self.parsed
        engine = self.engine
        started = time.perf_counter()
        # Coarse memory (and what earlier questions left inside the horizon) as it was when the question arrived,
        # or with what the rounds captioned since: its text sightings and transcript lines are what the text,
        # speech and time operators read.
        if self.lanes.single:
            found = await asyncio.to_thread(answer_question, parsed, engine.memory, engine.stream,
                                            horizon=self.horizon, nodes=self.nodes if nodes is None else nodes,
                                            grid=self.view.coarse_grid,
                                            options=self.options, detector_labels=engine.detector_labels)
        else:
            found = await asyncio.to_thread(self._across_streams, self.nodes if nodes is None else nodes)
        if found is None:
            return None
        previous, self.operator = self.operator, found
        if again and (not found.confident or (previous is not None and previous.answer == found.answer and
                                              previous.confident)):
            return None
        step = self.trace.begin("observe")
        step.latency_seconds = time.perf_counter() - started
        where = "what the rounds captioned" if again else "observations and coarse memory"
        step.detail = (f"a {parsed.kind.value} question answered from {where}"
                       f"{'' if again else ', no captions'}: {clip_words(found.answer, 120)!r} "
                       f"confidence={found.confidence:.2f} ({clip_words(found.reason, 160)})" if found.confident else
                       f"a {parsed.kind.value} question that observations and coarse memory do not settle "
                       f"(confidence {found.confidence:.2f}): {clip_words(found.answer, 80)!r}")
        return Attempt(self._reply(found), step)

    def _across_streams(self, nodes: Sequence[MemoryNode]) -> OperatorAnswer | None:
        """Across streams: each stream's operator answers from its own observations and ``nodes`` (view time), in its
        media time; the answers are combined by the question's kind. Blocking."""
        engine, lanes = self.engine, self.lanes
        asked = per_stream(self.parsed)  # "which camera saw X first": when each saw X
        by_stream: dict[str, list[MemoryNode]] = {lane.stream: [] for lane in lanes.lanes}
        for node in nodes:
            stored = lanes.to_store(node)
            by_stream.setdefault(stored.stream, []).append(stored)
        answers = [StreamAnswer(lane.stream, answer_question(asked, engine.memory, lane.stream, horizon=lane.horizon,
                                                             nodes=by_stream[lane.stream], grid=list(lane.grid),
                                                             detector_labels=engine.detector_labels),
                                lane.offset, lane.info.wall_start) for lane in lanes.lanes]
        return combine(self.parsed, answers, self.options)

    async def _open(self) -> None:
        """Fix the horizon (media stored when the question arrives), record the question, load its view of memory
        and make the parts that work on it. Across streams, each stream's memory is laid in its lane."""
        engine, config = self.engine, self.config
        infos = await asyncio.gather(*(asyncio.to_thread(frames.info) for frames in engine.streams))
        try:
            lanes = Lanes.lay(list(zip(engine.streams, infos, strict=True)), engine.preset,
                              fanout=config.summary_fanout)
        except ValueError:
            names = ", ".join(frames.name for frames in engine.streams)
            raise LucyError(f"stream {engine.stream!r} has no frames or sound yet; ask again once ingest has stored "
                            "some" if len(engine.streams) == 1 else
                            f"none of the streams ({names}) has frames or sound yet; ask again once ingest has "
                            "stored some") from None
        horizon = lanes.horizon
        self.info, self.lanes, self.horizon = lanes.lanes[0].info, lanes, horizon
        seen = horizon if lanes.single else lanes.longest  # media seconds, what a prompt says was seen
        streams = () if lanes.single else tuple((lane.stream, lane.horizon) for lane in lanes.lanes)
        question = Question(self.text, self.options, seen, streams=streams)
        self.question_id = await asyncio.to_thread(engine.memory.add_question, engine.stream, self.text,
                                                   list(self.options), seen)
        origin = question_origin(self.question_id)
        nodes: list[MemoryNode] = []
        for lane in lanes.lanes:
            stored = await asyncio.to_thread(engine.memory.nodes, lane.stream, start=0.0, end=lane.horizon)
            # What lies past the stream's horizon is not seen (the view's rule, per stream).
            nodes += [lanes.to_view(node, lane) for node in stored if node.end <= lane.horizon + 1e-3]
        self.nodes = nodes
        if engine.reasoner.reads_observations and lanes.single:  # its answer prompt shows the kind and observations
            brief = await asyncio.to_thread(question_brief, self.text, engine.memory, engine.stream, horizon=horizon,
                                            nodes=nodes, budget_tokens=self.budget)
            question = Question(self.text, self.options, horizon, brief)
        self.view = view = MemoryView.of_nodes(nodes, preset=engine.preset, horizon=horizon, grid=lanes.grid(),
                                               coarse_instruction=engine.coarse_instruction, lanes=lanes)
        self.similarity = QuestionSimilarity(engine.index, view, question)
        packer = PromptPacker(view, question, self.budget)
        self.span_captioner = SpanCaptioner(view=view, frames=engine.frames, captioner=engine.captioner,
                                            memory=engine.memory, slots=engine._caption_slots(),
                                            expired_before=self.info.expired_before, origin=origin, lanes=lanes)
        self.summaries = SummaryLevels(view=view, reasoner=engine.reasoner, memory=engine.memory, stream=engine.stream,
                                       trace=self.trace, question=question, budget=self.budget,
                                       fanout=config.summary_fanout, max_chars=config.summary_max_chars,
                                       init_spans=config.init_spans, origin=origin)
        self.localiser = Localiser(view=view, summaries=self.summaries, packer=packer, reasoner=engine.reasoner,
                                   trace=self.trace, question=question, init_spans=config.init_spans,
                                   neighbours=config.neighbours, origin=origin)
        self.searcher = SpanSearcher(view=view, captioner=self.span_captioner, trace=self.trace)
        self.answerer = Answerer(packer=packer, reasoner=engine.reasoner, trace=self.trace, question=question)

    async def _finish(self, reply: AnswerReply | None, *, confident: bool) -> TraceStep:
        """Set the result, record it in the question history, and return the closing step. An open question's
        answer that is a memory line (the embedded reasoner quotes the line it chose) becomes the answer sentence of
        the question's kind (:func:`lucy.query.operators.restate`), the line kept in the reason as evidence."""
        if reply is not None and reply.option_index is None and not self.options:
            sentence = restate(self.parsed, reply.answer)
            if sentence is not None and sentence != reply.answer:
                reply = reply.model_copy(update={
                    "answer": sentence, "reason": f"{reply.reason}; read from the memory line "
                                                  f"{clip_words(reply.answer, 200)!r}"})
        lanes = self.lanes
        result = make_result(reply, confident=confident, question_id=self.question_id, stream=self.engine.stream,
                             question=self.text, options=self.options,
                             horizon=self.horizon if lanes.single else lanes.longest,
                             wall_start=self.info.wall_start, wall_seconds=time.perf_counter() - self._started,
                             trace=self.trace, lanes=lanes)
        if not lanes.single and result.answer and not any(name in result.answer for name in lanes.streams):
            # The answer says which camera: where its evidence lies ("on front at 1:20-1:40").
            where = [f"on {e.stream} at {hms(e.start)}–{hms(e.end)}" for e in result.evidence[:3]]
            if where:
                result.answer = f"{result.answer.rstrip()} ({'; '.join(where)})"
        self.result = result
        try:
            await asyncio.to_thread(self.engine.memory.set_answer, self.question_id, result.to_json())
        except Exception as err:  # noqa: BLE001  (the answer stands even if history cannot be written)
            self.trace.error(f"could not record the answer in the question history: {err}")
        return done_step(result, self.trace)
