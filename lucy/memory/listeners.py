"""What the coarse builder tells the stages that act on its spans: the span listener protocol.

The builder (:class:`lucy.memory.builder.CoarseBuilder`) captions each closed coarse span; transcription
(:class:`lucy.memory.speech.SpeechWorker`), embedding (:class:`lucy.memory.retrieval.IndexWriter`) and watch checks
(:class:`lucy.watch.checker.WatchChecker`) act on the same spans, and more stages will. They subscribe to the builder's
events as :class:`SpanListener` objects (as pipecat's observers see frames without being part of the pipeline), so the
builder knows none of them, and a new stage is a new listener rather than another branch of the builder's loop.

Whoever builds a builder attaches its listeners (:class:`lucy.recorder.StreamRecorder` for every recording). The
builder owns them from :meth:`CoarseBuilder.start` on: each is closed when the builder stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from lucy.ingest.frames import FrameStore
from lucy.memory.nodes import MemoryNode


@dataclass(frozen=True, slots=True)
class Span:
    """Closed coarse span ``k``: ``[start, end)`` (the last span of a finished stream may end past ``(k+1)*T_c``)."""

    k: int
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class BuilderLoop:
    """What a listener's tasks may use of the builder's loop (given to :meth:`SpanListener.tasks`)."""

    stream: str
    slots: asyncio.Semaphore  # the caption slots: captions a listener makes share them with the builder's
    frames: Callable[[], FrameStore | None]  # the stream's frame store, once the builder has opened it
    captioned_until: float  # media time covered by contiguous coarse captions when the builder started


@dataclass(frozen=True, slots=True)
class ClosedSpans:
    """The stream as of the builder's latest look at its frame store: every closed span so far, in order."""

    frames: FrameStore
    spans: list[Span]
    finished: bool  # the stream has ended (its last, partial span is among ``spans``)
    media_end: float


@dataclass(frozen=True, slots=True)
class SpanCaptioned:
    """A span's coarse caption is stored (``node``)."""

    span: Span
    node: MemoryNode
    slots: asyncio.Semaphore  # the caption slots (as in :class:`BuilderLoop`)
    heard: Callable[[], Awaitable[str | None]]  # the span's transcript, waited for as a captioner that hears waits


class SpanListener:
    """Sees the spans of one stream's coarse builder. Override what you need; the defaults do nothing.

    Order of events: :meth:`on_start` (the caller's thread, before the builder's thread starts), :meth:`tasks` (once,
    on the builder's loop), then on that loop :meth:`on_spans` after each look at the frame store and
    :meth:`on_captioned` once each caption is stored; :meth:`aclose` on the loop as it ends, and :meth:`on_stop` on
    the caller's thread once the builder's thread has ended. Async hooks run on the builder's loop and must not block
    it; an error raised by :meth:`on_captioned` or by a task fails the builder, as its own would.
    """

    def on_start(self) -> None:
        """Blocking, before the builder's first look at the frame store: learn what memory already holds (resume)."""

    def tasks(self, builder: BuilderLoop) -> list[Coroutine[Any, Any, None]]:
        """Coroutines to run on the builder's loop until it stops (one that returns is simply done)."""
        return []

    async def on_spans(self, closed: ClosedSpans) -> None:
        """The builder has looked at the frame store: ``closed`` lists every span closed so far."""

    async def transcript(self, span: Span) -> str | None:
        """What was said in ``span``, waiting for it as this listener's rules say; None: this listener does not
        transcribe (the builder asks each listener in turn, for a captioner that hears and for :class:`SpanCaptioned`
        ``heard``)."""
        return None

    async def on_captioned(self, event: SpanCaptioned) -> None:
        """A span's caption is stored; the span counts as done once every listener has returned."""

    @property
    def caught_up(self) -> bool:
        """Nothing of this listener's is pending or in flight (the builder's drain waits for it)."""
        return True

    @property
    def down_seconds(self) -> float | None:
        """How long the backend this listener waits on has failed without a success; None while it works (a drain
        gives up on it as on a failing captioner)."""
        return None

    async def aclose(self) -> None:
        """On the builder's loop as it ends: close what this listener owns there."""

    def on_stop(self, timeout: float) -> None:
        """On the caller's thread, once the builder's thread has ended (or ``timeout`` passed waiting for it)."""
