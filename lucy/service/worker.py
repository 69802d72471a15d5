"""A stream's ingest and background captioning, in a worker process of its own.

Why a process: decoding, storing and captioning are CPU work, much of it in Python. On threads of the server
they would hold the GIL that questions need, and a question's many short calls into C (SQLite, NumPy, OCR,
Zarr) would each wait for an ingest thread to give it back. In a process of its own, at a lower scheduling
priority (``service.ingest_nice``, ``service.ingest_sched_idle``), a stream uses only the CPU that questions
leave; and a decoder that crashes takes down its stream, not the server.

The worker and the server talk over one pipe:

- server -> worker: ``"stop"`` (a closed pipe means the same: the server is gone);
- worker -> server: ``("figures", RunFigures)`` twice a second and at the end; ``("event", dict)`` for the
  server's event bus (each new memory node); ``("call", tuple)`` for each captioner request (the stream's
  caption metrics); ``("state", str)`` when frames start arriving and when a file has been read to its end;
  ``("end", RunEnd)`` last, before the worker exits.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from lucy.config import LucySettings
from lucy.errors import LucyError
from lucy.ingest import Ingestor, IngestStats, ZarrFrameStore, redact_url
from lucy.ingest.lock import Holder
from lucy.ingest.source import redacting_handler
from lucy.metrics import CaptionCallStats
from lucy.metrics.captioning import MeteredCaptioner
from lucy.service.registry import StreamSpec

log = logging.getLogger(__name__)

FIGURES_EVERY_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class RunFigures:
    """A stream's progress as its worker last reported it."""

    live: bool | None = None
    # ingest (this run)
    frames_decoded: int = 0
    frames_stored: int = 0
    committed: int = 0  # frames in the store, all runs
    media_start: float | None = None  # None until the first commit
    ingested_until: float = 0.0
    decode_fps: float = 0.0
    realtime_factor: float = 0.0
    decode_errors: int = 0
    reconnects: int = 0
    gaps: int = 0
    # background captioning (captioning is False when the stream has no captioner)
    captioning: bool = False
    captioned: int = 0
    captioned_until: float = 0.0
    captions_per_second: float = 0.0
    queued: int = 0
    pending: int = 0
    in_flight: int = 0
    coarse_nodes: int = 0
    caption_failures: int = 0
    last_error: str | None = None
    lag: float = 0.0


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How a worker's run ended: ``state`` is stopped, finished or failed; texts are redacted."""

    state: str
    error: str | None = None
    lost: str | None = None


def lower_thread_priority(nice: int, *, idle_policy: bool = False) -> None:
    """Lower the calling thread's scheduling priority (Linux: per thread; threads it starts inherit it).

    ``nice`` is the niceness to raise it to; ``idle_policy`` also moves it to ``SCHED_IDLE``, under which a
    normal thread that wakes up always preempts it (with niceness alone it may wait for the next tick).
    """
    if nice > 0 and hasattr(os, "setpriority"):
        try:
            tid = threading.get_native_id()
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
        except OSError as err:  # not permitted here: run at normal priority
            log.debug("cannot lower thread priority: %s", err)
    if idle_policy and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError as err:
            log.debug("cannot use SCHED_IDLE: %s", err)


# ---------------------------------------------------------------------------------------- in the worker


class _Pipe:
    """The worker's end of the pipe; ``send`` is safe from any thread and never raises."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self.broken = False

    def send(self, message: tuple[str, Any]) -> None:
        with self._lock:
            if self.broken:
                return
            try:
                self.conn.send(message)
            except (OSError, ValueError):  # the server is gone: the listener stops the run
                self.broken = True


class _PipeBus:
    """An event bus for :class:`lucy.service.events.ObservedMemoryStore` that forwards to the server's bus."""

    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe

    def publish(self, event: dict[str, Any]) -> None:
        self.pipe.send(("event", event))


class _PipeCallStats(CaptionCallStats):
    """Caption requests, reported to the server (whose exporter drains the stream's own stats)."""

    def __init__(self, pipe: _Pipe) -> None:
        super().__init__()
        self.pipe = pipe

    def record(self, latency_seconds: float, *, ok: bool, prompt_tokens: int = 0, completion_tokens: int = 0,
               frames: int = 0) -> None:
        self.pipe.send(("call", (latency_seconds, ok, prompt_tokens, completion_tokens, frames)))


