"""The continuous coarse builder: captions every closed coarse span of a stream while it is ingested.

Span clock: coarse span ``k`` is ``[k*T_c, (k+1)*T_c)`` (T_c from the preset). A span closes once no frame
can still arrive inside it: the sampler keeps at most one frame per ``1/fps`` slot, so after a frame in slot
``n`` every later frame lies at or after ``(n+1)/fps``. At the end of a finished file the last, partial span
closes too (``[k*T_c, end of media)``); a live stream's partial span waits for more video. A stream of sound
alone (an audio file: no frames, audio stored) is spanned the same way by its committed audio
(:attr:`lucy.ingest.frames.StreamInfo.covered_seconds`): each span gets a one-line coarse node saying there is no
video (no captioner call) and its transcript, which is all its memory holds.

The builder runs on its own thread with its own asyncio loop. Ingest only wakes it (:meth:`on_commit` never
blocks), so a slow or dead captioner slows captions, never decoding or storage. The frame store is the
backlog: closed spans wait there, and at most ``memory.queue_spans`` of them sit in the bounded queue at once,
so memory stays flat however far captioning falls behind. Workers read a span's clip at the coarse level's
fps (in a thread), call ``describe()`` (at most ``captioner.max_in_flight`` calls at once; there are twice as
many workers, so the next clips are read while captions are in flight) and write one node (origin "ingest").

A :class:`CaptionerError` (or a caption past ``memory.caption_timeout_seconds``) leaves the span pending and
retries it with exponential backoff; while the captioner is failing, one span at a time probes it, and when it
answers again the backlog drains from the frame store at full concurrency. On start, closed spans already in
the frame store but not in memory are captioned (resume after a crash or an outage); the memory store keeps
one ingest node per span, so a span is never held twice.

What else happens to a span is its listeners' business (:mod:`lucy.memory.listeners`; transcription, embedding and
watch checks are listeners): each sees the closed spans after every look at the frame store and each caption once it
is stored, runs its own tasks on the builder's loop and shares its caption slots. A captioner that hears is given the
span's transcript by the listener that makes it (waiting as that listener's rules say). A span counts as done once
every listener has seen its caption; the builder is caught up once every listener is too.

With a detect stage in ingest (:mod:`lucy.ingest.detect`), a closed span also waits until the stream is observed up
to its end (``observed_until``), so its caption is written from the objects seen in it; it stays pending meanwhile.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from lucy.config import Level, LucySettings
from lucy.errors import StoreError, is_disk_full
from lucy.ingest.frames import Clip, FrameStore, FrameStores, StreamInfo, check_stream_name
from lucy.ingest.pipeline import IngestStats
from lucy.memory.backoff import Retries, done_until
from lucy.memory.captioners.base import Captioner, CaptionerError, StoredSpan
from lucy.memory.listeners import BuilderLoop, ClosedSpans, Span, SpanCaptioned, SpanListener
from lucy.memory.nodes import INGEST_ORIGIN, Caption, MemoryNode
from lucy.memory.store import MemoryStore
from lucy.metrics.progress import CaptionProgress
from lucy.metrics.stats import RecentRate
from lucy.perception.describe import SpanObservations, read_observations
from lucy.redaction import redact_url

log = logging.getLogger(__name__)

_EPS = 1e-6
_CONCURRENT_READS = 2  # frame-store reads are mostly serialised inside zarr; more only adds contention
NO_VIDEO_TEXT = "No video was recorded from {start:.1f} s to {end:.1f} s (the stream was down or not yet started)."
AUDIO_ONLY_TEXT = "No video from {start:.1f} s to {end:.1f} s: the stream carries sound only."
EXPIRED_TEXT = "The frames from {start:.1f} s to {end:.1f} s expired (retention) before they were captioned."


@dataclass
class BuilderStats:
    """Live counters of the coarse builder, written by its loop; readers take a :meth:`snapshot`."""

    stream: str
    started: float = field(default_factory=time.monotonic)
    captioned: int = 0  # spans captioned by this run
    failures: int = 0  # failed describe() attempts (each one retried)
    in_flight: int = 0  # describe() calls running now
    queued: int = 0  # spans waiting in the bounded queue
    pending: int = 0  # closed spans not captioned yet (queued, in flight, or still only in the frame store)
    closed: int = 0  # closed spans of the stream (all runs)
    coarse_nodes: int = 0  # coarse ingest nodes of the stream in memory (all runs)
    captioned_until: float = 0.0  # media time covered by contiguous coarse nodes from 0
    ingested_until: float = 0.0  # media time covered by committed frames
    describe_seconds: float = 0.0  # total time spent in successful describe() calls
    down_since: float | None = None  # monotonic time of the first failure since the last success
    last_error: str | None = None
    completions: RecentRate = field(init=False)  # finished spans, for the throughput figure

    def __post_init__(self) -> None:
        self.completions = RecentRate(self.started)

    @property
    def lag(self) -> float:
        """Media seconds ingested but not yet captioned."""
        return max(0.0, self.ingested_until - self.captioned_until)

    @property
    def captions_per_second(self) -> float:
        """Captions finished per wall second over the last 30 s (or since start, if shorter)."""
        return self.completions.per_second()

    @property
    def down_seconds(self) -> float:
        return 0.0 if self.down_since is None else time.monotonic() - self.down_since

    def snapshot(self) -> CaptionProgress:
        """These figures, frozen (rates as of now; the error redacted), for
        :class:`lucy.metrics.progress.StreamProgress`."""
        return CaptionProgress(
            captioned=self.captioned, captioned_until=self.captioned_until,
            captions_per_second=self.captions_per_second, queued=self.queued, pending=self.pending,
            in_flight=self.in_flight, coarse_nodes=self.coarse_nodes, failures=self.failures,
            last_error=redact_url(self.last_error) if self.last_error else None, lag=self.lag)

    def as_dict(self) -> dict[str, object]:
        return {"captioned": self.captioned, "failures": self.failures, "in_flight": self.in_flight,
                "queued": self.queued, "pending": self.pending, "coarse_nodes": self.coarse_nodes,
                "captioned_until": round(self.captioned_until, 3), "ingested_until": round(self.ingested_until, 3),
                "lag_seconds": round(self.lag, 3), "captions_per_second": round(self.captions_per_second, 3),
                "last_error": self.last_error}


@dataclass(frozen=True, slots=True)
class _Job:
    k: int
    start: float
    end: float
    stretch: bool = False  # the span is captioned up to its nominal end: only its node's end moves (to media end)


@dataclass(frozen=True, slots=True)
class _Grid:
    """The closed coarse spans of a stream as of one look at its frame store: ``full`` whole spans of ``t`` seconds,
    then, once the stream has finished, what lies past them up to its media end.

    A finished stream's captions reach its media end. Beyond the last full span, a partial span is made only if a
    frame lies in it; a sliver with none (the last frame's sampling interval overhanging the span boundary) is added
    to the last full span instead (``stretch``). Questions draw the same spans (lucy.query.memory_view.coarse_grid):
    keep the two in step.
    """

    t: float
    full: int
    partial: bool
    stretch: bool
    finished: bool
    media_end: float

    @classmethod
    def of(cls, info: StreamInfo, t: float) -> _Grid | None:
        """The spans of ``info``'s committed frames (of its audio when it has sound and no frames); None before
        the first frame or sound. A span closes once no frame can still arrive inside it (see the module)."""
        finished = not info.live and (info.complete or info.lost is not None)
        if info.last_time is None:
            # Sound alone (an audio file or feed): spans close as committed audio passes their end, which it does
            # in order, so the last "frame" is the audio's end and a finished stream's last span is a partial one.
            closed_until = media_end = last_time = info.covered_seconds
            if closed_until <= 0:
                return None
        else:
            fps = info.stored_fps
            closed_until = (math.floor(info.last_time * fps + _EPS) + 1) / fps
            media_end, last_time = info.media_seconds, info.last_time
        full = int(math.floor(closed_until / t + _EPS))
        tail = finished and media_end > full * t + _EPS
        partial = tail and (full == 0 or last_time >= full * t - _EPS)
        return cls(t, full, partial, tail and not partial, finished, media_end)

    @property
    def closed(self) -> int:
        return self.full + int(self.partial)

    def _last(self, k: int) -> bool:
        """Span ``k`` is the last span of a finished stream (it ends at the media end)."""
        return k >= self.full or (self.stretch and k == self.full - 1)

    def end_of(self, k: int) -> float:
        """Where closed span ``k`` ends."""
        return self.media_end if self._last(k) else (k + 1) * self.t

    def jobs(self, done: dict[int, float], contiguous: int) -> list[_Job]:
        """The closed spans from ``contiguous`` on whose caption (``done``: span -> end of its node) does not reach
        their end yet."""
        todo = []
        for k in range(min(contiguous, self.full - int(self.stretch)), self.closed):
            end, reached = self.end_of(k), done.get(k, -math.inf)
            if reached < end - _EPS:  # a last span captioned up to its nominal end only moves its node's end
                todo.append(_Job(k, k * self.t, end, stretch=self._last(k) and reached >= (k + 1) * self.t - _EPS))
        return todo


class CoarseBuilder:
    """Captions the closed coarse spans of one stream into memory, on a background thread.

    Use (as :class:`lucy.recorder.StreamRecorder` does): :meth:`start`; pass :meth:`on_commit` to
    :class:`lucy.ingest.Ingestor`; after ingest, :meth:`drain` (wait for the backlog) and :meth:`stop`. The
    builder owns ``captioner`` and ``listeners``: they are closed when the builder stops.
    """

    def __init__(self, settings: LucySettings, stream: str, memory: MemoryStore, captioner: Captioner, *,
                 instruction: str | None = None, max_in_flight: int | None = None,
                 poll_seconds: float = 2.0, frames: FrameStores,
                 listeners: Sequence[SpanListener] = (),
                 observed_until: Callable[[], float | None] | None = None) -> None:
        self.settings = settings
        self.stream = check_stream_name(stream)
        self.frame_stores = frames
        self.memory = memory
        self.captioner = captioner
        self.instruction = instruction or settings.captioner.coarse_instruction
        self.level = Level.COARSE
        spec = settings.levels.coarse
        self.span_seconds = spec.span_seconds
        self.fps = spec.fps
        self.workers = max_in_flight or settings.captioner.max_in_flight
        self.poll_seconds = poll_seconds
        self.stats = BuilderStats(self.stream)
        self.listeners = list(listeners)
        self.observed_until = observed_until  # None: no detect stage to wait for
        self._observed_mark: float | None = None  # its value at the last look at the frame store
        self.error: BaseException | None = None
        self._frames: FrameStore | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._slots: asyncio.Semaphore | None = None
        self._reads = asyncio.Semaphore(_CONCURRENT_READS)
        self._probe = asyncio.Lock()  # held by the one span probing a failing captioner
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._interrupted = threading.Event()
        self._lock = threading.Lock()
        self._requested = 0  # wake-ups asked for by ingest ...
        self._seen = 0  # ... and how many the scheduler has acted on
        self._done: dict[int, float] = {}  # span index -> end of its node in memory
        self._pending: dict[int, float] = {}  # closed spans not captioned yet -> the end they must reach
        self._enqueued: set[int] = set()  # spans in the queue or being captioned
        self._backlog: collections.deque[_Job] = collections.deque()  # closed spans waiting for queue room
        self._contiguous = 0  # spans below this index are captioned whole
        self._audio_only = False  # the stream has sound and no frames: spans are closed by its audio

    # ----------------------------------------------------------------------------------- control (any thread)

    def start(self) -> CoarseBuilder:
        """Start the builder thread; returns once the spans already in memory are known."""
        if self._thread is not None:
            raise RuntimeError("builder already started")
        for listener in self.listeners:
            listener.on_start()
        self._thread = threading.Thread(target=self._run, name=f"memory-{self.stream}", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self.error is not None:
            raise self.error
        return self

    def on_commit(self, store: object = None, stats: IngestStats | None = None) -> None:
        """Ingest committed frames (the :class:`Ingestor` callback). Never blocks."""
        if stats is not None:
            self.stats.ingested_until = max(self.stats.ingested_until, stats.ingested_until)
        self._poke()

    def _poke(self) -> None:
        with self._lock:
            self._requested += 1
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop has ended (builder stopped or failed)
                pass

    @property
    def _up_to_date(self) -> bool:
        """The scheduler has looked at the frame store since the latest commit (so ``stats.pending`` is true)."""
        with self._lock:
            return self._seen >= self._requested

    def sync(self, timeout: float) -> bool:
        """Have the builder look at the frame store now, and wait (up to ``timeout``) until it has: then
        ``stats.pending`` counts every span closed so far (after a file's end, its last partial span too)."""
        self._poke()
        deadline = time.monotonic() + timeout
        while not self._up_to_date:
            if self._thread is None or not self._thread.is_alive() or time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    @property
    def caught_up(self) -> bool:
        """Every closed span the builder knows of is captioned, and it has looked at the latest commit."""
        return self._up_to_date and self.stats.pending == 0 and self.stats.in_flight == 0 and \
            all(listener.caught_up for listener in self.listeners)

    def drain(self, give_up_seconds: float | None = None, *, timeout: float | None = None,
              progress: Callable[[BuilderStats], None] | None = None, interval: float = 0.1) -> bool:
        """Wait until every closed span is captioned. Returns False early when the captioner has failed for
        ``give_up_seconds`` without a success (default ``memory.drain_give_up_seconds``) or ``timeout`` passes.
        Re-raises an unexpected error of the builder."""
        give_up = self.settings.memory.drain_give_up_seconds if give_up_seconds is None else give_up_seconds
        deadline = None if timeout is None else time.monotonic() + timeout
        self._poke()
        while True:
            if self.error is not None:
                raise self.error
            if progress is not None:
                progress(self.stats)
            if self.caught_up:
                return True
            down = self.stats.down_since is not None and self.stats.down_seconds >= give_up
            down = down or any(seconds is not None and seconds >= give_up
                               for seconds in (listener.down_seconds for listener in self.listeners))
            if down and self._up_to_date:  # (so that the spans left are counted right)
                return False
            if self._interrupted.is_set() or (deadline is not None and time.monotonic() >= deadline):
                return False
            if self._thread is None or not self._thread.is_alive():
                if self.error is not None:
                    raise self.error
                return False
            time.sleep(interval)

    def interrupt(self) -> None:
        """Make a running (or the next) :meth:`drain` return False at once (e.g. on SIGTERM)."""
        self._interrupted.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop: cancel captions in flight (their spans stay pending for the next run) and close the captioner."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("memory builder of %s did not stop within %.0f s", self.stream, timeout)
        for listener in self.listeners:
            listener.on_stop(timeout)

    def __enter__(self) -> CoarseBuilder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------------------------- the loop thread

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as err:  # noqa: BLE001  (kept for drain()/start() to re-raise in the caller)
            self.error = err
            # A full disk is the caller's to say, in its own words (`lucy ingest`'s one line, a stream's failed
            # state): the frame store's next write fails too, if the builder's error is not re-raised first.
            log.log(logging.INFO if is_disk_full(err) else logging.ERROR, "memory builder of %s failed: %r",
                    self.stream, err)
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        # Our own threads for clip reads, captioner CPU work and memory writes: the process-wide default pool
        # is small on few cores and shared with everything else.
        self._loop.set_default_executor(ThreadPoolExecutor(
            max_workers=min(64, 2 * self.workers + 4), thread_name_prefix=f"memory-{self.stream}"))
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        queue: asyncio.Queue[_Job] = asyncio.Queue(maxsize=self.settings.memory.queue_spans)
        try:
            await asyncio.to_thread(self._load_done)
            self._wake.set()  # look at the frame store at once (resume)
            self._ready.set()
            tasks = [asyncio.create_task(self._schedule(queue), name="schedule")]
            # Twice as many workers as describe() slots: while one worker waits for the captioner, another
            # reads its clip, so a slot never waits for frame-store or memory-store I/O.
            self._slots = asyncio.Semaphore(self.workers)
            self._reads = asyncio.Semaphore(_CONCURRENT_READS)
            self._probe = asyncio.Lock()
            tasks += [asyncio.create_task(self._worker(queue), name=f"caption-{i}") for i in range(2 * self.workers)]
            # The builder's own tasks run until it stops; a listener's task that returns is simply done.
            view = BuilderLoop(self.stream, self._slots, lambda: self._frames, self.stats.captioned_until)
            theirs = [asyncio.create_task(work, name=f"{type(listener).__name__}-{i}")
                      for listener in self.listeners for i, work in enumerate(listener.tasks(view))]
            stopper = asyncio.create_task(self._stop.wait())
            waiting: set[asyncio.Task[object]] = {*tasks, *theirs, stopper}
            while True:  # until the stop, a task of the builder's ends (it raised), or a listener's task raises
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if any(task not in theirs or task.cancelled() or task.exception() is not None for task in done):
                    break
            for task in [*tasks, *theirs]:
                task.cancel()
            await asyncio.gather(*tasks, *theirs, return_exceptions=True)
            stopper.cancel()
            for task in done:
                if task is not stopper and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        finally:
            self._loop = None
            try:
                await self.captioner.aclose()
            except Exception as err:  # noqa: BLE001  (closing must not hide the builder's own outcome)
                log.warning("closing captioner: %r", err)
            for listener in self.listeners:
                try:
                    await listener.aclose()
                except Exception as err:  # noqa: BLE001  (as for the captioner)
                    log.warning("closing %s: %r", type(listener).__name__, err)

    def _load_done(self) -> None:
        for node in self.memory.nodes(self.stream, level=self.level.value, origin=INGEST_ORIGIN):
            k = round(node.start / self.span_seconds)
            if abs(k * self.span_seconds - node.start) < _EPS:
                self._done[k] = max(self._done.get(k, 0.0), node.end)
        self.stats.coarse_nodes = len(self._done)
        self._advance_captioned_until()

    def _frame_view(self) -> _Grid | None:
        """The closed spans of the stream's committed frames (of its audio when it has sound and no frames); None
        before the first frame or sound."""
        if self._frames is None:
            try:
                self._frames = self.frame_stores.open(self.stream)
            except StoreError:
                return None  # not created yet: the first commit will wake the builder again
        info = self._frames.info()
        if self.observed_until is not None:  # read here, off the loop: it may be a store query
            self._observed_mark = self.observed_until()
        self._audio_only = info.last_time is None and info.audio_until > 0
        return _Grid.of(info, self.span_seconds)

    async def _schedule(self, queue: asyncio.Queue[_Job]) -> None:
        assert self._wake is not None
        while True:
            try:
                async with asyncio.timeout(self.poll_seconds):
                    await self._wake.wait()
            except TimeoutError:
                pass  # look anyway: the frame store may have grown without a notification
            self._wake.clear()
            with self._lock:
                requested = self._requested
            grid = await asyncio.to_thread(self._frame_view)
            if grid is not None:
                self.stats.ingested_until = max(self.stats.ingested_until, grid.media_end)
                self.stats.closed = grid.closed
                todo = grid.jobs(self._done, self._contiguous)
                self._pending = {job.k: job.end for job in todo}
                self.stats.pending = len(self._pending)
                ready = todo if self.observed_until is None else self._observed(todo)
                self._backlog = collections.deque(job for job in ready if job.k not in self._enqueued)
                self._fill(queue)
                if self.listeners and self._frames is not None:
                    spans = [Span(k, k * grid.t, grid.end_of(k)) for k in range(grid.closed)]
                    closed = ClosedSpans(self._frames, spans, grid.finished, grid.media_end)
                    for listener in self.listeners:
                        await listener.on_spans(closed)
            with self._lock:
                self._seen = max(self._seen, requested)

    def _observed(self, todo: list[_Job]) -> list[_Job]:
        """The spans of ``todo`` the detect stage has observed to their end (the others wait for it). A stream that
        was never observed (sound alone, or recorded before detection) waits for nothing."""
        until = self._observed_mark
        return todo if until is None else [job for job in todo if job.end <= until + _EPS]

    def _fill(self, queue: asyncio.Queue[_Job]) -> None:
        """Move spans from the backlog (closed, only in the frame store) into the bounded queue while it has room."""
        while self._backlog and not queue.full():
            job = self._backlog.popleft()
            if job.k not in self._enqueued:
                self._enqueued.add(job.k)
                queue.put_nowait(job)
        self.stats.queued = queue.qsize()

    async def _worker(self, queue: asyncio.Queue[_Job]) -> None:
        while True:
            job = await queue.get()
            self._fill(queue)
            stretched = job.stretch and await asyncio.to_thread(self._stretch, job)
            if not stretched:
                await self._caption(job)  # (its frames go with the call: an idle worker holds none)
            self._done[job.k] = max(self._done.get(job.k, 0.0), job.end)
            self._enqueued.discard(job.k)
            if self._done[job.k] >= self._pending.get(job.k, job.end) - _EPS:
                self._pending.pop(job.k, None)
            else:  # the stream ended while this span was captioned, and the span must now reach its end
                assert self._wake is not None
                self._wake.set()
            self.stats.pending = len(self._pending)
            self.stats.coarse_nodes = len(self._done)
            self._advance_captioned_until()

    async def _caption(self, job: _Job) -> None:
        """Caption the span from its frames, store its node and tell the listeners."""
        assert self._frames is not None
        async with self._reads:  # a few reads at a time, in span order: the first captions start at once
            clip = await asyncio.to_thread(self._frames.read, job.start, job.end, self.fps)
        if len(clip) == 0 and self._audio_only:  # nothing to caption: the span's transcript is its memory
            text, model = AUDIO_ONLY_TEXT.format(start=job.start, end=job.end), ""
        elif len(clip) == 0:  # a live stream's outage, or frames retention deleted: say nothing was seen
            gone = job.start < await asyncio.to_thread(self._frames.available_from)
            text, model = (EXPIRED_TEXT if gone else NO_VIDEO_TEXT).format(start=job.start, end=job.end), ""
        else:
            text, model = await self._describe(job, clip)
        node = MemoryNode(stream=self.stream, level=self.level.value, start=job.start, end=job.end,
                          text=text, instruction=self.instruction, origin=INGEST_ORIGIN, model=model)
        await asyncio.to_thread(self.memory.add, node)
        span = Span(job.k, job.start, job.end)
        assert self._slots is not None
        event = SpanCaptioned(span, node, self._slots, heard=lambda: self._heard(span))
        for listener in self.listeners:
            await listener.on_captioned(event)
        self.stats.captioned += 1
        self.stats.completions.tick()

    def _stretch(self, job: _Job) -> bool:
        """Move the end of the span's stored caption to ``job.end`` (no frame lies in between); False if the
        caption is not there after all (then the span is captioned again)."""
        for node in self.memory.nodes(self.stream, level=self.level.value, start=job.start,
                                      end=job.start + self.span_seconds, origin=INGEST_ORIGIN):
            if abs(node.start - job.start) < _EPS:
                self.memory.add(replace(node, end=job.end, id=None, created=0.0))
                return True
        return False

    async def _describe(self, job: _Job, clip: Clip) -> tuple[str, str]:
        """Caption one clip, retrying with exponential backoff until the captioner answers.

        While the captioner is failing, one span at a time probes it (the others wait), so a dead or
        recovering server gets one request per backoff step, not one per worker.
        """
        retries = Retries(self.stats, "captioner", self.stream, self.settings.memory)
        probing = False
        transcript = None
        if self.captioner.hears:  # what was said goes with the frames
            transcript = await self._heard(Span(job.k, job.start, job.end))
        # ... and what the detect stage saw in the span (None: no detector looked at it)
        observed = await asyncio.to_thread(read_observations, self.memory, self.stream, job.start, job.end) \
            if self.captioner.sees else None
        # ... and the span's frames at the stored rate, read on demand, to one that looks between the clip's frames
        stored = StoredSpan(self._frames, job.start, job.end) \
            if self.captioner.looks_between and self._frames is not None else None
        try:
            while True:
                if self.stats.down_since is not None and not probing:
                    await self._probe.acquire()
                    probing = True
                    if self.stats.down_since is None:  # it came back while this span waited
                        self._probe.release()
                        probing = False
                began = time.monotonic()
                caption, error = await self._try_describe(clip, transcript, observed, stored)
                if caption is not None:
                    self.stats.describe_seconds += time.monotonic() - began
                    retries.answered("; captioning the backlog")
                    return caption.text, caption.model or self.captioner.model
                await retries.failed(error, "caption", job.start, job.end)
        finally:
            if probing:
                self._probe.release()

    async def _heard(self, span: Span) -> str | None:
        """The span's transcript from the first listener that makes one (None: none does)."""
        for listener in self.listeners:
            said = await listener.transcript(span)
            if said is not None:
                return said
        return None

    async def _try_describe(self, clip: Clip, transcript: str | None = None, observed: SpanObservations | None = None,
                            stored: StoredSpan | None = None) -> tuple[Caption | None, str]:
        """One describe() call in a slot: (caption, "") or (None, why it failed)."""
        assert self._slots is not None
        async with self._slots:  # at most max_in_flight describe() calls at once
            self.stats.in_flight += 1
            try:
                heard = {name: value for name, value in (("transcript", transcript), ("observed", observed),
                                                         ("stored", stored)) if value is not None}
                async with asyncio.timeout(self.settings.memory.caption_timeout_seconds):
                    caption = await self.captioner.describe(clip, self.instruction, level=self.level, **heard)
                return caption, ""
            except (CaptionerError, TimeoutError) as err:
                return None, str(err) or type(err).__name__
            finally:
                self.stats.in_flight -= 1

    def _advance_captioned_until(self) -> None:
        # (spans below _contiguous are captioned whole; captions only ever grow)
        self._contiguous, self.stats.captioned_until = done_until(self._done, self.span_seconds, self._contiguous)
