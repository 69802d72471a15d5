"""A stream's recording (ingest and background captioning), in a worker process of its own.

Why a process: decoding, storing and captioning are CPU work, much of it in Python. On threads of the server
they would hold the GIL that questions need, and a question's many short calls into C (SQLite, NumPy, OCR,
Zarr) would each wait for an ingest thread to give it back. In a process of its own, at a lower scheduling
priority (``service.ingest_nice``, ``service.ingest_sched_idle``), a stream uses only the CPU that questions
leave; and a decoder that crashes takes down its stream, not the server.

The worker records with the :class:`lucy.recorder.StreamRecorder` that ``lucy ingest`` uses, and reports over
one pipe in the typed messages of :mod:`lucy.runtime.messages`. The server's side of the pipe, and what starts this
process, is :mod:`lucy.runtime.worker_process`: the server never imports this module.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any, Protocol

from lucy.config import LucySettings
from lucy.errors import LucyError
from lucy.ingest import FrameStores
from lucy.ingest.lock import Holder
from lucy.memory.store import MemoryStore
from lucy.metrics import CaptionCall, StreamProgress
from lucy.recorder import Outcome, RecorderObserver, StreamRecorder
from lucy.redaction import redact_source, redacting_handler
from lucy.runtime.messages import (
    BusEvent,
    RunEnd,
    StateChange,
    StreamState,
    WorkerMessage,
)
from lucy.runtime.protocol import StoreOpener
from lucy.runtime.registry import StreamSpec

log = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 0.5


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


class Reporter(Protocol):
    """Where a stream's run reports (the worker's pipe; a cluster owner's message log): never raises."""

    def send(self, message: WorkerMessage) -> None: ...

    def publish(self, event: dict[str, Any]) -> None: ...

    def on_caption_call(self, call: CaptionCall) -> None: ...


