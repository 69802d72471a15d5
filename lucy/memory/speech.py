"""Speech into memory: the coarse builder's listener that transcribes each closed coarse span's committed audio.

It runs on the builder's loop (a :class:`lucy.memory.listeners.SpanListener` of
:class:`lucy.memory.builder.CoarseBuilder`, attached by whoever builds the builder with a transcriber) and sees the
same closed spans, but keeps its own queue and its own retry rules, so a slow or failing transcriber
never delays captions, and a failing captioner never delays transcripts. A span is transcribed once its
audio is committed up to the span's end (or the stream has finished, or its sound dropped out); each span's lines
are stored as one node of level :data:`lucy.memory.transcribers.SPEECH_LEVEL` (origin "ingest"), whose text holds
one ``[start-end s] words`` line per thing said (:func:`lucy.memory.transcribers.format_transcript`). A silent
span, or one with no sound at all (an outage), gets a node with no text, so it is not transcribed again. A
captioner that takes the transcript as context (openai) gets it from :meth:`SpeechWorker.transcript`, waiting up
to ``transcriber.caption_waits_seconds`` for it (so do watch checks, while the stream has watches).

A stream whose frame store holds no audio (or a frame store that cannot hold audio) is left alone: no node, no
call, no model loaded. On start, spans already in memory are known (resume): a span is never transcribed twice,
except the last span of a finished stream when its end moves (the builder stretches it).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from lucy.config import LucySettings
from lucy.ingest.frames import FrameStore
from lucy.memory.backoff import Retries, done_until
from lucy.memory.listeners import BuilderLoop, ClosedSpans, Span, SpanListener
from lucy.memory.nodes import INGEST_ORIGIN, MemoryNode
from lucy.memory.store import MemoryStore
from lucy.memory.transcribers import SPEECH_LEVEL, Transcriber, TranscriberError, format_transcript
from lucy.metrics.progress import SpeechProgress
from lucy.metrics.stats import RecentRate
from lucy.redaction import redact_url

log = logging.getLogger(__name__)

_EPS = 1e-6
LEAD_SECONDS = 10.0  # sound before a span's start transcribed with it, so words said across the boundary are whole
BOUNDARY_MARGIN = 1.0  # a line ending this close to the end of a span's sound (more following) was cut off


@dataclass
class SpeechStats:
    """Live counters of a stream's transcription, written by the builder's loop; readers take a :meth:`snapshot`."""

    started: float = field(default_factory=time.monotonic)
    has_audio: bool = False
    transcribed: int = 0  # spans transcribed by this run
    lines: int = 0  # transcript lines stored by this run
    failures: int = 0  # failed transcribe() attempts (each one retried)
    in_flight: int = 0
    pending: int = 0  # closed spans not transcribed yet
    audio_seconds: float = 0.0  # audio transcribed by this run
    transcribe_seconds: float = 0.0  # wall time of the successful transcribe() calls
    transcribed_until: float = 0.0  # media time covered by contiguous speech nodes from 0
    audio_until: float = 0.0  # media time covered by committed audio
    down_since: float | None = None
    last_error: str | None = None
    completions: RecentRate = field(init=False)  # finished spans, for the throughput figure

    def __post_init__(self) -> None:
        self.completions = RecentRate(self.started)

    @property
    def lag(self) -> float:
        """Media seconds of committed audio not transcribed yet."""
        return max(0.0, self.audio_until - self.transcribed_until) if self.has_audio else 0.0

    @property
    def realtime_factor(self) -> float:
        """Audio seconds transcribed per wall second of transcribing (how much faster than real time)."""
        return self.audio_seconds / self.transcribe_seconds if self.transcribe_seconds > 0 else 0.0

    @property
    def spans_per_second(self) -> float:
        return self.completions.per_second()

    @property
    def down_seconds(self) -> float:
        return 0.0 if self.down_since is None else time.monotonic() - self.down_since

    def snapshot(self) -> SpeechProgress:
        return SpeechProgress(
            has_audio=self.has_audio, transcribed=self.transcribed, lines=self.lines,
            transcribed_until=self.transcribed_until, spans_per_second=self.spans_per_second,
            realtime_factor=self.realtime_factor, pending=self.pending, in_flight=self.in_flight,
            failures=self.failures, last_error=redact_url(self.last_error) if self.last_error else None,
            lag=self.lag)


class SpeechWorker(SpanListener):
    """Transcribes closed coarse spans of one stream (on the builder's loop), as a listener of its builder, which
    owns it from its start: :meth:`load` on start, :meth:`update` after each look at the frame store, :meth:`run` as
    tasks, and :meth:`aclose` at the end (which closes the transcriber)."""

    def __init__(self, settings: LucySettings, stream: str, memory: MemoryStore, transcriber: Transcriber) -> None:
        self.settings = settings
        self.stream = stream
        self.memory = memory
        self.transcriber = transcriber
        self.span_seconds = settings.levels.coarse.span_seconds  # the builder's span clock
        self.stats = SpeechStats()
        self._done: dict[int, float] = {}  # span index -> end of its speech node
        self._pending: dict[int, Span] = {}
        self._taken: set[int] = set()  # spans a worker holds now
        self._ready: asyncio.Event | None = None
        self._looked = False  # update() has looked at the frame store once (so has_audio is known)

    @property
    def caught_up(self) -> bool:
        """No span known to need transcribing, and none in flight."""
        return self.stats.pending == 0 and self.stats.in_flight == 0

    @property
    def down_seconds(self) -> float | None:
        return None if self.stats.down_since is None else self.stats.down_seconds

    # ----------------------------------------------------------------------------------- as a span listener

    def on_start(self) -> None:
        self.load()

    def tasks(self, builder: BuilderLoop) -> list[Coroutine[Any, Any, None]]:
        return [self.run(builder.frames) for _ in range(self.settings.transcriber.max_in_flight)]

    async def on_spans(self, closed: ClosedSpans) -> None:
        await self.update(closed.frames, closed.spans, closed.finished, closed.media_end)

    async def transcript(self, span: Span) -> str | None:
        return await self.transcript_of(span.k, span.start, span.end, self.settings.transcriber.caption_waits_seconds)

    # ----------------------------------------------------------------------------------- transcribing

    def load(self) -> None:
        """Learn which spans memory already holds (blocking: call in a thread)."""
        for node in self.memory.nodes(self.stream, level=SPEECH_LEVEL, origin=INGEST_ORIGIN):
            k = round(node.start / self.span_seconds)
            if abs(k * self.span_seconds - node.start) < _EPS:
                self._done[k] = max(self._done.get(k, 0.0), node.end)
        self._advance()

    async def update(self, frames: FrameStore, spans: list[Span], finished: bool, media_end: float) -> None:
        """The builder's closed spans (all of them, in order): queue those whose audio is committed and that
        memory lacks. A span whose audio never came (the sound dropped out while pictures went on: committed
        audio lags the pictures by more than a span) is transcribed with what there is, rather than waiting
        for ever."""
        if self._ready is None:
            self._ready = asyncio.Event()
        has_audio = getattr(frames, "has_audio", None)
        if has_audio is None or not await asyncio.to_thread(has_audio):
            self._looked = True
            return  # no audio (yet): nothing to do, exactly as before audio existed
        self.stats.has_audio = True
        until = await asyncio.to_thread(frames.audio_until)  # type: ignore[attr-defined]
        self.stats.audio_until = max(self.stats.audio_until, until)
        dropped = media_end - until > self.span_seconds
        self._pending = {job.k: job for job in spans if self._done.get(job.k, -math.inf) < job.end - _EPS and
                         (finished or dropped or until >= job.end - _EPS)}
        self.stats.pending = len(self._pending)
        self._looked = True
        if any(k not in self._taken for k in self._pending):
            self._ready.set()

    async def transcript_of(self, k: int, start: float, end: float, wait_seconds: float) -> str:
        """The stored transcript of span ``k`` ("" when there is none): waits up to ``wait_seconds`` while the span
        is still to be transcribed (a stream without sound never waits)."""
        deadline = time.monotonic() + wait_seconds
        while (not self._looked or (self.stats.has_audio and self._done.get(k, -math.inf) < end - _EPS)) \
                and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if not self.stats.has_audio:
            return ""
        nodes = await asyncio.to_thread(self.memory.nodes, self.stream, level=SPEECH_LEVEL, start=start, end=end,
                                        origin=INGEST_ORIGIN)
        return next((n.text for n in nodes if abs(n.start - start) < _EPS), "")

    async def run(self, frames_of: Callable[[], FrameStore | None]) -> None:
        """One worker: takes the earliest pending span no other worker holds, transcribes it, stores it.
        ``frames_of`` returns the stream's frame store (opened by the builder before any span is pending)."""
        if self._ready is None:
            self._ready = asyncio.Event()
        while True:
            await self._ready.wait()
            free = sorted(k for k in self._pending if k not in self._taken)
            if not free:
                self._ready.clear()
                continue
            job = self._pending[free[0]]
            self._taken.add(job.k)
            try:
                frames = frames_of()
                assert frames is not None
                await self._do(frames, job)
            finally:
                self._taken.discard(job.k)

    async def _do(self, frames: FrameStore, job: Span) -> None:
        # Words said across a span boundary: the span is heard from LEAD_SECONDS before its start, and a line
        # belongs to the span its end falls in (less a margin). A line cut off by the end of the span's sound, with
        # more sound after it, so goes to the next span, which hears it whole.
        lead_from = max(0.0, job.start - LEAD_SECONDS)
        clip = await asyncio.to_thread(frames.read_audio, lead_from, job.end)  # type: ignore[attr-defined]
        more_after = await asyncio.to_thread(frames.audio_until) > clip.end + _EPS  # type: ignore[attr-defined]
        heard = [] if len(clip) == 0 else await self._transcribe(job, clip)
        first = job.start - BOUNDARY_MARGIN if job.start > 0 else -math.inf
        last = clip.end - BOUNDARY_MARGIN if more_after else math.inf
        lines = [line for line in heard if first <= line.end < last]
        node = MemoryNode(stream=self.stream, level=SPEECH_LEVEL, start=job.start, end=job.end,
                          text=format_transcript(lines), origin=INGEST_ORIGIN, model=self.transcriber.model)
        await asyncio.to_thread(self.memory.add, node)
        self._done[job.k] = max(self._done.get(job.k, 0.0), job.end)
        if self._pending.get(job.k) == job:
            self._pending.pop(job.k, None)
        self.stats.pending = len(self._pending)
        self.stats.transcribed += 1
        self.stats.lines += len(lines)
        self.stats.completions.tick()
        self._advance()

    async def _transcribe(self, job: Span, clip: object) -> list:
        """Transcribe with exponential backoff until the transcriber answers (the span stays pending meanwhile)."""
        retries = Retries(self.stats, "transcriber", self.stream, self.settings.memory)
        while True:
            began = time.monotonic()
            self.stats.in_flight += 1
            try:
                async with asyncio.timeout(self.settings.transcriber.timeout_seconds):
                    lines = await self.transcriber.transcribe(clip)  # type: ignore[arg-type]
            except (TranscriberError, TimeoutError) as err:
                error = str(err) or type(err).__name__
            else:
                self.stats.transcribe_seconds += time.monotonic() - began
                self.stats.audio_seconds += len(clip) / clip.sample_rate  # type: ignore[arg-type, attr-defined]
                retries.answered()
                return lines
            finally:
                self.stats.in_flight -= 1
            await retries.failed(error, "transcript", job.start, job.end)

    def _advance(self) -> None:
        self.stats.transcribed_until = done_until(self._done, self.span_seconds)[1]

    async def aclose(self) -> None:
        try:
            await self.transcriber.aclose()
        except Exception as err:  # noqa: BLE001  (closing must not hide the builder's own outcome)
            log.warning("closing transcriber: %r", err)
