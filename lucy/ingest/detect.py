"""The detect stage of ingest (Frigate's detect stream): objects on full-resolution frames, tracked, stored.

The decoder hands every frame the detect sampler keeps (``detect.fps``, default 2) to this stage *before* the frame
is shrunk for storage: small, distant people that a 640 x 360 stored frame loses are still there. The stage runs on
a thread of its own behind a bounded queue, so decoding keeps pace: a file waits for the detector (every sampled
frame is seen), a live source never waits — when the queue is full the oldest frame is dropped and counted.

Per frame (converted by the ingest writer to RGB at most ``detect.max_side`` on its long side): the detector finds
objects, the tracker (:mod:`lucy.perception.track`) follows them, and the counts in view and the
tracks that changed go to the :class:`lucy.perception.objects.ObservationStore` in batches, with the media time up
to which the stream has been observed (``observed_until``). A frame's counts are written once its tentative tracks
have become objects or been forgotten (:meth:`lucy.perception.track.Tracker.settled_counts`: someone walking in
counts from their first frame, a false detection never), so the mark stays a second or two behind the newest
frame detected. The coarse builder waits for that mark before it
captions a span, so memory is written from what was observed.

Resume and gaps follow the rules of frames: a resumed run goes on after the last stored frame (frames stored but
never observed — a crash between the two — are skipped, and the mark moves over them), track ids go on from the
highest stored, and a gap in a live source (a reconnect) ends every open track.

The stage's own error (a detector that fails) is raised by :meth:`DetectStage.close` and so by the ingest run; the
frames stored are kept.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lucy.config.settings import DetectSettings
from lucy.metrics.progress import DetectProgress
from lucy.perception.objects import CountSample, Detector, Observations, ObservationStore, TrackedObject
from lucy.perception.track import Tracker

log = logging.getLogger(__name__)

FLUSH_SECONDS = 1.0  # wall time between writes of observations (and at every gap and at the end)
_EWMA = 0.2  # weight of the newest frame in the time-per-frame average


@dataclass
class DetectStats:
    """The stage's live counters (:meth:`snapshot` freezes them for progress reports)."""

    offered: int = 0
    detected: int = 0
    dropped: int = 0  # frames of a live source dropped because the detector was behind
    objects: int = 0  # tracks that ended or were updated, as written
    seconds_per_frame: float = 0.0
    offered_until: float = 0.0  # media time of the newest frame handed to the stage
    observed_until: float = 0.0
    busy_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def snapshot(self) -> DetectProgress:
        return DetectProgress(frames_detected=self.detected, frames_dropped=self.dropped,
                              seconds_per_frame=self.seconds_per_frame, observed_until=self.observed_until,
                              lag=max(0.0, self.offered_until - self.observed_until), tracks=self.objects)


