"""The stream manager: several streams ingesting at once, each in a worker process with its caption builder.

Each stream's recording (:class:`lucy.recorder.StreamRecorder`: its ingestor and coarse caption builder) runs in a
process of its own (:mod:`lucy.runtime.worker`) at a lower scheduling priority (``service.ingest_nice``,
``service.ingest_sched_idle``), so that questions, answered in the server's process at normal priority, stay
fast while streams ingest at full speed on a small machine. A thread of the server reads each worker's typed
reports (:mod:`lucy.runtime.messages`): its progress record, the memory nodes it stores (for MQTT and the
dashboard), its captioner requests (for the metrics).

States (:class:`lucy.runtime.messages.StreamState`): ``starting`` (opening the source) -> ``recording`` (frames
arriving from a live source or a realtime file) or ``catching_up`` (a file read faster than real time) <->
``reconnecting`` (a live source stopped delivering; it reconnects with backoff) -> ``finished`` (a file was read to
its end), ``stopped`` (by ``DELETE`` or server shutdown) or ``failed`` (with a redacted error). A stream only stored
in the data directory reads as its store and its writer lock tell (``recording`` / ``catching_up`` while
``lucy ingest`` writes it). The list of streams is kept in the data
directory (:mod:`lucy.runtime.registry`); streams in it are resumed when the server starts again. A worker that
dies without ending its run (killed by the OS, crashed in native code) is restarted with backoff (``restarts``);
the stream's writer lock (:mod:`lucy.ingest.lock`) keeps any other writer out meanwhile.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lucy.config import CAPTIONER_BACKENDS, PRESETS, LucySettings
from lucy.config.settings import RetentionSettings
from lucy.errors import InvalidStream, SourceError, StoreError, StreamConflict, StreamNotFound
from lucy.ingest import FrameStores, check_stream_name
from lucy.ingest.lock import LockHeld, probe, stream_lock
from lucy.ingest.roots import check_local_source
from lucy.ingest.segments import delete_recordings
from lucy.memory.store import MemoryStore
from lucy.metrics import CaptionCall, CaptionCallStats, QuestionStats, StreamProgress, StreamSample
from lucy.redaction import redact_source, redact_url
from lucy.runtime.events import EventBus, NodeAnnouncer
from lucy.runtime.messages import BusEvent, RunEnd, StateChange, StreamState, WorkerExit
from lucy.runtime.protocol import RetentionAges, StoreOpener, StreamRuntime
from lucy.runtime.registry import StreamRegistry, StreamSpec
from lucy.runtime.status import history_point, stored_captions, stored_progress, stored_stream_state, stream_status
from lucy.runtime.worker_process import WorkerProcess

log = logging.getLogger(__name__)

MAX_SOURCE_CHARS = 4096
ORPHAN_WAIT_SECONDS = 30.0  # for the stream worker of a killed server to notice and end
SETTLE_SECONDS = 10.0  # for the worker of a run that has ended to close its stores and exit (ManagedStream.settle)
_ENDED = frozenset({StreamState.FINISHED, StreamState.STOPPED, StreamState.FAILED})

def stream_settings(settings: LucySettings, spec: StreamSpec) -> LucySettings:
    """The server's settings with a stream's own preset, captioner, retention ages and recording (validated: a
    stream's keep_seconds below its full_seconds is refused with :class:`InvalidStream`)."""
    captioner = settings.captioner.model_copy(update={"backend": spec.captioner})
    retention = settings.retention
    ages = {k: v for k, v in (("full_seconds", spec.retention_full_seconds),
                              ("keep_seconds", spec.retention_keep_seconds)) if v is not None}
    if ages:
        try:
            retention = RetentionSettings.model_validate({**retention.model_dump(), **ages})
        except ValidationError as err:
            problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())
            raise InvalidStream(f"stream {spec.name!r}: {problems}") from None
    recording = settings.recording
    if spec.recording is not None:
        recording = recording.model_copy(update={"enabled": spec.recording})
    return settings.model_copy(update={"preset": spec.preset, "captioner": captioner, "retention": retention,
                                       "recording": recording})