class _Pipe:
    """The worker's end of the pipe: ``send`` is safe from any thread and never raises. It is also where the
    memory store's node events (:class:`lucy.runtime.events.NodeAnnouncer`) and the captioner's requests
    (:class:`lucy.memory.captioners.observed.ObservedCaptioner`) go, unchanged, on their way to the server."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self.broken = False

    def send(self, message: WorkerMessage) -> None:
        with self._lock:
            if self.broken:
                return
            try:
                self.conn.send(message)
            except (OSError, ValueError):  # the server is gone: the stop listener ends the run
                self.broken = True

    def publish(self, event: dict[str, Any]) -> None:
        self.send(BusEvent(event))

    def on_caption_call(self, call: CaptionCall) -> None:
        self.send(call)


class StreamRun(RecorderObserver):
    """One run of a stream inside its worker: a :class:`StreamRecorder` whose progress goes to the server.

    The service's rules on top of the recorder's: a finished file waits for its captions as long as it takes (the
    builder retries a failing captioner), and errors end the run as ``failed`` with one redacted line.
    """

    def __init__(self, spec: StreamSpec, settings: LucySettings, pipe: Reporter,
                 stores: StoreOpener | None = None, server_pid: int | None = None) -> None:
        self.spec = spec
        self.settings = settings
        self.pipe = pipe
        self.stores = stores
        self.server_pid = os.getppid() if server_pid is None else server_pid
        self.recorder: StreamRecorder | None = None
        self.failure: LucyError | None = None  # what ended the run, if an error of the source or the stores did
        self._stopping = threading.Event()
        # Held from taking a progress record to sending it (and the state that goes with it): a record taken
        # earlier never arrives after a later one.
        self._reporting = threading.Lock()

    def stop(self) -> None:
        """Stop the run (any thread): before, during or after the recorder is made."""
        self._stopping.set()
        if self.recorder is not None:
            self.recorder.stop()

    def progress(self) -> StreamProgress:
        return self.recorder.progress() if self.recorder is not None else StreamProgress()

    def report(self, *then: WorkerMessage) -> None:
        """Send the current progress record, then ``then`` (a client that sees a new state sees its figures)."""
        with self._reporting:
            self.pipe.send(self.progress())
            for message in then:
                self.pipe.send(message)

    def open_stores(self) -> tuple[MemoryStore, FrameStores]:
        """The memory store the run writes (closed when it ends; each node it stores is announced to the server)
        and its frame stores: the worker process's own, opened once (it is a composition root of its own)."""
        from lucy.runtime.events import NodeAnnouncer

        if self.stores is None:
            raise TypeError("a local stream run needs a store opener (lucy.wiring.open_worker_stores)")
        memory, frames = self.stores(self.settings)
        memory.add_observer(NodeAnnouncer(self.pipe))
        return memory, frames

    def holder(self) -> Holder:
        """Whom the stream's writer lock names: the server (the process to stop), not this worker (which the
        server would restart)."""
        return Holder.this_process(f"lucy serve, stream worker {os.getpid()}", pid=self.server_pid)

    def run(self) -> RunEnd:
        from lucy.backends import builder_captioner, builder_embedder, builder_transcriber
        from lucy.memory.captioners.observed import ObservedCaptioner

        name = self.spec.name
        memory, frames = self.open_stores()
        try:
            captioner = builder_captioner(self.settings)
            self.recorder = StreamRecorder(
                self.settings, self.spec.source, name, memory,
                None if captioner is None else ObservedCaptioner(captioner, self.pipe),
                realtime=self.spec.realtime, holder=self.holder(), observer=self, give_up_seconds=math.inf,
                transcriber=builder_transcriber(self.settings), embedder=builder_embedder(self.settings),
                frames=frames)
            if self._stopping.is_set():
                self.recorder.stop()
            recording = self.recorder.run()
            lost = redact_source(recording.ingest.lost, self.spec.source) if recording.ingest.lost else None
            error = lost if recording.outcome is Outcome.FAILED else None
            return RunEnd(StreamState(recording.outcome), error=error, lost=lost)
        except LucyError as err:
            self.failure = err
            error = redact_source(str(err), self.spec.source)
            log.warning("stream %s failed: %s", name, error)
            return RunEnd(StreamState.FAILED, error=error)
        except Exception as err:  # a bug: keep the traceback in the log, show one line to clients
            log.exception("stream %s failed", name)
            return RunEnd(StreamState.FAILED, error=redact_source(f"{type(err).__name__}: {err}", self.spec.source))
        finally:
            memory.close()

    # RecorderObserver: the two changes of state the server hears of from the worker
    def on_started(self, progress: StreamProgress) -> None:
        self.report(StateChange(StreamState.RECORDING))

    def on_ingest_end(self, progress: StreamProgress) -> None:
        self.report(StateChange(StreamState.FINISHED))


def serve_stream(spec: StreamSpec, settings: LucySettings, conn: Connection, log_levels: tuple[int, int],
                 stores: StoreOpener, server_pid: int | None = None) -> None:
    """The worker process's entry point: run ``spec`` until its end or until the server says stop. ``log_levels``:
    the server's root and ``lucy`` logger levels (``lucy serve -v`` reaches the workers too); ``stores`` opens the
    worker's own stores; ``server_pid``: the server's process (a worker's parent is the fork server)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the server stops us
    service = settings.service
    lower_thread_priority(service.ingest_nice, idle_policy=service.ingest_sched_idle)  # before any thread starts
    logging.basicConfig(level=log_levels[0], handlers=[redacting_handler(spec.source)], force=True)
    logging.getLogger("lucy").setLevel(log_levels[1])
    pipe = _Pipe(conn)
    run = StreamRun(spec, settings, pipe, stores, server_pid)

    def listen() -> None:
        try:
            conn.recv()  # a StopRequest: the only message a server sends
        except (EOFError, OSError):
            pass  # the server is gone
        run.stop()

    def report(done: threading.Event) -> None:
        while not done.wait(PROGRESS_EVERY_SECONDS):
            run.report()

    done = threading.Event()
    threading.Thread(target=listen, name="stop-listener", daemon=True).start()
    threading.Thread(target=report, args=(done,), name="progress", daemon=True).start()
    end = run.run()
    done.set()
    run.report(end)
    conn.close()