class DetectStage:
    """Detects and tracks objects in one stream's sampled frames, on its own thread (see the module).

    Use: :meth:`start` (after the stream's resume point is known), :meth:`offer` from the decoder, :meth:`gap` at a
    live source's gap, :meth:`close` at the end (drains, ends the open tracks, writes, raises the stage's error).
    """

    def __init__(self, settings: DetectSettings, stream: str, detector: Detector, store: ObservationStore, *,
                 live: bool, on_record: Callable[[float], None] | None = None) -> None:
        self.settings = settings
        self.stream = stream
        self.detector = detector
        self.store = store
        self.live = live
        self.on_record = on_record  # called with observed_until after each write (the builder's wake-up)
        self.stats = DetectStats()
        self.interval = 1.0 / settings.fps
        self._queue: queue.Queue[tuple[str, float, Any]] = queue.Queue(maxsize=settings.queue_frames)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._counts: list[CountSample] = []
        self._changed: dict[int, TrackedObject] = {}
        self._tracker: Tracker | None = None
        self._closed = threading.Event()
        self._written_until = -1.0  # the observed mark last written

    # ------------------------------------------------------------------------------------------- caller's side

    def start(self, resume_after: float | None) -> DetectStage:
        """Start the thread. ``resume_after``: the media time of the stream's last stored frame (None: a new
        stream); observation resumes there, and a mark left behind it (frames stored, never observed) moves to it."""
        observed = self.store.observed_until(self.stream)
        start = resume_after or 0.0
        if observed is None or observed < start:  # the mark exists from now on: the builder waits for it
            if observed is not None:
                log.warning("stream %s: frames %.1f-%.1f s were stored but never observed (detection skips them)",
                            self.stream, observed, start)
            self.store.record_observations(Observations(self.stream, start))
            observed = start
        self.stats.observed_until = self.stats.offered_until = observed
        self._tracker = Tracker(self.stream, self.settings, first_id=self.store.next_track_id(self.stream))
        self._thread = threading.Thread(target=self._run, name=f"detect-{self.stream}", daemon=True)
        self._thread.start()
        return self

    def offer(self, media_time: float, picture: np.ndarray) -> None:
        """Hand over one frame (H x W x 3 uint8 RGB). A file's frame waits for room; a live one drops the oldest
        queued frame when the detector is behind. Raises the stage's error."""
        self._raise()
        self.stats.offered += 1
        self.stats.offered_until = max(self.stats.offered_until, media_time)
        self._put(("frame", media_time, picture))

    def gap(self, media_time: float) -> None:
        """A live source lost its picture at ``media_time``: the open tracks end there."""
        self._raise()
        self._put(("gap", media_time, None))

    def close(self, until: float | None, timeout: float = 120.0) -> None:
        """End the stage: what is queued is detected first, the open tracks end, and the observed mark moves to
        ``until`` (the media end ingested; None: where detection got). Raises the stage's error."""
        if self._thread is None:
            return
        self._put(("end", until if until is not None else -1.0, None), closing=True)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("stream %s: the detect stage did not finish within %.0f s", self.stream, timeout)
        self._thread = None
        self._raise()

    def _put(self, item: tuple[str, float, Any], *, closing: bool = False) -> None:
        while True:
            if self._closed.is_set():
                return  # the thread has ended (its error is raised by the caller's next call)
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                if self.live and item[0] == "frame" and not closing:
                    try:
                        dropped = self._queue.get_nowait()
                    except queue.Empty:
                        continue
                    if dropped[0] == "frame":
                        self.stats.dropped += 1
                    else:  # never drop a gap: put it back in front of this frame
                        self._requeue_first(dropped)

    def _requeue_first(self, item: tuple[str, float, Any]) -> None:
        with self._queue.mutex:
            self._queue.queue.appendleft(item)
            self._queue.not_empty.notify()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    # ---------------------------------------------------------------------------------------- the stage's thread

    def _run(self) -> None:
        last_flush = time.monotonic()
        try:
            while True:
                try:
                    kind, media_time, picture = self._queue.get(timeout=FLUSH_SECONDS)
                except queue.Empty:
                    self._flush()
                    last_flush = time.monotonic()
                    continue
                if kind == "end":
                    self._finish(media_time if media_time >= 0 else None)
                    return
                if kind == "gap":
                    self._end_tracks(media_time)
                    self._flush()
                    last_flush = time.monotonic()
                    continue
                self._detect(media_time, picture)
                if time.monotonic() - last_flush >= FLUSH_SECONDS:
                    self._flush()
                    last_flush = time.monotonic()
        except BaseException as err:  # noqa: BLE001  (raised by the caller's next offer() or close())
            log.error("stream %s: detection failed: %s", self.stream, err)
            self._error = err
        finally:
            self._closed.set()

    def _detect(self, media_time: float, frame: np.ndarray) -> None:
        assert self._tracker is not None
        started = time.perf_counter()
        detections = self.detector.detect(frame)
        changed = self._tracker.update(media_time, detections, frame)
        for track in changed:
            self._changed[track.track_id] = track
        self._counts.extend(self._tracker.settled_counts())
        spent = time.perf_counter() - started
        s = self.stats
        s.detected += 1
        s.busy_seconds += spent
        s.seconds_per_frame = spent if s.detected == 1 else (1 - _EWMA) * s.seconds_per_frame + _EWMA * spent
        # observed up to the first frame whose counts wait for its tentative tracks (a second or two at most)
        pending = self._tracker.pending_since()
        until = media_time + self.interval if pending is None else min(media_time + self.interval, pending)
        s.observed_until = max(s.observed_until, until)


    def _end_tracks(self, media_time: float) -> None:
        assert self._tracker is not None
        for track in self._tracker.finish(media_time):
            self._changed[track.track_id] = track
        self._counts.extend(self._tracker.settled_counts())

    def _finish(self, until: float | None) -> None:
        self._end_tracks(self.stats.observed_until if until is None else until)
        if until is not None:
            self.stats.observed_until = max(self.stats.observed_until, until)
        self._flush()

    def _flush(self) -> None:
        if not self._counts and not self._changed and self._written_until == self.stats.observed_until:
            return
        observations = Observations(self.stream, self.stats.observed_until, tuple(self._counts),
                                    tuple(self._changed.values()))
        self.store.record_observations(observations)
        self.stats.objects += len(self._changed)
        self._counts.clear()
        self._changed.clear()
        self._written_until = self.stats.observed_until
        if self.on_record is not None:
            self.on_record(self.stats.observed_until)
