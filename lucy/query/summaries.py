"""Top-down memory for long streams: summary levels above coarse.

When even a short view of every coarse span would not fit the context budget, sparse initialisation cannot
show them all to the selecting agent. Summary nodes then group ``query.summary_fanout`` spans of the level below
(``summary1`` over coarse spans, ``summary2`` over ``summary1`` nodes, ...); they are made for the complete groups
that lack one and stored, so later questions (and the same stream as it grows) reuse them. Selection then goes
down from the coarsest summaries that cover the horizon.

Across streams, the lanes of :mod:`lucy.query.lanes` are laid so that no group holds spans of two streams: each
summary is of one stream, stored for it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

from lucy.config import summary_depth, summary_level
from lucy.memory.nodes import MemoryNode
from lucy.memory.store import MemoryStore
from lucy.query import prompts
from lucy.query.memory_view import TIME_TOLERANCE, MemoryView, ViewItem
from lucy.query.reasoners.base import Question, Reasoner, ReasonerError
from lucy.query.trace import TraceRecorder, TraceStep
from lucy.text import clip_text


class SummaryLevels:
    """The summary levels of one question's view: whether they are needed, building the missing ones, and
    walking them."""

    def __init__(self, *, view: MemoryView, reasoner: Reasoner, memory: MemoryStore, stream: str,
                 trace: TraceRecorder, question: Question, budget: int, fanout: int, max_chars: int, init_spans: int,
                 origin: str) -> None:
        self.view = view
        self.reasoner = reasoner
        self.memory = memory
        self.stream = stream
        self.trace = trace
        self.question = question
        self.budget = budget
        self.fanout = fanout  # items of the level below per summary
        self.max_chars = max_chars  # longest summary text
        self.init_spans = init_spans
        self.origin = origin

    def needed(self) -> bool:
        """True when coarse memory exceeds the budget: a select prompt over all coarse spans, whole, would not
        fit (clipping every caption to a sliver would hide what localisation needs)."""
        spans = [self.view.coarse_item(k).as_memory_item() for k in range(len(self.view.coarse_grid))]
        return prompts.select_prompt(self.question, spans, self.init_spans).tokens > self.budget

    def children(self, level: str, start: float, end: float) -> list[ViewItem] | None:
        """The items one level below summary ``level`` that cover ``[start, end)``; None unless all are there
        (whole coarse spans, for summary1)."""
        depth = summary_depth(level)
        if depth == 1:
            return self._coarse_children(start, end)
        unit = (end - start) / self.fanout
        below = summary_level(depth - 1)
        out = []
        for i in range(self.fanout):
            item = self.view.item_for_span(below, start + i * unit, start + (i + 1) * unit)
            if item is None:
                return None
            out.append(item)
        return out

    def _coarse_children(self, start: float, end: float) -> list[ViewItem] | None:
        view, tc = self.view, self.view.coarse_seconds
        first = view.coarse_index(start)
        count = round((end - start) / tc)
        out = []
        for i, k in enumerate(range(first, first + count)):
            if k >= len(view.coarse_items) or view.coarse_items[k] is None or \
                    abs(view.coarse_grid[k][0] - (start + i * tc)) > TIME_TOLERANCE:  # past the end, or a gap
                return None
            item = view.coarse_items[k]
            assert item is not None
            grid_start, grid_end = view.coarse_grid[k]
            if item.end < grid_end - TIME_TOLERANCE or grid_end - grid_start < tc - TIME_TOLERANCE:
                return None  # a partial caption, or the horizon's partial span: the group is not complete yet
            out.append(item)
        return out

    async def build(self) -> AsyncIterator[TraceStep]:
        """Summary nodes for every complete group that lacks one, level by level."""
        depth = 1
        while True:
            unit = self.view.coarse_seconds * self.fanout ** depth
            groups = math.floor(self.view.horizon / unit + 1e-9)
            if groups == 0:
                break
            level = summary_level(depth)
            for g in range(groups):
                start, end = g * unit, (g + 1) * unit
                if self.view.item_for_span(level, start, end) is not None:
                    continue
                children = self.children(level, start, end)
                if children is not None:
                    yield await self._summarise(level, start, end, children)
            depth += 1

    async def _summarise(self, level: str, start: float, end: float, children: list[ViewItem]) -> TraceStep:
        """One summary node over ``children``, stored and put in view."""
        step = self.trace.begin("summarise", level=level, start=start, end=end)
        max_chars = self.max_chars
        views = [child.as_memory_item() for child in children]
        packed = prompts.pack(lambda v: prompts.summarise_prompt(v, max_chars), views, [0.0] * len(views),
                              self.budget)
        try:
            reasoned = await self.reasoner.summarise(packed, max_chars=max_chars)
        except ReasonerError as err:
            self.trace.agent_failed(step, err)
            return step
        self.trace.charge(step, reasoned.usage)
        node = MemoryNode(stream=self.stream, level=level, start=start, end=end,
                          text=clip_text(reasoned.reply.summary, max_chars), origin=self.origin,
                          model=self.reasoner.model)
        node = await asyncio.to_thread(self.memory.add, self.view.node_to_store(node))
        self.view.add_node(self.view.node_in_view(node))
        step.created_nodes = 1
        return step

    def cover(self) -> list[ViewItem]:
        """The coarsest items that cover ``[0, horizon)`` once: summaries where they exist, else coarse spans."""
        view = self.view
        out: list[ViewItem] = []
        k = 0
        while k < len(view.coarse_grid):
            start = view.coarse_grid[k][0]
            chosen: ViewItem | None = None
            for item in view.items.values():
                depth = summary_depth(item.level)
                if depth and abs(item.start - start) < TIME_TOLERANCE and \
                        (chosen is None or depth > summary_depth(chosen.level)):
                    chosen = item
            if chosen is None:
                out.append(view.coarse_item(k))
                k += 1
            else:
                out.append(chosen)
                k = view.coarse_index(chosen.end)
        return out
