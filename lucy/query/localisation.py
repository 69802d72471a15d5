"""Where a question looks: sparse initialisation (the selecting agent picks the most relevant coarse spans) and,
in each round, the one span to search next with what to look for in it (the localisation agent, localisation and
instruction in one call).

Localisation explores. The localiser remembers each span a round opened and whether the answer that followed
rests on something inside it. Where a search found nothing the answer could use, the spans inside it are dead
ends: digging deeper where nothing was found is how a question spends all its rounds in one corner of the
video. The candidates are the spans of the current memory not searched yet, less the dead ends, and the coarse
spans nobody has opened yet; both agents (the lexical one and a model) see the same candidates, each with a note
of what is known of it: not opened yet, holding what the answer so far rests on (where looking closer confirms or
overturns it), or inside a span where an answer found evidence."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence

from lucy.config import Level, summary_depth
from lucy.query import prompts
from lucy.query.memory_view import MEMORY_LEVELS, MemoryView, Span, SpanKey, ViewItem, memory_depth, span_key
from lucy.query.packing import PromptPacker
from lucy.query.reasoners.base import EVIDENCE_NOTE, AnswerReply, EvidenceSpan, Question, Reasoner, ReasonerError
from lucy.query.summaries import SummaryLevels
from lucy.query.trace import TraceRecorder, TraceStep
from lucy.text import split_follow_up, terms

CANDIDATE_SHARE = 0.3  # of the localise prompt's budget (after the question) for the list of candidates
UNOPENED = "not opened yet"
FRUITFUL = "inside a span where the answer found evidence"
RARE_SHARE = 0.25  # a question word held by at most this share of memories names a place (see _names_the_subject)


@dataclasses.dataclass
class _Opened:
    """A span a round searched, and whether the answer after it rests on something inside it (None: no answer
    yet)."""

    span: Span
    found: bool | None = None

    def holds(self, start: float, end: float) -> bool:
        return self.span.start - 1e-6 <= start and end <= self.span.end + 1e-6


class Localiser:
    """Chooses where one question looks, on its view of memory."""

    def __init__(self, *, view: MemoryView, summaries: SummaryLevels, packer: PromptPacker, reasoner: Reasoner,
                 trace: TraceRecorder, question: Question, init_spans: int, neighbours: int, origin: str) -> None:
        self.view = view
        self.summaries = summaries
        self.packer = packer
        self.reasoner = reasoner
        self.trace = trace
        self.question = question
        self.init_spans = init_spans
        self.neighbours = neighbours
        self.origin = origin
        # Candidates' order: the chosen coarse spans first (best first), then their neighbours.
        self._candidate_order: dict[int, int] = {}
        # A period every span of which must be looked at (``initialise(within=...)``): rounds go through it a level
        # at a time, so a "no" or a count rests on all of it at one depth before any of it is looked at deeper.
        self._level_by_level = False
        self._opened: list[_Opened] = []
        self._evidence: list[EvidenceSpan] = []  # where the latest answer found what it rests on

    # --------------------------------------------------------------------------------------- sparse initialisation

    async def initialise(self, top_down: bool, evidence: Sequence[EvidenceSpan] = (), *,
                         within: Sequence[tuple[float, float]] | None = None,
                         earliest_first: bool = False) -> AsyncIterator[TraceStep]:
        """The ``init_spans`` most relevant coarse spans, each widened by its neighbours, become the current
        memory (all of them for a question about the whole video). ``top_down``: the choice starts from the
        coarsest summaries and goes down a level at a time. ``evidence``: where the answer from coarse memory
        found what it rests on; those coarse spans come first, as the place to look closer.

        By the question's kind (:mod:`lucy.query.kinds`): ``within`` is a period (one per stream, across streams)
        every coarse span of which must be looked at (a count, or a "no" that only the whole period can make sure
        of): those spans are the current memory, with no selecting call. ``earliest_first`` ("when did X first
        ...") orders the candidates by time, so ties and fallbacks look at the earliest first."""
        view = self.view
        if within:
            chosen = [k for k, (a, b) in enumerate(view.coarse_grid)
                      if any(b > start and a < end + 1e-6 for start, end in within)]
            if chosen:
                periods = ", ".join(view.label("", start, end).strip() for start, end in within)
                yield self.trace.begin("select", detail=f"every coarse span of {periods}: "
                                                        f"{len(chosen)} spans, by the question's kind")
                self._evidence = list(evidence)
                self._start_current_memory(chosen, earliest_first=earliest_first)
                self._level_by_level = True
                return
        frontier = self.summaries.cover() if top_down else [view.coarse_item(k) for k in range(len(view.coarse_grid))]
        while True:
            step, picked, whole_video = await self._select(frontier)
            yield step
            if whole_video:
                chosen = list(range(len(view.coarse_grid)))
                break
            if all(summary_depth(item.level) == 0 for item in picked):
                chosen = [view.coarse_index(item.start) for item in picked]
                break
            frontier = self._one_level_down(picked)
        self._evidence = list(evidence)
        found = [view.coarse_index(e.start) for e in evidence if e.end > e.start]
        found = [k for k in dict.fromkeys(found) if 0 <= k < len(view.coarse_grid)]
        self._start_current_memory(found + [k for k in chosen if k not in found], earliest_first=earliest_first)

    async def _select(self, frontier: list[ViewItem]) -> tuple[TraceStep, list[ViewItem], bool]:
        """One call of the selecting agent over ``frontier``: (its step, the items picked, whether the question
        is about the whole video). An agent that gives no usable reply is replaced by lexical ranking."""
        k = self.init_spans
        refs = [item.ref for item in frontier]
        step = self.trace.begin("select", detail=f"{len(refs)} spans offered")
        question = self.question
        shown = self.packer.pack(lambda v: prompts.select_prompt(question, v, k), refs)
        if frontier and summary_depth(frontier[0].level):
            step.level = max((item.level for item in frontier), key=summary_depth)
        whole_video = False
        try:
            reasoned = await self.reasoner.select(question, shown, k)
            self.trace.charge(step, reasoned.usage)
            offered = set(refs)
            picked = [self.view.items[r] for r in reasoned.reply.spans if r in self.view.items and r in offered]
            whole_video = reasoned.reply.global_question
        except ReasonerError as err:
            self.trace.agent_failed(step, err)
            # Fall back on the lexical order the packer uses, so the loop can still backtrack.
            priority = self.packer.relevance(frontier)
            picked = [frontier[i] for i in sorted(range(len(frontier)), key=lambda i: -priority[i])[:k]]
        if whole_video:
            step.detail = "global question: all coarse spans kept"
            return step, picked, True
        picked = picked[:k]
        step.detail = "chose " + ", ".join(self.view.label(item.level, item.start, item.end) for item in picked)
        return step, picked, False

    def _one_level_down(self, picked: list[ViewItem]) -> list[ViewItem]:
        """The items one level below the picked summaries (picked coarse spans stay as they are)."""
        view = self.view
        expanded: list[ViewItem] = []
        for item in picked:
            depth = summary_depth(item.level)
            if depth == 0:
                expanded.append(item)
            elif depth == 1:
                first = view.coarse_index(item.start)
                last = min(len(view.coarse_grid), view.coarse_index(item.end))
                expanded += [view.coarse_item(k) for k in range(first, last)]
            else:
                expanded += self.summaries.children(item.level, item.start, item.end) or []
        return expanded

    def _start_current_memory(self, chosen: list[int], *, earliest_first: bool = False) -> None:
        """The chosen coarse spans and their neighbours, with everything already known inside them, become the
        current memory (``earliest_first``: the candidates' order is by time, not by choice)."""
        view = self.view
        spans: list[int] = []
        for k in chosen:
            for n in range(k - self.neighbours, k + self.neighbours + 1):
                # A neighbour on the timeline of another stream (across streams) is no neighbour.
                if 0 <= n < len(view.coarse_grid) and n not in spans and \
                        view.stream_at(view.coarse_grid[n][0]) == view.stream_at(view.coarse_grid[k][0]):
                    spans.append(n)
        # Order: the chosen spans first (best first), then their neighbours: ties in localisation keep it.
        order = list(chosen) + [n for n in spans if n not in chosen]
        if earliest_first:
            order.sort()
        self._candidate_order = {view.coarse_item(k).ref: position for position, k in enumerate(order)}
        for k in order:
            view.add_known_inside(*view.coarse_grid[k])
            view.current.add(view.coarse_item(k).ref)

    # --------------------------------------------------------------------------------------- each round

    def candidates(self) -> list[ViewItem]:
        """The spans a round may search, one item each (their plain caption when there is one), best first by the
        engine's order: spans of the current memory not searched yet and not inside a span searched in vain, then
        coarse spans no round has opened yet, the most relevant first. Over a period every span of which must be
        looked at, only the shallowest spans not searched yet are offered (level by level).

        Spans are those of each level's grid: a caption made when the horizon was earlier (a partial span) stands
        for the whole grid span, so the same stretch is never offered twice."""
        view = self.view
        seen: set[SpanKey] = set()
        out: list[ViewItem] = []
        for ref in sorted(view.current):
            item = view.items[ref]
            if item.level not in MEMORY_LEVELS:
                continue
            start, end = view.grid_span(item.level, item.start)
            key = span_key(item.level, start, end)
            if key in view.searched or key in seen or self._dead_end(start, end):
                continue
            seen.add(key)
            if item.level == Level.ULTRA_FINE.value and self._made_by_this_question(key):
                # This question captioned it moments ago with its instruction, and nothing lies deeper:
                # searching it again would only repeat that caption.
                continue
            if item.level == Level.COARSE.value:
                out.append(view.coarse_item(view.coarse_index(start)))
            else:
                out.append(view.item_for_span(item.level, start, end) or item)
        order = self._candidate_order
        out.sort(key=lambda i: (order.get(i.ref, len(order)), -memory_depth(i.level), i.start))
        if self._level_by_level and out:
            shallowest = min(memory_depth(i.level) for i in out)
            out = [i for i in out if memory_depth(i.level) == shallowest]
        return out + self._unopened(seen)

    def _unopened(self, offered: set[SpanKey]) -> list[ViewItem]:
        """Coarse spans outside the current memory that no round has searched, the most relevant first (and, among
        equals, the farthest from where rounds have looked)."""
        view = self.view
        skip = view.searched | offered
        items = [item for k, (start, end) in enumerate(view.coarse_grid)
                 if span_key(Level.COARSE.value, start, end) not in skip
                 and (item := view.coarse_item(k)).ref not in view.current]
        if not items:
            return []
        relevance = self.packer.relevance(items)
        looked = [o.span for o in self._opened]

        def distance(item: ViewItem) -> float:
            return min((abs(item.start - span.start) for span in looked), default=0.0)

        ranked = sorted(range(len(items)), key=lambda i: (-round(relevance[i], 6), -distance(items[i]),
                                                          items[i].start))
        return [items[i] for i in ranked]

    def note(self, item: ViewItem) -> str:
        """What the localiser knows of a candidate span beyond its text."""
        if item.level == Level.COARSE.value and not any(o.holds(item.start, item.end) for o in self._opened) \
                and item.ref not in self.view.current:
            return UNOPENED
        if any(e.start < item.end and item.start < e.end for e in self._evidence):
            return EVIDENCE_NOTE
        if any(o.found and o.holds(item.start, item.end) for o in self._opened):
            return FRUITFUL
        return ""

    def _dead_end(self, start: float, end: float) -> bool:
        """Whether ``[start, end)`` lies inside a span a round searched without the answer finding anything there."""
        return any(o.found is False and o.holds(start, end) and (o.span.end - o.span.start) > (end - start) + 1e-6
                   for o in self._opened)

    def opened(self, span: Span) -> None:
        """A round is searching ``span``."""
        self._opened.append(_Opened(span))

    def found_last(self) -> bool:
        """Whether the span the last round searched held something the answer could use."""
        return bool(self._opened) and self._opened[-1].found is True

    def answered(self, reply: AnswerReply | None) -> None:
        """The answer after the last search: the span searched was worth it if the answer rests on something
        inside it, or if its memories name something the question asks about that few memories name (a model may
        answer "unknown" without evidence while a caption shows the van whose plate it could not read yet)."""
        if reply is not None:
            self._evidence = list(reply.evidence)
        if not self._opened or self._opened[-1].found is not None:
            return
        span = self._opened[-1].span
        cited = reply is not None and any(e.start < span.end and span.start < e.end for e in reply.evidence)
        self._opened[-1].found = cited or self._names_the_subject(span)

    def _names_the_subject(self, span: Span) -> bool:
        """Whether a memory inside ``span`` holds a word of the question that at most :data:`RARE_SHARE` of the
        view's memories hold (words every caption has, like "squares" or "colour", tell no place from another)."""
        wanted = set(terms(self.question.text))
        texts = [(item, set(terms(item.shown_text))) for item in self.view.items.values()
                 if item.level in MEMORY_LEVELS and item.node is not None]
        if not wanted or not texts:
            return False
        rare = {t for t in wanted if sum(1 for _, words in texts if t in words) <= RARE_SHARE * len(texts)}
        return any(words & rare for item, words in texts
                   if span.start - 1e-6 <= item.start and item.end <= span.end + 1e-6)

    def _made_by_this_question(self, key: SpanKey) -> bool:
        return any(item.node is not None and item.node.origin == self.origin for item in self.view.items_of_span(key))

    async def localise(self, candidates: list[ViewItem]) -> tuple[Span, str, TraceStep]:
        """The span to search next (a whole grid span) and the instruction to caption it with."""
        step = self.trace.begin("localise", detail=f"{len(candidates)} candidates")
        question = self.question
        # Candidates are listed as short lines (at most 30% of the budget, the most relevant first)...
        base = prompts.localise_prompt(question, [], []).tokens
        candidate_budget = base + int(CANDIDATE_SHARE * max(0, self.packer.budget - base))
        offered = [dataclasses.replace(c.as_memory_item(), note=self.note(c)) for c in candidates]
        shown_candidates = prompts.pack(lambda v: prompts.localise_prompt(question, [], v), offered,
                                        self.packer.relevance(candidates), candidate_budget)
        shown_refs = {c.ref for c in shown_candidates}
        # ... and the memory with texts fills the rest, candidates' own captions first.
        memory = self.packer.pack(lambda v: prompts.localise_prompt(question, v, shown_candidates),
                                  sorted(self.view.current), boost=shown_refs, prefer="drop")
        chosen: ViewItem | None = None
        instruction = ""
        try:
            reasoned = await self.reasoner.localise(question, memory, shown_candidates)
            self.trace.charge(step, reasoned.usage)
            chosen = next((c for c in candidates if c.ref == reasoned.reply.span), None)
            instruction = reasoned.reply.instruction.strip()
            if chosen is None:
                raise ReasonerError(f"localisation chose span {reasoned.reply.span}, which is not a candidate")
        except ReasonerError as err:
            self.trace.agent_failed(step, err)
            # Fall back on the most relevant candidate so the round still looks somewhere.
            chosen = next(c for c in candidates if c.ref in shown_refs) if shown_refs else candidates[0]
        if not instruction:  # the user's own question only: a follow-up's earlier answers quote the video
            instruction = f"Look for anything that helps answer: {split_follow_up(question.text)[0]}"
        span = Span(chosen.level, *self.view.grid_span(chosen.level, chosen.start))
        step.level, step.start, step.end, step.instruction = span.level, span.start, span.end, instruction
        return span, instruction, step