class ManagedStream:
    """One stream the server ingests (or did): its worker, state and figures."""

    worker_type: type = WorkerProcess  # what runs the stream's recording (a cluster follows an owner actor instead)

    def __init__(self, spec: StreamSpec, settings: LucySettings, memory: MemoryStore, bus: EventBus,
                 frames: FrameStores, worker_args: tuple[Any, ...] = ()) -> None:
        self.spec = spec
        self.worker_args = worker_args  # what worker_type takes after (spec, settings): a local worker's store opener
        self.name = spec.name
        self.settings = stream_settings(settings, spec)
        self.memory = memory
        self.frames = frames
        self.bus = bus
        self.caption_calls = CaptionCallStats()
        self.questions = QuestionStats()
        self.progress = StreamProgress()  # as the worker last reported it
        self.error: str | None = None
        self.lost: str | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._state = StreamState.STOPPED
        self.restarts = 0  # workers restarted after dying without ending their run
        self._worker: WorkerProcess | None = None
        self._running_worker: WorkerProcess | None = None  # the worker whose process runs now
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._last_decoded = (0, time.monotonic())  # (frames decoded, when that count last changed)
        self.history: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=settings.service.history_points)

    @property
    def live(self) -> bool | None:
        return self.progress.live

    # ------------------------------------------------------------------------------------ lifecycle

    @property
    def active(self) -> bool:
        """The stream's worker is running (ingesting, or captioning what it ingested)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.active:
            raise StreamConflict(f"stream {self.name!r} is already running")
        self.error = self.lost = None
        self.progress = StreamProgress()
        self.started_at, self.ended_at = time.time(), None
        self._state = StreamState.STARTING
        self._last_decoded = (0, time.monotonic())
        self._stopping.clear()
        self._worker = self.worker_type(self.spec, self.settings, *self.worker_args)
        self._thread = threading.Thread(target=self._follow, args=(self._worker,), name=f"stream-{self.name}",
                                        daemon=True)
        self._thread.start()

    def settle(self, timeout: float = SETTLE_SECONDS) -> None:
        """Wait (up to ``timeout``) for the worker of a run that has ended (finished, stopped, failed) to exit:
        its state is shown as soon as the run ends, and the worker closes its stores after that."""
        thread = self._thread
        if thread is not None and thread.is_alive() and self._state in _ENDED:
            thread.join(timeout)

    def refuse(self, error: str) -> None:
        """Mark the stream failed without starting it (its writer lock is held elsewhere)."""
        self.error, self.ended_at = error, time.time()
        self._state = StreamState.FAILED
        self._publish_status()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop ingesting and captioning (blocks up to ``timeout``; call from a worker thread in async code)."""
        self.ask_stop()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive() and self._worker is not None:
                log.warning("stream %s did not stop within %.0f s; ending its worker", self.name, timeout)
                self._worker.kill()
                self._thread.join(10)

    def ask_stop(self) -> None:
        """Tell the worker to stop, without waiting (a worker waiting to be restarted is not)."""
        self._stopping.set()
        if self._worker is not None:
            self._worker.stop()

    def _follow(self, worker: WorkerProcess) -> None:
        """Apply the worker's reports until its run ends. A worker that dies without ending its run (killed by
        the OS, crashed in native code) is restarted with backoff, as Frigate's watchdog restarts a dead
        decoder; one that ended its run (finished, stopped, failed) is not, nor one asked to stop."""
        service = self.settings.service
        backoff = RestartBackoff(service.worker_restart_initial_seconds, service.worker_restart_max_seconds)
        while True:
            began = time.monotonic()
            end, exitcode = self._run_worker(worker)
            if end is None and self._stopping.is_set():
                end = RunEnd(StreamState.STOPPED)  # ended while stopping: killed by stop() after its timeout
            if end is not None:
                break
            delay = backoff.next(ran_seconds=time.monotonic() - began)
            self.error = f"the stream's worker process died (exit code {exitcode}); restarting it in {delay:g} s"
            log.warning("stream %s: its worker process died (exit code %s); restarting it in %g s",
                        self.name, exitcode, delay)
            self._state = StreamState.STARTING
            self._publish_status()
            if self._stopping.wait(delay):
                end = RunEnd(StreamState.STOPPED)
                break
            self.restarts += 1
            self.error = None
            self._last_decoded = (0, time.monotonic())
            worker = self._worker = self.worker_type(self.spec, self.settings, *self.worker_args)
            log.info("stream %s: worker restarted (restart %d)", self.name, self.restarts)
        self.error, self.lost = end.error, end.lost
        self.ended_at = time.time()
        self._state = end.state
        self._publish_status()

    def _run_worker(self, worker: WorkerProcess) -> tuple[RunEnd | None, int | None]:
        """Run one worker to its exit: how its run ended (None if it died without saying) and its exit code."""
        end: RunEnd | None = None
        exitcode: int | None = None
        stop_sent = False
        self._running_worker = worker
        try:
            for message in worker.messages():
                if self._stopping.is_set() and not stop_sent:  # a stop asked before this worker's pipe was up
                    worker.stop()
                    stop_sent = True
                match message:
                    case StreamProgress():
                        self.progress = message
                    case BusEvent(event=event):
                        self.bus.publish(event)
                    case CaptionCall():
                        self.caption_calls.on_caption_call(message)
                    case StateChange(state=state):
                        self._state = state
                        self._publish_status()
                    case RunEnd():
                        end = message
                    case WorkerExit(exitcode=code):
                        exitcode = code
        except Exception as err:  # a bug: keep the traceback in the log, show one line to clients
            log.exception("stream %s: lost its worker", self.name)
            end = RunEnd(StreamState.FAILED, error=redact_source(f"{type(err).__name__}: {err}", self.spec.source))
        finally:
            self._running_worker = None
        return end, exitcode

    def _publish_status(self) -> None:
        self.bus.publish({"type": "status", "stream": self.name, "status": self.status()})

    # ------------------------------------------------------------------------------------ figures

    @property
    def state(self) -> StreamState:
        state = self._state
        if state in (StreamState.RECORDING, StreamState.RECONNECTING) and self.live and self.active:
            decoded, since = self._last_decoded
            now = time.monotonic()
            if self.progress.ingest.down:  # the source said it dropped (the worker reports that at once)
                state = StreamState.RECONNECTING
            elif self.progress.ingest.frames_decoded != decoded:
                self._last_decoded = (self.progress.ingest.frames_decoded, now)
                state = StreamState.RECORDING
            elif now - since > self._stall_seconds():  # frames stopped before the source noticed (a read timeout)
                state = StreamState.RECONNECTING
            self._state = state
        if state is StreamState.RECORDING and self.live is False and not self.spec.realtime:
            return StreamState.CATCHING_UP  # a file read as fast as the machine goes, not at its own pace
        return state

    def _stall_seconds(self) -> float:
        ingest = self.settings.ingest
        return max(5.0, 3 * ingest.commit_every_seconds)

    def shown_progress(self) -> StreamProgress:
        """The worker's latest record, completed from the stores where the worker has nothing to tell: the media
        stored before this run's first commit, and the captions of a stream that no builder captions now."""
        progress = self.progress
        if not progress.ingest.started:
            try:
                stored = self.frames.open(self.name).info().media_seconds
            except StoreError:
                stored = 0.0
            progress = replace(progress, ingest=replace(progress.ingest, ingested_until=stored))
        if progress.caption is None:
            progress = replace(progress, caption=stored_captions(self.memory, self.name))
        return progress

    def status(self) -> dict[str, Any]:
        """What ``GET /v1/streams/{name}`` shows (and MQTT, and the dashboard)."""
        worker = self._running_worker
        return stream_status(self.name, self.spec.source, self.shown_progress(), self.questions, spec=self.spec,
                             state=self.state, error=self.error, lost=self.lost, started_at=self.started_at,
                             ended_at=self.ended_at, worker_pid=worker.pid if worker is not None else None,
                             restarts=self.restarts)

    def figures(self) -> StreamSample:
        """What the metrics exporter reads (the worker's record as it came)."""
        worker = self._running_worker
        return StreamSample(self.name, self.state.value, self.progress, self.caption_calls, self.questions,
                            worker_restarts=self.restarts, worker_pid=worker.pid if worker is not None else None)

    def sample(self) -> dict[str, Any]:
        """Append the current status to the stream's history (for the dashboard's charts)."""
        point = history_point(self.status())
        self.history.append(point)
        return point