class StreamRun:
    """One run of a stream inside its worker: the ingestor and, with a captioner, the coarse builder."""

    def __init__(self, spec: StreamSpec, settings: LucySettings, pipe: _Pipe) -> None:
        from lucy.memory.sqlite_store import SQLiteMemoryStore
        from lucy.service.events import ObservedMemoryStore

        self.spec = spec
        self.settings = settings
        self.pipe = pipe
        self.memory = ObservedMemoryStore(SQLiteMemoryStore.for_data(settings), _PipeBus(pipe))
        self.ingestor: Ingestor | None = None
        self.builder: Any = None  # lucy.memory.builder.CoarseBuilder, when a captioner is configured
        self.live: bool | None = None
        self._started = False
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()
        if self.ingestor is not None:
            self.ingestor.stop()

    def run(self) -> RunEnd:
        name = self.spec.name
        try:
            self.builder = self._start_builder()
            # The stream's writer lock names the server (the process to stop), not this worker (which the
            # server would restart).
            holder = Holder.this_process(f"lucy serve, stream worker {os.getpid()}", pid=os.getppid())
            self.ingestor = Ingestor(self.settings, self.spec.source, name, realtime=self.spec.realtime,
                                     on_commit=self._on_commit, holder=holder)
            if self._stopping.is_set():
                self.ingestor.stop()
            result = self.ingestor.run()
            lost = redact_url(result.lost) if result.lost else None
            if self._stopping.is_set():
                return RunEnd("stopped", lost=lost)
            if self.live and result.lost:
                return RunEnd("failed", error=lost, lost=lost)  # a live source that gave up reconnecting
            self._announce("finished")
            self._drain_captions()
            if self._stopping.is_set() and self.builder is not None and not self.builder.caught_up:
                return RunEnd("stopped", lost=lost)
            return RunEnd("finished", lost=lost)
        except LucyError as err:
            error = redact_url(str(err))
            log.warning("stream %s failed: %s", name, error)
            return RunEnd("failed", error=error)
        except Exception as err:  # a bug: keep the traceback in the log, show one line to clients
            log.exception("stream %s failed", name)
            return RunEnd("failed", error=redact_url(f"{type(err).__name__}: {err}"))
        finally:
            if self.builder is not None:
                self.builder.stop()
            self.memory.close()

    def _start_builder(self) -> Any:
        from lucy.memory.captioners import make_captioner

        captioner = make_captioner(self.settings)
        if captioner is None:
            return None
        from lucy.memory.builder import CoarseBuilder

        metered = MeteredCaptioner(captioner, _PipeCallStats(self.pipe))
        return CoarseBuilder(self.settings, self.spec.name, self.memory, metered).start()

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
        if not self._started:
            self._started = True
            self._announce("running")
        if self.builder is not None:
            self.builder.on_commit(store, stats)

    def _announce(self, state: str) -> None:
        """Report a new state, after the figures that go with it (a client that sees the state sees them)."""
        self.pipe.send(("figures", self.figures()))
        self.pipe.send(("state", state))

    def figures(self) -> RunFigures:
        s = self.ingestor.stats if self.ingestor is not None else None
        ingest: dict[str, Any] = {}
        if s is not None:
            ingest = {"frames_decoded": s.frames_decoded, "frames_stored": s.frames_stored,
                      "committed": s.committed, "media_start": s.media_start, "ingested_until": s.ingested_until,
                      "decode_fps": s.decode_fps, "realtime_factor": s.realtime_factor,
                      "decode_errors": s.decode_errors, "reconnects": s.reconnects, "gaps": s.gaps}
        caption: dict[str, Any] = {}
        if self.builder is not None:
            b = self.builder.stats
            caption = {"captioning": True, "captioned": b.captioned, "captioned_until": b.captioned_until,
                       "captions_per_second": b.captions_per_second, "queued": b.queued, "pending": b.pending,
                       "in_flight": b.in_flight, "coarse_nodes": b.coarse_nodes, "caption_failures": b.failures,
                       "last_error": redact_url(b.last_error) if b.last_error else None, "lag": b.lag}
        return RunFigures(live=self.live, **ingest, **caption)


def serve_stream(spec: StreamSpec, settings: LucySettings, conn: Connection, log_level: int) -> None:
    """The worker process's entry point: run ``spec`` until its end or until the server says stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the server stops us
    service = settings.service
    lower_thread_priority(service.ingest_nice, idle_policy=service.ingest_sched_idle)  # before any thread starts
    logging.basicConfig(level=log_level, handlers=[redacting_handler()], force=True)
    pipe = _Pipe(conn)
    run = StreamRun(spec, settings, pipe)

    def listen() -> None:
        try:
            conn.recv()  # "stop"
        except (EOFError, OSError):
            pass  # the server is gone
        run.stop()

    def report(done: threading.Event) -> None:
        while not done.wait(FIGURES_EVERY_SECONDS):
            pipe.send(("figures", run.figures()))

    done = threading.Event()
    threading.Thread(target=listen, name="stop-listener", daemon=True).start()
    threading.Thread(target=report, args=(done,), name="figures", daemon=True).start()
    end = run.run()
    done.set()
    pipe.send(("figures", run.figures()))
    pipe.send(("end", end))
    conn.close()


# ---------------------------------------------------------------------------------------- in the server


class WorkerProcess:
    """The server's handle on one stream's worker: starts it, reads its messages, stops it."""

    def __init__(self, spec: StreamSpec, settings: LucySettings) -> None:
        import multiprocessing

        # spawn, not fork: the server has threads (uvicorn, questions, MQTT) that a fork would copy half-held
        self._ctx = multiprocessing.get_context("spawn")
        self.spec, self.settings = spec, settings
        self.process: Any = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def messages(self) -> Any:
        """Start the worker and yield its messages until it exits (then a last ``("exit", exitcode)``)."""
        here, there = self._ctx.Pipe(duplex=True)
        self.process = self._ctx.Process(
            target=serve_stream, name=f"lucy-stream-{self.spec.name}", daemon=True,
            args=(self.spec, self.settings, there, logging.getLogger().getEffectiveLevel()))
        with self._lock:
            self._conn = here
        self.process.start()
        there.close()  # the worker holds its end; once it exits, recv() below sees EOF
        try:
            while True:
                try:
                    yield here.recv()
                except (EOFError, OSError):
                    break
        finally:
            with self._lock:
                self._conn = None
            here.close()
            self.process.join(10)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
        yield "exit", self.process.exitcode

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def stop(self) -> None:
        """Ask the worker to stop (it finishes what it was writing, then exits)."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.send("stop")
                except (OSError, ValueError):
                    pass

    def kill(self) -> None:
        """End a worker that did not stop when asked (committed frames and nodes are kept)."""
        if self.process is not None and self.process.is_alive():
            self.process.kill()

