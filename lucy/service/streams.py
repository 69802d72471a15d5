"""The stream manager: several streams ingesting at once in one process, each with its caption builder.

Each stream runs on its own thread: an :class:`lucy.ingest.Ingestor` (which starts its decoder thread) and a
:class:`lucy.memory.builder.CoarseBuilder` fed by the ingestor's ``on_commit``. Those threads run at a lower
scheduling priority (``service.ingest_nice``; threads started from them inherit it), so that questions, which
run at normal priority, stay fast while streams ingest at full speed on a small machine.

States: ``starting`` (opening the source) -> ``running`` (frames arriving) <-> ``reconnecting`` (a live source
stopped delivering; it reconnects with backoff) -> ``finished`` (a file was read to its end), ``stopped`` (by
``DELETE`` or server shutdown) or ``failed`` (with a redacted error). The list of streams is kept in the data
directory (:mod:`lucy.service.registry`); streams in it are resumed when the server starts again.
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lucy.config import PRESETS, LucySettings
from lucy.errors import LucyError, StoreError
from lucy.ingest import Ingestor, IngestStats, ZarrFrameStore, check_stream_name, list_streams, redact_url
from lucy.ingest.source import LIVE_SCHEMES, source_identity
from lucy.ingest.zarr_store import frames_root, start_io_here
from lucy.memory.store import MemoryStore
from lucy.metrics import STATE_CODES, CaptionCallStats, QuestionStats, StreamFigures
from lucy.metrics.captioning import MeteredCaptioner
from lucy.service.errors import Conflict, InvalidRequest, NotFound
from lucy.service.events import EventBus
from lucy.service.registry import StreamRegistry, StreamSpec

log = logging.getLogger(__name__)

CAPTIONERS = ("pixels", "openai", "vllm", "none")
MAX_SOURCE_CHARS = 4096


class StreamState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    RECONNECTING = "reconnecting"
    STOPPED = "stopped"
    FAILED = "failed"
    FINISHED = "finished"


def lower_thread_priority(nice: int) -> None:
    """Raise the calling thread's niceness to ``nice`` (Linux: per thread; threads it starts inherit it)."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as err:  # not permitted here: run at normal priority
        log.debug("cannot lower thread priority: %s", err)


def make_captioner(settings: LucySettings) -> Any:
    """The configured captioner backend (None for ``none``). The backend choice lives in lucy.memory."""
    if settings.captioner.backend == "none":
        return None
    from lucy.memory.captioners import make_captioner as make

    return make(settings)


def stream_settings(settings: LucySettings, spec: StreamSpec) -> LucySettings:
    """The server's settings with a stream's own preset and captioner."""
    captioner = settings.captioner.model_copy(update={"backend": spec.captioner})
    return settings.model_copy(update={"preset": spec.preset, "captioner": captioner})


