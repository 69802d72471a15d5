"""Searching a span (step 3 of Algorithm 1): the span is captioned again at its own depth with the round's
instruction, and its sub-spans at the next depth (coarse -> fine -> ultra_fine), each at its level's fps. What
memory already holds is reused instead: the span's caption made with the same instruction, and sub-spans captioned
for any question. Everything found joins the current memory."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from lucy.config import Level
from lucy.query.captioning import CaptionOutcome, SpanCaptioner
from lucy.query.memory_view import TIME_TOLERANCE, MemoryView, Span, ViewItem
from lucy.query.trace import TraceRecorder, TraceStep


@dataclass(frozen=True, slots=True)
class _CaptionJob:
    level: str
    start: float
    end: float
    parent: int | None  # id of the stored node the caption hangs under


@dataclass
class _SearchPlan:
    jobs: list[_CaptionJob]  # what must be captioned
    reused: list[ViewItem]  # what memory already holds
    sub_spans: int  # how many sub-spans the span has at the next depth


class SpanSearcher:
    """Searches spans of one question's view."""

    def __init__(self, *, view: MemoryView, captioner: SpanCaptioner, trace: TraceRecorder) -> None:
        self.view = view
        self.captioner = captioner
        self.trace = trace

    async def search(self, span: Span, instruction: str) -> TraceStep:
        """Search ``span`` with ``instruction``; the step says what was captioned and what reused."""
        self.view.searched.add(span.key)
        step = self.trace.begin("caption", level=span.level, start=span.start, end=span.end, instruction=instruction)
        began = time.perf_counter()
        plan = self._plan(span, instruction)
        made = 0

        async def caption(job: _CaptionJob) -> CaptionOutcome:
            nonlocal made
            outcome = await self.captioner.caption(job.level, job.start, job.end, instruction, job.parent)
            made += 1
            if len(plan.jobs) > 1:  # a round captions several spans: say each, so a long round shows headway
                self.trace.progress(step, f"{job.level} {self.view.clock(job.start, job.end)} "
                                          f"{'captioned' if outcome.node is not None else 'not captioned'} "
                                          f"({made} of {len(plan.jobs)})")
            return outcome

        outcomes = await asyncio.gather(*(caption(job) for job in plan.jobs))
        created = 0
        for outcome in outcomes:
            if outcome.node is not None:
                self.view.current.add(self.view.add_node(outcome.node).ref)
                created += 1
            elif outcome.error:
                step.error = outcome.error if step.error is None else step.error
                if outcome.error not in self.trace.errors:  # sub-spans of one expired span say the same
                    self.trace.error(outcome.error)
        for item in plan.reused:
            self.view.current.add(item.ref)
        step.caption_calls = sum(1 for outcome in outcomes if outcome.called)
        step.created_nodes = created
        step.reused_nodes = len(plan.reused)
        step.latency_seconds = time.perf_counter() - began
        deeper = Level(span.level).deeper
        what = f"{span.level} again with the instruction"
        if deeper is not None:
            what += f" + {plan.sub_spans} {deeper.value} sub-spans"
        step.detail = f"{what}: {created} captioned, {len(plan.reused)} reused"
        return step

    def _plan(self, span: Span, instruction: str) -> _SearchPlan:
        """What of the span and its sub-spans must be captioned, and what memory already holds."""
        view = self.view
        plan = _SearchPlan([], [], 0)
        own = view.stored_caption(span.level, span.start, span.end, instruction=instruction)
        if own is not None:
            plan.reused.append(own)
        else:
            plan.jobs.append(_CaptionJob(span.level, span.start, span.end,
                                         view.parent_id(span.level, span.start, span.end)))
        deeper = Level(span.level).deeper
        if deeper is None:
            return plan
        # Sub-spans hang under the span's plain caption (for a coarse span: the one that stands for it).
        if span.level == Level.COARSE.value:
            holder = view.coarse_items[view.coarse_index(span.start)]
        else:
            holder = view.item_for_span(span.level, span.start, span.end)
        parent = holder.node.id if holder is not None and holder.node is not None else None
        step_seconds = view.span_seconds(deeper.value)
        start = span.start
        while start < span.end - TIME_TOLERANCE:
            end = min(start + step_seconds, span.end)
            plan.sub_spans += 1
            sub = view.stored_caption(deeper.value, start, end, instruction=None)
            if sub is not None:
                plan.reused.append(sub)
            else:
                plan.jobs.append(_CaptionJob(deeper.value, start, end, parent))
            start = end
        return plan