class RestartBackoff:
    """Waits before restarting a dead worker: ``initial`` doubling up to ``maximum``; a worker that ran at least
    ``maximum`` seconds before dying was healthy, and the next wait is ``initial`` again."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial, self.maximum = initial, max(initial, maximum)
        self._next = initial

    def next(self, *, ran_seconds: float) -> float:
        if ran_seconds >= self.maximum:
            self._next = self.initial
        delay, self._next = self._next, min(2 * self._next, self.maximum)
        return delay


class StreamManager(StreamRuntime):
    """All streams of one server. Thread-safe; blocking methods are meant for worker threads."""

    stream_type: type[ManagedStream] = ManagedStream

    def __init__(self, settings: LucySettings, memory: MemoryStore, bus: EventBus, *,
                 frames: FrameStores, worker_stores: StoreOpener | None = None) -> None:
        """``worker_stores`` opens each worker process's own stores (:func:`lucy.wiring.open_worker_stores`;
        needed once a stream is started)."""
        self.settings = settings
        self.memory = memory
        self.frames = frames
        self.worker_stores = worker_stores
        self.bus = bus
        self.registry = StreamRegistry(settings.data)
        self._lock = threading.Lock()
        self._streams: dict[str, ManagedStream] = {}
        self.questions: dict[str, QuestionStats] = {}  # of streams the server does not ingest
        self.caption_calls: dict[str, CaptionCallStats] = {}
        self._announcing = False

    def _worker_args(self) -> tuple[Any, ...]:
        if self.worker_stores is None:
            raise TypeError("StreamManager needs worker_stores to start a stream (lucy.wiring.open_worker_stores)")
        return (self.worker_stores,)

    # ------------------------------------------------------------------------------------ lookup

    def get(self, name: str) -> ManagedStream | None:
        with self._lock:
            return self._streams.get(name)

    def managed(self) -> list[ManagedStream]:
        with self._lock:
            return list(self._streams.values())

    def names(self) -> list[str]:
        """Every stream of the data directory: the ones this server runs and the ones only stored."""
        with self._lock:
            managed = set(self._streams)
        return sorted(managed | set(self.frames.names()))

    def recorded(self) -> set[str]:
        """The streams this server records: those it runs and those of its stream list (not resumed, or not yet).
        Retention touches these alone; a stream only stored in the data directory (``lucy ingest``'s, or one
        removed from the server) is left as it is. An unreadable stream list counts as empty (said in the log)."""
        with self._lock:
            names = set(self._streams)
        try:
            names.update(spec.name for spec in self.registry.load())
        except StoreError as err:
            log.warning("%s", err)
        return names

    def require(self, name: str) -> str:
        """``name`` if such a stream exists (:class:`InvalidStream` for a bad name, :class:`StreamNotFound` for an
        unknown one)."""
        try:
            check_stream_name(name)
        except StoreError as err:
            raise InvalidStream(str(err)) from None
        if self.get(name) is None and not self.frames.exists(name):
            raise StreamNotFound(f"no stream named {name!r}")
        return name

    def settings_for(self, name: str) -> LucySettings:
        """The settings a stream runs with (its own preset, captioner and retention ages), or the server's for a
        stream that is only stored in the data directory."""
        stream = self.get(name)
        return stream.settings if stream is not None else self.settings

    def question_stats(self, name: str) -> QuestionStats:
        stream = self.get(name)
        if stream is not None:
            return stream.questions
        with self._lock:
            return self.questions.setdefault(name, QuestionStats())

    def caption_stats(self, name: str) -> CaptionCallStats:
        stream = self.get(name)
        if stream is not None:
            return stream.caption_calls
        with self._lock:
            return self.caption_calls.setdefault(name, CaptionCallStats())

    def status(self, name: str) -> dict[str, Any]:
        stream = self.get(name)
        if stream is not None:
            return stream.status()
        return self._stored_status(name)

    def _stored_status(self, name: str) -> dict[str, Any]:
        """A stream that is only in the data directory (ingested by `lucy ingest`, or deleted from the server)."""
        try:
            info = self.frames.open(name).info()
        except StoreError:
            raise StreamNotFound(f"no stream named {name!r}") from None
        return stream_status(name, info.source, stored_progress(info, self.memory), self.question_stats(name),
                             state=stored_stream_state(self.settings.data, info), lost=info.lost)

    def statuses(self) -> list[dict[str, Any]]:
        rows = []
        for name in self.names():
            try:
                rows.append(self.status(name))
            except StreamNotFound:
                continue  # removed meanwhile
        return rows

    def figures(self) -> list[StreamSample]:
        """Figures of every stream for the metrics exporter."""
        rows = []
        for name in self.names():
            stream = self.get(name)
            if stream is not None:
                rows.append(stream.figures())
            else:
                try:  # a stream only stored here: as its store and writer lock tell (lucy ingest may write it)
                    state = stored_stream_state(self.settings.data, self.frames.open(name).info())
                except StoreError:
                    state = StreamState.STOPPED
                rows.append(StreamSample(name, state.value, StreamProgress(), self.caption_stats(name),
                                         self.question_stats(name)))
        return rows

    # ------------------------------------------------------------------------------------ changes

    def check_source(self, source: str) -> str:
        """Refuse sources the server cannot or may not read (:class:`InvalidStream`), before anything is started."""
        # PyAV comes with the source module: a server loads it with its first stream, not at start
        from lucy.ingest.source import LIVE_SCHEMES, check_picture_size, split_source_url

        if not source.strip() or len(source) > MAX_SOURCE_CHARS or any(c in source for c in "\r\n\0"):
            raise InvalidStream("source must be a file path or an rtsp://, http:// or https:// URL")
        try:  # split once, here: a URL that cannot be split is refused with a message that quotes none of it
            parts = split_source_url(source) if "://" in source else None
        except SourceError as err:
            raise InvalidStream(str(err)) from None
        scheme = parts.scheme.lower() if parts is not None else ""
        if scheme and scheme not in (*LIVE_SCHEMES, "file"):
            raise InvalidStream(f"unsupported source scheme {scheme!r}: use a file path, rtsp://, rtsps://, "
                                 f"http:// or https://")
        if parts is not None and scheme in LIVE_SCHEMES:
            if not parts.hostname:
                raise InvalidStream(f"source URL {redact_url(source)!r} has no host")
            return source
        if parts is not None and scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise InvalidStream("file:// URLs must name a local path")
            path = Path(parts.path)
        else:
            path = Path(source)
        if not path.is_absolute():
            raise InvalidStream("a file source must be an absolute path")
        resolved = path.resolve()
        roots = [Path(r).resolve() for r in self.settings.service.allowed_source_roots]
        if roots and not any(resolved.is_relative_to(root) for root in roots):
            raise InvalidStream(f"{path} is outside the directories this server may read "
                                 f"(service.allowed_source_roots)")
        if not resolved.is_file():
            raise InvalidStream(f"no such video file: {path}")
        if roots:
            # What a playlist or concat list names must be inside the roots too (the worker checks it again
            # when it opens the file, in case it changes meanwhile).
            try:
                check_local_source(resolved, roots)
            except SourceError as err:
                raise InvalidStream(str(err)) from None
        try:  # refused here, not by a worker that would leave a failed stream behind
            check_picture_size(str(resolved), self.settings.ingest)
        except SourceError as err:
            raise InvalidStream(str(err)) from None
        return str(resolved)

    def add(self, name: str, source: str, *, preset: str | None = None, captioner: str | None = None,
            realtime: bool = False, retention: RetentionAges | None = None,
            recording: bool | None = None) -> ManagedStream:
        """Register a stream and start it, or restart a stopped one with the same source."""
        try:
            check_stream_name(name)
        except StoreError as err:
            raise InvalidStream(str(err)) from None
        preset = preset or self.settings.preset
        if preset not in PRESETS:
            raise InvalidStream(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
        captioner = captioner or self.settings.captioner.backend
        if captioner not in CAPTIONER_BACKENDS:
            raise InvalidStream(f"unknown captioner {captioner!r}; choose one of: {', '.join(CAPTIONER_BACKENDS)}")
        source = self.check_source(source)
        if (ended := self._streams.get(name)) is not None:
            ended.settle()  # a stream shown as finished may still be closing its worker: not "already running"
        with self._lock:
            existing = self._streams.get(name)
            # Another source under a stored stream's name says so whether or not that stream still runs.
            self._check_stored(name, source, preset, existing)
            if existing is not None and existing.active:
                raise StreamConflict(f"a stream named {name!r} is already running")
            running = sum(1 for s in self._streams.values() if s.active)
            if running >= self.settings.service.max_streams:
                raise StreamConflict(f"this server already runs {running} streams (service.max_streams)")
            try:  # answer at once rather than start a worker that fails: `lucy ingest` or another server writes it
                probe(stream_lock(self.settings.data, name))
            except LockHeld as err:
                raise StreamConflict(str(err)) from None
            spec = StreamSpec(name=name, source=source, preset=preset, captioner=captioner, realtime=realtime,
                              retention_full_seconds=retention.full_seconds if retention else None,
                              retention_keep_seconds=retention.keep_seconds if retention else None,
                              recording=recording)
            stream = self.stream_type(spec, self.settings, self.memory, self.bus, self.frames, self._worker_args())
            # The stream's question and caption figures carry over (metrics counters never go back).
            if existing is not None:
                stream.questions, stream.caption_calls = existing.questions, existing.caption_calls
            else:
                stream.questions = self.questions.pop(name, stream.questions)
                stream.caption_calls = self.caption_calls.pop(name, stream.caption_calls)
            self.registry.put(spec)
            self._streams[name] = stream
        stream.start()
        log.info("stream %s: ingesting %s", name, redact_url(source))
        return stream

    def _check_stored(self, name: str, source: str, preset: str, existing: ManagedStream | None) -> None:
        if not self.frames.exists(name):
            return
        held = self.frames.open(name)
        if not held.holds_source(source):
            raise StreamConflict(f"stream {name!r} already holds another source ({redact_url(held.info().source)}); "
                           f"choose another name, or delete it with ?purge=true")
        if existing is not None and existing.spec.preset != preset:
            raise StreamConflict(f"stream {name!r} was built with preset {existing.spec.preset!r}, not {preset!r}")

    def resume(self) -> list[str]:
        """Start every registered stream (at server start)."""
        started = []
        for spec in self.registry.load():
            if self.get(spec.name) is not None:
                continue
            try:
                stream = self.stream_type(spec, self.settings, self.memory, self.bus, self.frames, self._worker_args())
            except InvalidStream as err:  # the server's retention changed under the stream's own ages
                log.warning("%s; the stream is resumed with the server's retention ages", err)
                spec = replace(spec, retention_full_seconds=None, retention_keep_seconds=None)
                stream = self.stream_type(spec, self.settings, self.memory, self.bus, self.frames, self._worker_args())
            with self._lock:
                self._streams[spec.name] = stream
            refusal = self._writer_elsewhere(spec.name)
            if refusal is not None:
                log.warning("stream %s: not resumed: %s", spec.name, refusal)
                stream.refuse(str(refusal))
                continue
            stream.start()
            started.append(spec.name)
            log.info("stream %s: resumed (%s)", spec.name, redact_url(spec.source))
        return started

    def _writer_elsewhere(self, name: str) -> LockHeld | None:
        """Why ``name`` cannot be resumed: another process writes it (None if nobody does).

        The worker of a server that was killed (this one's previous life, usually) still holds its stream for
        a moment after it: it stops once it sees the server gone, and the stream is resumed after it.
        """
        lock = stream_lock(self.settings.data, name)
        try:
            probe(lock)
        except LockHeld as err:
            if err.holder is None or not err.holder.gone():
                return err
            try:
                probe(lock, wait_seconds=ORPHAN_WAIT_SECONDS)
            except LockHeld as still:
                return still
        return None

    def remove(self, name: str, *, purge: bool = False) -> dict[str, Any]:
        """Stop a stream and forget it (it is not resumed); with ``purge`` delete its frames and memory too.
        Blocking: call from a worker thread."""
        self.require(name)
        with self._lock:
            stream = self._streams.get(name)
        if purge and (stream is None or not stream.active):
            try:  # the frames of a stream that another process writes are not deleted under it
                probe(stream_lock(self.settings.data, name))
            except LockHeld as err:
                raise StreamConflict(str(err)) from None
        if stream is not None:
            stream.stop()
            if stream.active:
                raise StreamConflict(f"stream {name!r} is still stopping; try again")
        self.registry.remove(name)
        status = stream.status() if stream is not None else self._stored_status(name)
        with self._lock:  # no longer the server's: what it stored stays (listed as stopped) unless purged
            self._streams.pop(name, None)
            if stream is not None and not purge:
                self.questions[name], self.caption_calls[name] = stream.questions, stream.caption_calls
            if purge:
                self.questions.pop(name, None)
                self.caption_calls.pop(name, None)
        if purge:
            self._purge(name)
            status = {**status, "state": StreamState.STOPPED.value, "purged": True}
        self.bus.publish({"type": "status", "stream": name, "status": status})
        return status

    def _purge(self, name: str) -> None:
        try:
            with stream_lock(self.settings.data, name).acquire(wait_seconds=0.5):  # no writer starts meanwhile
                self.frames.delete(name)
                delete_recordings(self.settings.data, name)
        except LockHeld as err:
            raise StreamConflict(f"{err} (its frames were not deleted)") from None
        self.memory.delete_stream(name)

    def shutdown(self, timeout: float = 60.0) -> None:
        """Stop every stream, keeping the registry so that the next start resumes them."""
        streams = self.managed()
        for stream in streams:
            stream.ask_stop()
        for stream in streams:
            stream.stop(timeout)


    # ------------------------------------------------------------------------------------ deployment

    @property
    def replicated(self) -> bool:
        """A single server: it alone serves its streams."""
        return False

    def announce_nodes(self) -> None:
        """Announce every node stored through this server's memory store: the workers announce theirs on their
        pipes (:class:`lucy.runtime.worker_process.WorkerProcess`), questions write theirs through this store."""
        if not self._announcing:
            self.memory.add_observer(NodeAnnouncer(self.bus))
            self._announcing = True

    async def hold_duty(self, work: Callable[[], Awaitable[None]]) -> None:
        """A single server does its once-only work itself."""
        await work()