class ManagedStream:
    """One stream the server ingests (or did): its threads, state and figures."""

    def __init__(self, spec: StreamSpec, settings: LucySettings, memory: MemoryStore, bus: EventBus,
                 nice: int = 0) -> None:
        self.spec = spec
        self.name = spec.name
        self.settings = stream_settings(settings, spec)
        self.memory = memory
        self.bus = bus
        self.nice = nice
        self.caption_calls = CaptionCallStats()
        self.questions = QuestionStats()
        self.ingestor: Ingestor | None = None
        self.builder: Any = None  # lucy.memory.builder.CoarseBuilder, when a captioner is configured
        self.error: str | None = None
        self.lost: str | None = None
        self.live: bool | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._state = StreamState.STOPPED
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress = (0, time.monotonic())  # (frames decoded, when that count last changed)
        self.history: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=settings.service.history_points)

    # ------------------------------------------------------------------------------------ lifecycle

    @property
    def active(self) -> bool:
        """The stream's thread is running (ingesting, or captioning what it ingested)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.active:
            raise Conflict(f"stream {self.name!r} is already running")
        self._stopping.clear()
        self.error = self.lost = None
        self.started_at, self.ended_at = time.time(), None
        self._state = StreamState.STARTING
        self._progress = (0, time.monotonic())
        self._thread = threading.Thread(target=self._run, name=f"stream-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop ingesting and captioning (blocks up to ``timeout``; call from a worker thread in async code)."""
        self._stopping.set()
        if self.ingestor is not None:
            self.ingestor.stop()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("stream %s did not stop within %.0f s", self.name, timeout)

    def _run(self) -> None:
        lower_thread_priority(self.nice)  # before any thread is started from here: they inherit it
        ending = StreamState.FAILED
        try:
            self.builder = self._start_builder()
            self.ingestor = Ingestor(self.settings, self.spec.source, self.name, realtime=self.spec.realtime,
                                     on_commit=self._on_commit)
            if self._stopping.is_set():
                self.ingestor.stop()
            result = self.ingestor.run()
            self.lost = redact_url(result.lost) if result.lost else None
            if self._stopping.is_set():
                ending = StreamState.STOPPED
            elif self.live and result.lost:
                self.error = self.lost  # a live source that gave up reconnecting
            else:
                ending = StreamState.FINISHED
                self._state = StreamState.FINISHED
                self._publish_status()
                self._drain_captions()
                if self._stopping.is_set() and self.builder is not None and not self.builder.caught_up:
                    ending = StreamState.STOPPED
        except LucyError as err:
            self.error = redact_url(str(err))
            log.warning("stream %s failed: %s", self.name, self.error)
        except Exception as err:  # a bug: keep the traceback in the log, show one line to clients
            self.error = redact_url(f"{type(err).__name__}: {err}")
            log.exception("stream %s failed", self.name)
        finally:
            if self.builder is not None:
                self.builder.stop()
            self.ended_at = time.time()
            self._state = ending
            self._publish_status()

    def _start_builder(self) -> Any:
        captioner = make_captioner(self.settings)
        if captioner is None:
            return None
        from lucy.memory.builder import CoarseBuilder

        builder = CoarseBuilder(self.settings, self.name, self.memory,
                                MeteredCaptioner(captioner, self.caption_calls))
        return builder.start()

    def _drain_captions(self) -> None:
        """After a file's end: wait for its caption backlog (the builder retries a failing captioner)."""
        if self.builder is None:
            return
        while not self._stopping.is_set():
            if self.builder.drain(give_up_seconds=float("inf"), timeout=1.0):
                return

    def _on_commit(self, store: ZarrFrameStore, stats: IngestStats) -> None:
        if self.live is None:
            self.live = bool(store.attrs["live"])
        if self._state is StreamState.STARTING:
            self._state = StreamState.RUNNING
            self._publish_status()
        if self.builder is not None:
            self.builder.on_commit(store, stats)

    def _publish_status(self) -> None:
        self.bus.publish({"type": "status", "stream": self.name, "status": self.status()})

    # ------------------------------------------------------------------------------------ figures

    @property
    def state(self) -> StreamState:
        state = self._state
        if state in (StreamState.RUNNING, StreamState.RECONNECTING) and self.live and self.ingestor is not None:
            decoded, since = self._progress
            now = time.monotonic()
            if self.ingestor.stats.frames_decoded != decoded:
                self._progress = (self.ingestor.stats.frames_decoded, now)
                state = StreamState.RUNNING
            elif now - since > self._stall_seconds():
                state = StreamState.RECONNECTING
            self._state = state
        return state

    def _stall_seconds(self) -> float:
        ingest = self.settings.ingest
        return max(5.0, 3 * ingest.commit_every_seconds)

    def ingested_until(self) -> float:
        if self.ingestor is not None and self.ingestor.stats.media_start is not None:
            return self.ingestor.stats.ingested_until
        try:
            return ZarrFrameStore.open(self.settings.data, self.name).info().media_seconds
        except StoreError:
            return 0.0

    def status(self) -> dict[str, Any]:
        """What ``GET /v1/streams/{name}`` shows. Safe to show: the source is redacted."""
        stats = self.ingestor.stats if self.ingestor is not None else None
        ingested = self.ingested_until()
        if self.builder is not None:
            b = self.builder.stats
            captioned = b.captioned_until
            caption = {"captions_per_second": round(b.captions_per_second, 4), "queued": b.queued,
                       "pending": b.pending, "in_flight": b.in_flight, "coarse_nodes": b.coarse_nodes,
                       "failures": b.failures, "last_error": redact_url(b.last_error) if b.last_error else None}
        else:
            captioned = self.memory.captioned_until(self.name)
            caption = {"captions_per_second": 0.0, "queued": 0, "pending": 0, "in_flight": 0,
                       "coarse_nodes": self.memory.count(self.name, level="coarse", origin="ingest"),
                       "failures": 0, "last_error": None}
        return {
            "name": self.name, "source": redact_url(self.spec.source), "preset": self.spec.preset,
            "captioner": self.spec.captioner, "realtime": self.spec.realtime, "managed": True,
            "state": self.state.value, "error": self.error, "lost": self.lost, "live": self.live,
            "created": self.spec.created, "started_at": self.started_at, "ended_at": self.ended_at,
            "ingested_until": round(ingested, 3), "captioned_until": round(captioned, 3),
            "lag_seconds": round(max(0.0, ingested - captioned), 3),
            "decode_fps": round(stats.decode_fps, 2) if stats else 0.0,
            "realtime_factor": round(stats.realtime_factor, 3) if stats else 0.0,
            "frames": stats.committed if stats else 0,
            "reconnects": stats.reconnects if stats else 0, "decode_errors": stats.decode_errors if stats else 0,
            "gaps": stats.gaps if stats else 0,
            "caption": caption,
            "questions": {"answered": self.questions.answered, "confident": self.questions.confident,
                          "failed": self.questions.failures, "in_flight": self.questions.in_flight},
        }

    def figures(self) -> StreamFigures:
        stats = self.ingestor.stats if self.ingestor is not None else None
        b = self.builder.stats if self.builder is not None else None
        ingested = stats.ingested_until if stats and stats.media_start is not None else 0.0
        captioned = b.captioned_until if b else 0.0
        return StreamFigures(
            stream=self.name, state_code=STATE_CODES[self.state.value],
            frames_decoded=stats.frames_decoded if stats else 0, frames_stored=stats.frames_stored if stats else 0,
            media_seconds=max(0.0, ingested - (stats.media_start or 0.0)) if stats else 0.0,
            ingested_until=ingested, decode_fps=stats.decode_fps if stats else 0.0,
            realtime_factor=stats.realtime_factor if stats else 0.0, reconnects=stats.reconnects if stats else 0,
            decode_errors=stats.decode_errors if stats else 0,
            captions_stored=b.captioned if b else 0, caption_queue_depth=b.pending if b else 0,
            captioned_until=captioned, caption_lag_seconds=b.lag if b else 0.0)

    def sample(self) -> dict[str, Any]:
        """Append the current figures to the stream's history (for the dashboard's charts)."""
        s = self.status()
        point = {"t": round(time.time(), 3), "state": s["state"], "ingested_until": s["ingested_until"],
                 "captioned_until": s["captioned_until"], "lag_seconds": s["lag_seconds"],
                 "captions_per_second": s["caption"]["captions_per_second"], "decode_fps": s["decode_fps"]}
        self.history.append(point)
        return point


