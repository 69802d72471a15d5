"""Ingest: source -> sampler -> frame store, with progress and commit notifications.

Two threads: the decoder thread pulls frames from the source (FFmpeg decodes with its own threads) and keeps
those the sampler wants; the writer (the caller's thread) resizes them, writes them to the store and commits
them in batches. A bounded queue between the two keeps memory flat.

Sound (16 kHz mono, already resampled by the source) travels the same queue and is committed with the frames
(:class:`_SoundBuffer`): what a resumed run decodes again, or a rewinding decoder repeats, is dropped, so the
stored audio never overlaps itself. A source without pictures creates its stream at its first sound.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lucy.config import LucySettings
from lucy.errors import StoreError
from lucy.ingest.detect import DetectStage
from lucy.ingest.frames import AUDIO_RATE, FrameStore, FrameStores, Gap
from lucy.ingest.lock import FileLock, Holder, stream_lock
from lucy.ingest.recording import SegmentWriter
from lucy.ingest.sampler import Sampler, fit_size
from lucy.ingest.segments import recordings_dir
from lucy.ingest.source import AudioChunk, Frame, Source, open_source
from lucy.metrics.progress import IngestProgress
from lucy.perception.objects import Detector, ObservationStore

log = logging.getLogger(__name__)

_QUEUE_FRAMES = 16
_EARLY_SOUND_SECONDS = 10.0  # sound kept while a stream with pictures waits for its first one
LOCK_WAIT_SECONDS = 0.5  # rides over a server's probe of the lock (lucy.ingest.lock.probe), never a writer
_DONE = object()


@dataclass(frozen=True, slots=True)
class _ToDetect:
    """A decoded frame the detect sampler keeps (and the frame sampler too, when ``store``)."""

    frame: Frame
    store: bool


@dataclass
class IngestStats:
    """Live counters of one ingest run, written by the ingestor; readers take a :meth:`snapshot`."""

    stream: str
    started: float = field(default_factory=time.monotonic)
    frames_decoded: int = 0
    frames_stored: int = 0  # by this run
    committed: int = 0  # in the store, all runs
    media_start: float | None = None  # media time where this run began
    ingested_until: float = 0.0  # media time covered by committed frames
    decode_errors: int = 0
    reconnects: int = 0
    gaps: int = 0
    audio_seconds: float = 0.0  # sound stored by this run
    audio_until: float = 0.0  # media time up to which sound is committed (all runs)
    down: bool = False  # the live source dropped and is being reconnected now

    @property
    def wall_seconds(self) -> float:
        return time.monotonic() - self.started

    @property
    def decode_fps(self) -> float:
        return self.frames_decoded / max(self.wall_seconds, 1e-9)

    @property
    def realtime_factor(self) -> float:
        """Media seconds ingested per wall second by this run."""
        media = self.ingested_until - (self.media_start or 0.0)
        return media / max(self.wall_seconds, 1e-9)

    def snapshot(self) -> IngestProgress:
        """These figures, frozen (rates as of now), for :class:`lucy.metrics.progress.StreamProgress`."""
        return IngestProgress(
            frames_decoded=self.frames_decoded, frames_stored=self.frames_stored, committed=self.committed,
            media_start=self.media_start, ingested_until=self.ingested_until, decode_fps=self.decode_fps,
            realtime_factor=self.realtime_factor, decode_errors=self.decode_errors, reconnects=self.reconnects,
            gaps=self.gaps, audio_seconds=self.audio_seconds, audio_until=self.audio_until, down=self.down)


@dataclass(frozen=True)
class IngestResult:
    stream: str
    frames: int  # committed in the store
    new_frames: int  # stored by this run
    media_seconds: float
    wall_seconds: float
    complete: bool
    lost: str | None
    decode_errors: int
    reconnects: int
    audio_seconds: float = 0.0  # sound in the store (all runs; 0 for a stream without sound)


class _SoundBuffer:
    """Sound waiting for the next commit, as contiguous stretches ``[start, samples]``. Anything before what is
    stored or buffered already (a resumed file decodes a little again; a rewind repeats some) is cut off."""

    def __init__(self, stored_until: float | None) -> None:
        self.stretches: list[tuple[float, list[np.ndarray]]] = []
        self.end = stored_until  # media time after the last sample kept
        self.samples = 0  # buffered

    def add(self, chunk: AudioChunk) -> None:
        start, samples = chunk.time, chunk.samples
        if self.end is not None:
            late = round((self.end - start) * AUDIO_RATE)
            if late > 0:
                samples, start = samples[late:], start + late / AUDIO_RATE
            if abs(start - self.end) <= 1.5 / AUDIO_RATE:
                start = self.end  # contiguous: keep the stored sample grid
        if not len(samples):
            return
        if self.stretches and start == self.end:
            self.stretches[-1][1].append(samples)
        else:
            self.stretches.append((start, [samples]))
        self.end = start + len(samples) / AUDIO_RATE
        self.samples += len(samples)

    def keep_newest(self, seconds: float) -> None:
        """Drop the oldest buffered sound beyond ``seconds`` (sound that waits for a first picture that may never
        come must not fill the memory)."""
        excess = self.samples - round(seconds * AUDIO_RATE)
        while excess > 0 and self.stretches:
            start, parts = self.stretches[0]
            cut = min(excess, len(parts[0]))
            parts[0] = parts[0][cut:]
            self.stretches[0] = (start + cut / AUDIO_RATE, parts)
            if not len(parts[0]):
                parts.pop(0)
                if not parts:
                    self.stretches.pop(0)
            self.samples -= cut
            excess -= cut

    def take(self) -> list[tuple[float, np.ndarray]]:
        out = [(start, np.concatenate(parts)) for start, parts in self.stretches]
        self.stretches, self.samples = [], 0
        return out


class Ingestor:
    """Runs one source into one stream of a data directory. :meth:`run` blocks; :meth:`stop` ends it."""

    def __init__(self, settings: LucySettings, source: str, stream: str, *, realtime: bool = False,
                 on_commit: Callable[[FrameStore, IngestStats], None] | None = None,
                 holder: Holder | None = None, frames: FrameStores, detector: Detector | None = None,
                 observations: ObservationStore | None = None,
                 on_observed: Callable[[float], None] | None = None) -> None:
        self.settings = settings
        self.frames = frames
        self.spec = source
        self.stream = stream
        self.holder = holder  # who the stream's writer lock names (default: this process)
        self.realtime = realtime
        self.on_commit = on_commit
        self.stats = IngestStats(stream)
        self.store: FrameStore | None = None
        self._source: Source | None = None
        self._stopping = threading.Event()
        # The detect stage (lucy.ingest.detect) runs when a detector and a store for its observations are given.
        self.detector = detector if observations is not None else None
        self.observations = observations
        self.on_observed = on_observed
        self.detect: DetectStage | None = None
        self._lock: FileLock | None = None  # the stream's writer lock, while :meth:`run` holds it
        self._told: dict[str, bool] | None = None  # what the lock's record says the writer is doing
        self.recording: SegmentWriter | None = None  # a live source's recorder, with recording.enabled

    def stop(self) -> None:
        self._stopping.set()
        if self._source is not None:
            self._source.stop()

    def _open(self) -> tuple[Source, float]:
        resume_after = wall_start = None
        fps = self.settings.levels.finest_fps
        if self.frames.exists(self.stream):
            self.store = self.frames.open_writer(self.stream)
            held = self.store.info()
            if not self.store.holds_source(self.spec):
                raise StoreError(f"stream {self.stream!r} already holds another source "
                                 f"({held.source}); choose another --stream name")
            resume_after, wall_start = held.last_time, held.wall_start
            fps = held.stored_fps  # a stream keeps the rate it was created with
        # The roots are checked again here, not only by the API: a playlist may have changed since.
        source = open_source(self.spec, self.settings.ingest, resume_after=resume_after,
                             wall_start=wall_start, realtime=self.realtime,
                             allowed_roots=self.settings.service.allowed_source_roots)
        if self.store is not None and self.store.has_audio():
            source.resume_audio_after(self.store.audio_until())
        if source.live and self.settings.recording.enabled:  # a file is its own recording
            self.recording = SegmentWriter(recordings_dir(self.settings.data, self.stream),
                                           self.settings.recording.segment_seconds, source.description)
            source.record_to(self.recording)
        return source, fps

    def run(self) -> IngestResult:
        """Ingest until the source ends or :meth:`stop`, as the stream's one writer: the stream's lock is held
        for the whole run, from before its store is created or resumed (a second writer fails at once with
        :class:`lucy.ingest.lock.LockHeld`)."""
        with stream_lock(self.settings.data, self.stream, self.holder).acquire(LOCK_WAIT_SECONDS) as lock:
            self._lock = lock
            try:
                return self._run()
            finally:
                self._lock = None

    def _tell(self, source: Source) -> bool:
        """Say in the writer lock's record what this writer is doing, when that changes (a live source or a paced
        file, down and being reconnected): other processes read it to tell the stream's state (``lucy streams``,
        a server's status and MQTT). Returns whether it changed."""
        down = bool(getattr(source, "down", False))  # a source made elsewhere (tests, a cluster) may not say
        self.stats.down = down
        facts = {"live": bool(source.live), "paced": self.realtime, "down": down}
        if self._lock is None or facts == self._told:
            return False
        self._told = facts
        self._lock.tell(**facts)
        return True

    def _run(self) -> IngestResult:
        source, fps = self._open()
        if self.settings.ingest.skip_non_reference_frames:
            source.skip_unneeded_frames(fps if self.detector is None else max(fps, self.settings.detect.fps))
        self._source = source
        if self._stopping.is_set():
            source.stop()
        stats = self.stats
        if self.store is not None:
            stats.committed = self.store.committed()
            stats.audio_until = self.store.audio_until()
            # A stream of sound alone has ingested what its sound covers.
            stats.ingested_until = self.store.info().media_seconds if stats.committed else stats.audio_until
            stats.media_start = stats.ingested_until
        resume_after = None if self.store is None else self.store.info().last_time
        sampler = Sampler(fps, after=resume_after)
        detect_sampler = None
        if self.detector is not None and self.observations is not None and source.has_video:
            self.detect = DetectStage(self.settings.detect, self.stream, self.detector, self.observations,
                                      live=source.live, on_record=self.on_observed).start(resume_after)
            detect_sampler = Sampler(self.settings.detect.fps, after=resume_after)
        items: queue.Queue[object] = queue.Queue(maxsize=_QUEUE_FRAMES)
        writer_done = threading.Event()  # set once nobody takes items any more (the writer returned or raised)
        decoder = threading.Thread(target=self._decode, args=(source, sampler, items, writer_done, detect_sampler),
                                   name=f"decode-{self.stream}", daemon=True)
        decoder.start()
        written = False
        try:
            self._write(source, fps, items)
            written = True
        finally:
            writer_done.set()
            source.stop()
            decoder.join(timeout=30)
            if self.recording is not None:
                self.recording.close()
            if self.detect is not None:
                self._close_detect(None if source.live else stats.ingested_until, raise_error=written)
        if self.store is not None and not source.live:
            self.store.mark_finished(complete=source.complete, lost=source.lost)
        info = self.store.info() if self.store is not None else None
        return IngestResult(
            stream=self.stream, frames=info.frames if info else 0, new_frames=stats.frames_stored,
            media_seconds=info.media_seconds if info else 0.0, wall_seconds=stats.wall_seconds,
            complete=source.complete, lost=source.lost, decode_errors=source.decode_errors,
            reconnects=source.reconnects,
            audio_seconds=self.store.audio_seconds() if self.store is not None else 0.0)

    def _offer(self, frame: Frame) -> None:
        """Hand a frame to the detect stage, as RGB at most ``detect.max_side`` on its long side."""
        assert self.detect is not None
        side = self.settings.detect.max_side
        width, height = fit_size(frame.video.width, frame.video.height, side, side)
        self.detect.offer(frame.time, frame.video.to_ndarray(format="rgb24", width=width, height=height))

    def _close_detect(self, until: float | None, *, raise_error: bool) -> None:
        """End the detect stage: a file is observed up to what was ingested. Its error is raised unless the run
        already fails with another (that one is the run's error; this one is logged)."""
        assert self.detect is not None
        try:
            self.detect.close(until)
        except Exception as err:
            if raise_error:
                raise
            log.error("stream %s: the detect stage also failed: %s", self.stream, err)

    def _decode(self, source: Source, sampler: Sampler, items: queue.Queue[object],
                writer_done: threading.Event, detect_sampler: Sampler | None = None) -> None:
        def hand_over(item: object) -> bool:
            # A plain put() would block forever on a full queue once the writer is gone (Ctrl-C, a store error),
            # and run() would then wait out the join timeout.
            while not writer_done.is_set():
                try:
                    items.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    pass
            return False

        try:
            for item in source.frames():
                if isinstance(item, Frame):
                    self.stats.frames_decoded += 1
                    stored = sampler.keep(item.time)
                    if detect_sampler is not None and detect_sampler.keep(item.time):
                        item = _ToDetect(item, stored)
                    elif not stored:
                        continue
                if not hand_over(item):
                    return
        except BaseException as err:  # noqa: BLE001  (handed to the writer, which re-raises it in the caller's thread)
            hand_over(err)
        finally:
            hand_over(_DONE)

    def _write(self, source: Source, fps: float, items: queue.Queue[object]) -> None:
        s = self.settings.ingest
        times: list[float] = []
        frames: list[np.ndarray] = []
        size: tuple[int, int] | None = None
        if self.store is not None:
            info = self.store.info()
            size = (info.width, info.height)
        sound = _SoundBuffer(self.store.audio_until() if self.store is not None and self.store.has_audio() else None)
        last_commit = time.monotonic()

        def create(width: int, height: int) -> None:
            self.store = self.frames.create(
                self.stream, source=self.spec, live=source.live, width=width, height=height, stored_fps=fps,
                codec=s.codec, quality=s.jpeg_quality, audio=source.has_audio)

        def commit() -> None:
            nonlocal last_commit
            last_commit = time.monotonic()
            told = self._tell(source)  # at least every commit_every_seconds, frames or not
            if self.store is None or not (times or sound.samples):
                if told and self.store is not None and self.on_commit is not None:
                    self.on_commit(self.store, self.stats)  # the source went down or came back: observers hear it
                return  # sound that comes before the first picture waits for the stream to be created
            if source.live and getattr(source, "wall_start", None) is not None:
                self.store.set_wall_start(source.wall_start)  # type: ignore[attr-defined]
            if times:
                self.stats.committed = self.store.append(np.stack(frames), np.asarray(times))
                self.stats.frames_stored += len(times)
                self.stats.ingested_until = times[-1] + 1.0 / fps
                times.clear()
                frames.clear()
            for start, samples in sound.take():
                self.stats.audio_until = self.store.append_audio(samples, start)
                self.stats.audio_seconds += len(samples) / AUDIO_RATE
            if not source.has_video:  # a stream of sound alone: its sound is what is ingested
                self.stats.ingested_until = self.stats.audio_until
            if self.on_commit is not None:
                self.on_commit(self.store, self.stats)

        while True:
            try:
                item = items.get(timeout=max(0.05, s.commit_every_seconds - (time.monotonic() - last_commit)))
            except queue.Empty:
                commit()
                continue
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                commit()
                raise item
            if isinstance(item, Gap):
                commit()
                assert self.store is not None
                self.store.add_gap(item)
                if self.detect is not None:
                    self.detect.gap(item.start)
                self.stats.gaps += 1
                self.stats.reconnects = source.reconnects
                continue
            if isinstance(item, AudioChunk):
                if self.store is None and not source.has_video:
                    size = (0, 0)
                    create(0, 0)
                sound.add(item)
                if self.store is None:
                    sound.keep_newest(_EARLY_SOUND_SECONDS)
                if self.stats.media_start is None and not source.has_video:
                    self.stats.media_start = item.time
                if time.monotonic() - last_commit >= s.commit_every_seconds:
                    commit()
                continue
            if isinstance(item, _ToDetect):
                # The full-resolution picture, before it is shrunk: converted here, in the thread that converts the
                # stored frames, because two conversions of one decoded frame at once (each thread with its own
                # swscale context) could deadlock in FFmpeg or crash.
                try:
                    self._offer(item.frame)
                except BaseException:  # the detect stage failed: what was decoded is stored first, as for a source
                    commit()
                    raise
                if not item.store:
                    continue
                item = item.frame
            assert isinstance(item, Frame)
            if size is None:
                size = fit_size(item.video.width, item.video.height, s.frame_width, s.frame_height)
                create(*size)
            if self.stats.media_start is None:
                self.stats.media_start = item.time
            frames.append(item.video.to_ndarray(format="rgb24", width=size[0], height=size[1]))
            times.append(item.time)
            self.stats.decode_errors = source.decode_errors
            if len(times) >= s.commit_every_frames or time.monotonic() - last_commit >= s.commit_every_seconds:
                commit()
        commit()
        self.stats.decode_errors = source.decode_errors
        self.stats.reconnects = source.reconnects
