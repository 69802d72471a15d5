"""The streams one question is about, laid on one timeline: a *lane* per stream, so that the backtracking loop treats
spans of several streams as one candidate pool without knowing there are several.

A question about one stream has one lane at offset 0: every time is the stream's own media time, and nothing here
changes anything. A question across streams (``lucy ask`` without ``--stream``, ``POST /v1/questions``) puts each
stream's memory at an offset on the question's timeline (its *view time*): lane ``i`` starts where lane ``i - 1``
ends, rounded up to a whole number of *units* and one unit of gap. The unit is a whole number of coarse spans (so
every level's grid, fine and ultra-fine included, lines up inside a lane) and a power of the summary fan-out
longer than any lane (so no summary group ever holds two streams). The view, the localiser, the searcher and the
summary levels then work on view time as they do on one stream; what crosses to the outside is turned back into
(stream, media time) here: the memories agents are shown (:class:`lucy.query.memory_view.ViewItem` keeps its
lane's stream and offset), nodes written to the store (:meth:`Lanes.to_store`), frames read for a caption
(:meth:`Lanes.at`), evidence and trace steps (:meth:`Lanes.local`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lucy.config import Level, Preset
from lucy.ingest.frames import FrameStore, StreamInfo
from lucy.memory.nodes import MemoryNode
from lucy.memory.transcribers import SPEECH_LEVEL, TranscriptLine, format_transcript, parse_transcript
from lucy.query.reasoners.base import EvidenceSpan, MemoryItem

# The coarse builder's tolerance when it decides whether a frame lies past a span boundary (see coarse_grid).
_BUILDER_TOLERANCE = 1e-6


def coarse_grid(horizon: float, span_seconds: float, *, last_frame: float | None,
                finished: bool) -> list[tuple[float, float]]:
    """The coarse spans ``[k*T_c, (k+1)*T_c)`` of a stream seen up to ``horizon``, the last one cut at it.

    They must be the spans the coarse builder captions (:mod:`lucy.memory.builder`), or a question would find
    no ingest caption for a span and caption it again on demand, every time. The builder has one exception to
    the plain grid: when a finished stream's media end lies a sliver past a span boundary and no frame lies in
    that sliver (the last frame's sampling interval overhangs the boundary), the sliver is not a span of its own
    but the end of the last whole span, whose caption is stretched to the media end (e.g. 540-600.02 s). So it
    is here. A live stream's sliver stays a span of its own: frames may still arrive in it.
    """
    count = max(1, math.ceil(horizon / span_seconds - 1e-9))
    grid = [(k * span_seconds, min((k + 1) * span_seconds, horizon)) for k in range(count)]
    if finished and count > 1 and last_frame is not None and last_frame < grid[-1][0] - _BUILDER_TOLERANCE:
        grid[-2:] = [(grid[-2][0], horizon)]
    return grid


@dataclass(frozen=True, slots=True)
class Lane:
    """One stream of a question: its frame store as the question found it, and where it lies in view time."""

    stream: str
    frames: FrameStore
    info: StreamInfo
    offset: float  # view time of the stream's media time 0
    horizon: float  # media seconds of the stream the question is about: [0, horizon)
    grid: tuple[tuple[float, float], ...]  # its coarse spans, media time

    @property
    def end(self) -> float:
        """View time where the lane's media ends."""
        return self.offset + self.horizon

    def wall(self, media_seconds: float) -> float | None:
        """Unix time of a media time of the lane (None for a file)."""
        return None if self.info.wall_start is None else self.info.wall_start + media_seconds


def _finished(info: StreamInfo) -> bool:
    """Finished as the coarse builder sees it: a file decoded to its end (or given up on)."""
    return not info.live and (info.complete or info.lost is not None)


def _horizon(info: StreamInfo) -> float:
    """The builder's rule: frames, or for a stream of sound alone its audio (StreamInfo.covered_seconds)."""
    return info.covered_seconds if info.frames or info.audio else 0.0


class Lanes:
    """The lanes of one question, in the order given (a question about one stream has one, at offset 0)."""

    def __init__(self, lanes: Sequence[Lane]) -> None:
        if not lanes:
            raise ValueError("a question needs at least one stream")
        self.lanes = tuple(lanes)
        self._offsets = [lane.offset for lane in self.lanes]

    @classmethod
    def lay(cls, stores: Sequence[tuple[FrameStore, StreamInfo]], preset: Preset, *, fanout: int) -> Lanes:
        """The lanes of the streams of ``stores`` that have something to ask about (frames, or sound), each at its
        offset; a stream with nothing yet is left out (:class:`ValueError` when none has anything)."""
        coarse = preset.level(Level.COARSE).span_seconds
        present = [(frames, info, _horizon(info)) for frames, info in stores]
        present = [(frames, info, h) for frames, info, h in present if h > 0]
        if not present:
            raise ValueError("no stream has frames or sound yet")
        longest = max(h for _, _, h in present)
        unit = coarse
        while unit <= longest + coarse and len(present) > 1:
            unit *= max(2, fanout)
        lanes: list[Lane] = []
        offset = 0.0
        for frames, info, horizon in present:
            grid = coarse_grid(horizon, coarse, last_frame=info.last_time, finished=_finished(info))
            lanes.append(Lane(frames.name, frames, info, offset, horizon, tuple(grid)))
            offset += (math.floor(horizon / unit + 1e-9) + 2) * unit  # a unit of gap at least
        return cls(lanes)

    # --------------------------------------------------------------------------------------- the timeline

    @property
    def single(self) -> bool:
        """One stream: view time is its media time, and nothing is named."""
        return len(self.lanes) == 1

    @property
    def streams(self) -> list[str]:
        return [lane.stream for lane in self.lanes]

    @property
    def horizon(self) -> float:
        """View time where the last lane ends: the question's timeline is ``[0, horizon)``."""
        return self.lanes[-1].end

    @property
    def longest(self) -> float:
        """The longest lane's horizon, media seconds (what a prompt says was seen so far)."""
        return max(lane.horizon for lane in self.lanes)

    def grid(self) -> list[tuple[float, float]]:
        """Every lane's coarse spans in view time, lane after lane."""
        return [(lane.offset + a, lane.offset + b) for lane in self.lanes for a, b in lane.grid]

    def grid_ranges(self) -> list[range]:
        """The indices of each lane's spans in :meth:`grid`."""
        out, first = [], 0
        for lane in self.lanes:
            out.append(range(first, first + len(lane.grid)))
            first += len(lane.grid)
        return out

    def at(self, view_time: float) -> Lane:
        """The lane a view time lies in (the last one starting at or before it)."""
        return self.lanes[max(0, bisect.bisect_right(self._offsets, view_time + 1e-6) - 1)]

    def lane(self, stream: str) -> Lane | None:
        return next((lane for lane in self.lanes if lane.stream == stream), None)

    def local(self, start: float, end: float) -> tuple[Lane, float, float]:
        """A view-time span as (its lane, media start, media end), cut to the lane's media."""
        lane = self.at(start)
        a = min(max(0.0, start - lane.offset), lane.horizon)
        return lane, a, min(max(a, end - lane.offset), lane.horizon)

    def view_time(self, stream: str | None, media_seconds: float) -> float:
        """The view time of a media time of ``stream`` (None or unknown: the first lane's)."""
        lane = self.lane(stream) if stream is not None else None
        return (lane or self.lanes[0]).offset + media_seconds

    def label(self, start: float, end: float) -> str:
        """A view-time span as people read it: ``front 60-120s`` (just ``60-120s`` for one stream)."""
        lane, a, b = self.local(start, end)
        return f"{a:g}-{b:g}s" if self.single else f"{lane.stream} {a:g}-{b:g}s"

    # --------------------------------------------------------------------------------------- memory

    def to_view(self, node: MemoryNode, lane: Lane) -> MemoryNode:
        """A stored node of ``lane``'s stream in view time (a speech node's transcript lines too)."""
        if lane.offset == 0:
            return node
        text = node.text
        if node.level == SPEECH_LEVEL:
            text = format_transcript(TranscriptLine(line.start + lane.offset, line.end + lane.offset, line.text,
                                                    line.confidence) for line in parse_transcript(node.text))
        return replace(node, start=node.start + lane.offset, end=node.end + lane.offset, text=text)

    def to_store(self, node: MemoryNode) -> MemoryNode:
        """A node made in view time as its stream stores it: the lane's stream and media times."""
        if self.single:
            return node
        lane, start, end = self.local(node.start, node.end)
        return replace(node, stream=lane.stream, start=start, end=end)

    def from_store(self, node: MemoryNode) -> MemoryNode:
        """A node the store returned (for its lane's stream) in view time."""
        lane = self.lane(node.stream) or self.lanes[0]
        return self.to_view(node, lane)

    # --------------------------------------------------------------------------------------- replies

    def evidence_in_view(self, evidence: Sequence[EvidenceSpan], shown: Sequence[MemoryItem]) -> list[EvidenceSpan]:
        """An agent's evidence (media times, each naming its stream) in view time. Evidence that names no stream, or
        one the question is not about, is placed on the stream of a memory shown whose span it overlaps; evidence
        that fits none is dropped (it points at nothing the agent was shown)."""
        if self.single:
            return list(evidence)
        out = []
        for span in evidence:
            lane = self.lane(span.stream) if span.stream else None
            if lane is None:
                near = next((m for m in shown if m.stream and m.start < span.end + 1e-6 and span.start < m.end + 1e-6),
                            None)
                lane = self.lane(near.stream) if near is not None else None
            if lane is None:
                continue
            out.append(EvidenceSpan(start=lane.offset + span.start, end=lane.offset + max(span.start, span.end),
                                    stream=lane.stream))
        return out
