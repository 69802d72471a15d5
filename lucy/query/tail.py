"""The tail: coarse spans at the end of the horizon that the builder has not captioned yet (ingest runs ahead of
captioning, and a live stream's last span is still open). A question captions them itself before it answers, so
that it sees everything up to its horizon."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from lucy.config import Level
from lucy.memory.nodes import TAIL_ORIGIN
from lucy.query.captioning import SpanCaptioner
from lucy.query.memory_view import TIME_TOLERANCE, MemoryView
from lucy.query.trace import TraceRecorder, TraceStep


def missing_tail(view: MemoryView, indices: range | None = None) -> list[int]:
    """Indices of the coarse spans after the last one captioned whole, newest first (``indices``: those of one
    stream's spans in a question across streams; default: all of the grid)."""
    missing = []
    for k in reversed(indices if indices is not None else range(len(view.coarse_grid))):
        item = view.coarse_items[k]
        if item is not None and item.end >= view.coarse_grid[k][1] - TIME_TOLERANCE:
            break
        missing.append(k)
    return missing


async def caption_tail(view: MemoryView, captioner: SpanCaptioner, trace: TraceRecorder, *, max_spans: int,
                       instruction: str) -> AsyncIterator[TraceStep]:
    """Caption the newest ``max_spans`` spans of the tail (oldest of them first) with the coarse instruction.

    Each caption is stored as the span's tail node (:data:`lucy.memory.nodes.TAIL_ORIGIN`: one per span, replaced
    by the ingest caption once the builder gets there) and stands for its span in the view. Across streams, each
    stream's tail is captioned so (up to ``max_spans`` each).
    """
    lanes = view.lanes.grid_ranges() if view.lanes is not None else [range(len(view.coarse_grid))]
    for k in sorted(k for indices in lanes for k in missing_tail(view, indices)[:max_spans]):
        start, end = view.coarse_grid[k]
        step = trace.begin("tail", level=Level.COARSE.value, start=start, end=end,
                           detail="not captioned by ingest yet; captioned on demand")
        began = time.perf_counter()
        outcome = await captioner.caption(Level.COARSE.value, start, end, instruction, None, origin=TAIL_ORIGIN)
        step.latency_seconds = time.perf_counter() - began
        step.caption_calls = int(outcome.called)
        if outcome.node is not None:
            step.created_nodes = 1
            view.coarse_items[k] = view.add_node(outcome.node)
        elif outcome.error:
            step.error = outcome.error
            trace.error(outcome.error)
        else:
            step.detail = "no frames in this span"
        yield step
