"""Captions that a question makes on demand: one span read back from the frame store at its level's fps,
described by the captioner, and written back to memory so that later questions reuse it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lucy.config import Level
from lucy.ingest.frames import FrameStore
from lucy.memory.captioners.base import Captioner, CaptionerError, StoredSpan
from lucy.memory.captioners.guard import CaptionerUnavailable
from lucy.memory.nodes import MemoryNode
from lucy.memory.store import MemoryStore
from lucy.memory.transcribers import format_transcript
from lucy.perception.describe import read_observations
from lucy.query.memory_view import TIME_TOLERANCE, MemoryView

if TYPE_CHECKING:
    from lucy.query.lanes import Lanes


def expired_message(before: float) -> str:
    """Why a span cannot be captioned again: retention deleted its frames."""
    return f"frames before {before:g} s have expired (retention)"


@dataclass(frozen=True, slots=True)
class CaptionOutcome:
    """What came of captioning one span."""

    node: MemoryNode | None  # the stored caption (in the question's view time)
    error: str | None  # why there is none (None without a node: no frames lie in the span)
    called: bool  # whether the captioner was called (what the trace counts as a caption call)


class SpanCaptioner:
    """Captions spans of one stream for one question, and stores each caption with the question's origin.

    Once the captioner fails, the question stops asking it (``down`` says why): it answers from the memory it has
    rather than wait on a failing captioner again. Spans whose frames retention deleted are not asked for.

    For a question across streams (``lanes``), spans are in view time: each is read from its lane's frame store
    and stored for its lane's stream, in that stream's media time (:mod:`lucy.query.lanes`).
    """

    def __init__(self, *, view: MemoryView, frames: FrameStore, captioner: Captioner | None, memory: MemoryStore,
                 slots: asyncio.Semaphore, expired_before: float, origin: str, lanes: Lanes | None = None) -> None:
        self.view = view
        self.frames = frames
        self.lanes = None if lanes is None or lanes.single else lanes
        self.captioner = captioner
        self.memory = memory
        self.slots = slots  # captions in flight, shared by every question of the engine
        self.expired_before = expired_before  # retention had deleted every frame before this when the question came
        self.origin = origin
        self.down: str | None = None  # why captions are not asked for any more in this question

    async def caption(self, level: str, start: float, end: float, instruction: str, parent: int | None, *,
                      origin: str | None = None) -> CaptionOutcome:
        """Caption ``[start, end)`` at ``level``'s fps with ``instruction``; store the node with ``parent`` and
        ``origin`` (default: the question's)."""
        frames, offset, expired_before = self.frames, 0.0, self.expired_before
        if self.lanes is not None:
            lane = self.lanes.at(start)
            frames, offset, expired_before = lane.frames, lane.offset, lane.info.expired_before
        if end - offset <= expired_before + TIME_TOLERANCE:  # its memory text is all there is
            return CaptionOutcome(None, expired_message(expired_before), False)
        if self.captioner is None:
            return CaptionOutcome(None, "no captioner is configured (captioner.backend = none)", False)
        if self.down is not None:
            return CaptionOutcome(None, self.down, False)
        media_start, media_end = start - offset, end - offset  # in the stream's own media time
        async with self.slots:
            clip = await asyncio.to_thread(frames.read, media_start, media_end, self.view.fps(level))
            if len(clip) == 0:
                expired = await asyncio.to_thread(frames.available_from)
                return CaptionOutcome(None, expired_message(expired) if media_start < expired else None, False)
            # What was said in the span goes with its frames to a captioner that takes it (openai).
            said = format_transcript(self.view.heard_in(start, end)) if self.captioner.hears else ""
            # ... and what the detect stage saw in it, to a captioner that takes that (pixels, openai).
            observed = await asyncio.to_thread(read_observations, self.memory, frames.name, media_start, media_end) \
                if self.captioner.sees else None
            context: dict[str, object] = {"transcript": said} if said else {}
            if observed is not None:
                context["observed"] = observed
            if self.captioner.looks_between:  # the span's frames at the stored rate, read where it needs them
                context["stored"] = StoredSpan(frames, media_start, media_end)
            try:
                caption = await self.captioner.describe(clip, instruction, level=Level(level), **context)
            except CaptionerError as err:
                self.down = f"captioner unavailable, answering from memory: {err}"
                # A captioner the guard has marked unavailable was not called this time.
                return CaptionOutcome(None, f"caption of {level} {start:g}-{end:g}s failed: {err}",
                                      not isinstance(err, CaptionerUnavailable))
        node = MemoryNode(stream=frames.name, level=level, start=media_start, end=media_end, text=caption.text,
                          instruction=instruction, origin=origin or self.origin, parent=parent,
                          model=caption.model or self.captioner.model)
        node = await asyncio.to_thread(self.memory.add, node)
        return CaptionOutcome(node if self.lanes is None else self.lanes.from_store(node), None, True)