class StreamManager:
    """All streams of one server. Thread-safe; blocking methods are meant for worker threads."""

    def __init__(self, settings: LucySettings, memory: MemoryStore, bus: EventBus) -> None:
        self.settings = settings
        self.memory = memory
        self.bus = bus
        self.registry = StreamRegistry(settings.data)
        self._lock = threading.Lock()
        self._streams: dict[str, ManagedStream] = {}
        self.questions: dict[str, QuestionStats] = {}  # of streams the server does not ingest
        self.caption_calls: dict[str, CaptionCallStats] = {}
        # Before any ingest thread lowers its priority and touches zarr: see start_io_here.
        start_io_here(settings.data)

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
        return sorted(managed | set(list_streams(self.settings.data)))

    def require(self, name: str) -> str:
        """``name`` if such a stream exists (422 for a bad name, 404 for an unknown one)."""
        try:
            check_stream_name(name)
        except StoreError as err:
            raise InvalidRequest(str(err)) from None
        if self.get(name) is None and not (frames_root(self.settings.data) / name / "zarr.json").is_file():
            raise NotFound(f"no stream named {name!r}")
        return name

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
            info = ZarrFrameStore.open(self.settings.data, name).info()
        except StoreError:
            raise NotFound(f"no stream named {name!r}") from None
        captioned = self.memory.captioned_until(name)
        q = self.question_stats(name)
        return {
            "name": name, "source": redact_url(info.source), "preset": None, "captioner": None, "realtime": False,
            "managed": False, "state": StreamState.STOPPED.value, "error": None, "lost": info.lost,
            "live": info.live, "created": None, "started_at": None, "ended_at": None,
            "ingested_until": round(info.media_seconds, 3), "captioned_until": round(captioned, 3),
            "lag_seconds": round(max(0.0, info.media_seconds - captioned), 3), "decode_fps": 0.0,
            "realtime_factor": 0.0, "frames": info.frames, "reconnects": 0, "decode_errors": 0,
            "gaps": len(info.gaps),
            "caption": {"captions_per_second": 0.0, "queued": 0, "pending": 0, "in_flight": 0,
                        "coarse_nodes": self.memory.count(name, level="coarse", origin="ingest"),
                        "failures": 0, "last_error": None},
            "questions": {"answered": q.answered, "confident": q.confident, "failed": q.failures,
                          "in_flight": q.in_flight},
        }

    def statuses(self) -> list[dict[str, Any]]:
        rows = []
        for name in self.names():
            try:
                rows.append(self.status(name))
            except NotFound:
                continue  # removed meanwhile
        return rows

    def figures(self) -> list[tuple[StreamFigures, CaptionCallStats, QuestionStats]]:
        """Figures of every stream for the metrics exporter."""
        rows = []
        for name in self.names():
            stream = self.get(name)
            if stream is not None:
                rows.append((stream.figures(), stream.caption_calls, stream.questions))
            else:
                rows.append((StreamFigures(name, STATE_CODES["stopped"]), self.caption_stats(name),
                             self.question_stats(name)))
        return rows

    # ------------------------------------------------------------------------------------ changes

    def check_source(self, source: str) -> str:
        """Refuse sources the server cannot or may not read (422), before anything is started."""
        if not source.strip() or len(source) > MAX_SOURCE_CHARS or any(c in source for c in "\r\n\0"):
            raise InvalidRequest("source must be a file path or an rtsp://, http:// or https:// URL")
        scheme = urlsplit(source).scheme.lower() if "://" in source else ""
        if scheme and scheme not in (*LIVE_SCHEMES, "file"):
            raise InvalidRequest(f"unsupported source scheme {scheme!r}: use a file path, rtsp://, rtsps://, "
                                 f"http:// or https://")
        if scheme in LIVE_SCHEMES:
            if not urlsplit(source).hostname:
                raise InvalidRequest(f"source URL {redact_url(source)!r} has no host")
            return source
        if scheme == "file":
            parts = urlsplit(source)
            if parts.netloc not in ("", "localhost"):
                raise InvalidRequest("file:// URLs must name a local path")
            path = Path(parts.path)
        else:
            path = Path(source)
        if not path.is_absolute():
            raise InvalidRequest("a file source must be an absolute path")
        resolved = path.resolve()
        roots = [Path(r).resolve() for r in self.settings.service.allowed_source_roots]
        if roots and not any(resolved.is_relative_to(root) for root in roots):
            raise InvalidRequest(f"{path} is outside the directories this server may read "
                                 f"(service.allowed_source_roots)")
        if not resolved.is_file():
            raise InvalidRequest(f"no such video file: {path}")
        return str(resolved)

    def add(self, name: str, source: str, *, preset: str | None = None, captioner: str | None = None,
            realtime: bool = False) -> ManagedStream:
        """Register a stream and start it (201), or restart a stopped one with the same source."""
        try:
            check_stream_name(name)
        except StoreError as err:
            raise InvalidRequest(str(err)) from None
        preset = preset or self.settings.preset
        if preset not in PRESETS:
            raise InvalidRequest(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
        captioner = captioner or self.settings.captioner.backend
        if captioner not in CAPTIONERS:
            raise InvalidRequest(f"unknown captioner {captioner!r}; choose one of: {', '.join(CAPTIONERS)}")
        source = self.check_source(source)
        with self._lock:
            existing = self._streams.get(name)
            if existing is not None and existing.active:
                raise Conflict(f"a stream named {name!r} is already running")
            running = sum(1 for s in self._streams.values() if s.active)
            if running >= self.settings.service.max_streams:
                raise Conflict(f"this server already runs {running} streams (service.max_streams)")
            self._check_stored(name, source, preset, existing)
            spec = StreamSpec(name=name, source=source, preset=preset, captioner=captioner, realtime=realtime)
            stream = ManagedStream(spec, self.settings, self.memory, self.bus, self.settings.service.ingest_nice)
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
        path = frames_root(self.settings.data) / name
        if not (path / "zarr.json").is_file():
            return
        held = ZarrFrameStore.open(self.settings.data, name).attrs
        if held["source_id"] != source_identity(source)[1]:
            raise Conflict(f"stream {name!r} already holds another source ({redact_url(held['source'])}); "
                           f"choose another name, or delete it with ?purge=true")
        if existing is not None and existing.spec.preset != preset:
            raise Conflict(f"stream {name!r} was built with preset {existing.spec.preset!r}, not {preset!r}")

    def resume(self) -> list[str]:
        """Start every registered stream (at server start)."""
        started = []
        for spec in self.registry.load():
            if self.get(spec.name) is not None:
                continue
            stream = ManagedStream(spec, self.settings, self.memory, self.bus, self.settings.service.ingest_nice)
            with self._lock:
                self._streams[spec.name] = stream
            stream.start()
            started.append(spec.name)
            log.info("stream %s: resumed (%s)", spec.name, redact_url(spec.source))
        return started

    def remove(self, name: str, *, purge: bool = False) -> dict[str, Any]:
        """Stop a stream and forget it (it is not resumed); with ``purge`` delete its frames and memory too.
        Blocking: call from a worker thread."""
        self.require(name)
        with self._lock:
            stream = self._streams.get(name)
        if stream is not None:
            stream.stop()
            if stream.active:
                raise Conflict(f"stream {name!r} is still stopping; try again")
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
        shutil.rmtree(frames_root(self.settings.data) / check_stream_name(name), ignore_errors=True)
        purge_memory(self.memory, name)

    def shutdown(self, timeout: float = 60.0) -> None:
        """Stop every stream, keeping the registry so that the next start resumes them."""
        streams = self.managed()
        for stream in streams:
            stream._stopping.set()
            if stream.ingestor is not None:
                stream.ingestor.stop()
        for stream in streams:
            stream.stop(timeout)


def purge_memory(memory: MemoryStore, stream: str) -> None:
    """Delete a stream's nodes and question history.

    The MemoryStore interface has no delete; the SQLite backend's tables are written to directly here, in one
    write transaction (its FTS triggers keep the full-text index in step).
    """
    inner = getattr(memory, "inner", memory)
    delete = getattr(inner, "delete_stream", None)
    if callable(delete):
        delete(stream)
        return
    db = inner._db()  # noqa: SLF001  (SQLiteMemoryStore: see the docstring)
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM nodes WHERE stream = ?", (stream,))
        db.execute("DELETE FROM questions WHERE stream = ?", (stream,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
