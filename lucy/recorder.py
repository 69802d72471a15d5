"""Recording a stream: its frames into the frame store and its coarse captions into memory, under one set of rules.

``lucy ingest``, ``lucy demo`` and each stream worker of ``lucy serve`` record a stream the same way, with a
:class:`StreamRecorder`: the :class:`lucy.ingest.Ingestor` decodes, samples and stores frames on the calling
thread, and the :class:`lucy.memory.builder.CoarseBuilder` captions each closed coarse span on a thread of its own
(a slow captioner slows captions, never ingest). The recorder attaches the builder's span listeners
(:mod:`lucy.memory.listeners`): transcription with a transcriber, embedding with an embedder, and with
``watch.enabled`` the checks of the stream's watches (:mod:`lucy.watch.checker`): whoever records a stream is who
raises its alerts. The rules, the same for every caller:

- **stop**: :meth:`StreamRecorder.stop` (from any thread, a signal handler too) ends ingest once what was decoded is
  committed, and ends a drain at once. Captions in flight are dropped; their spans stay pending in the frame store
  and the next recording of the stream captions them.
- **drain**: a stream that ended by itself (a file read to its end, a damaged file, a live source that ended) is
  captioned to its end before :meth:`StreamRecorder.run` returns, unless the captioner has failed for
  ``give_up_seconds`` without a success (default ``memory.drain_give_up_seconds``; ``math.inf``: wait while the
  builder retries) or ``drain_timeout`` passes.
- **outcome**: :attr:`Outcome.STOPPED` when stopped (also during the drain, with spans left), :attr:`Outcome.FAILED`
  when a live source gave up reconnecting, else :attr:`Outcome.FINISHED`. What was stored is kept in every case.
- **errors**: an error of the source, the stores or the builder is raised by :meth:`StreamRecorder.run` once the
  builder has stopped; how to show it is the caller's business (one line in the CLI, a failed state in the API).
- **progress**: :meth:`StreamRecorder.progress` freezes both parts' counters into one
  :class:`lucy.metrics.progress.StreamProgress`; a :class:`RecorderObserver` sees the recording as it goes.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from enum import StrEnum

from lucy.backends import builder_reasoner
from lucy.config import LucySettings
from lucy.ingest import FrameStore, FrameStores, Ingestor, IngestResult, IngestStats
from lucy.ingest.lock import Holder
from lucy.memory.builder import CoarseBuilder
from lucy.memory.captioners.base import Captioner
from lucy.memory.embedders import Embedder
from lucy.memory.listeners import SpanListener
from lucy.memory.retrieval import IndexWriter, MemoryIndex
from lucy.memory.speech import SpeechWorker
from lucy.memory.store import MemoryStore
from lucy.memory.transcribers import Transcriber
from lucy.metrics.progress import StreamProgress
from lucy.perception.detect import open_detector
from lucy.watch.checker import WatchChecker

log = logging.getLogger(__name__)

BUILDER_SYNC_SECONDS = 10.0  # at most, for the builder to look at the ended stream (it needs a frame-store read)


class Outcome(StrEnum):
    """How a recording ended (the values are the API's stream states)."""

    FINISHED = "finished"  # the source ended by itself; its captions were drained
    STOPPED = "stopped"  # stop() was called
    FAILED = "failed"  # a live source gave up reconnecting


class Backlog(StrEnum):
    """How the wait for the last captions (the drain) ended."""

    CAUGHT_UP = "caught_up"  # every closed span is captioned
    CAPTIONER_DOWN = "captioner_down"  # the captioner failed for give_up_seconds without a success
    INTERRUPTED = "interrupted"  # stop() was called
    TIMED_OUT = "timed_out"  # drain_timeout passed


@dataclass(frozen=True, slots=True)
class Recording:
    """The end of one recording."""

    outcome: Outcome
    ingest: IngestResult
    backlog: Backlog | None = None  # None: no captioner, or nothing to drain (stopped or failed first)
    uncaptioned: int | None = None  # closed coarse spans left uncaptioned (None: no captioner)
    last_caption_error: str | None = None  # redacted


class RecorderObserver:
    """Sees a recording as it goes, without being part of it (as pipecat's observers see frames). Override what you
    need; the defaults do nothing. Hooks run on the recording's thread and must return quickly."""

    def on_started(self, progress: StreamProgress) -> None:
        """The first frames of this recording are committed (the source delivers)."""

    def on_commit(self, progress: StreamProgress) -> None:
        """Frames were committed (about every ``ingest.commit_every_seconds``)."""

    def on_ingest_end(self, progress: StreamProgress) -> None:
        """The source ended by itself; the captions of what it gave are still being made. ``progress`` counts
        every coarse span the ended stream has (the last, partial span of a file too)."""

    def on_drain(self, progress: StreamProgress) -> None:
        """While waiting for the last captions, about ten times a second."""


class StreamRecorder:
    """Records one source into one stream of a data directory: frames, and with a captioner coarse captions.

    The recorder owns ``captioner`` (it is closed when :meth:`run` returns; so are ``transcriber`` and
    ``embedder``, through its builder) but not ``memory`` (its opener closes it); ``frames``, the data directory's
    frame-store catalogue, is opened by the caller too. One recorder records once: :meth:`run` blocks until the
    end, :meth:`stop` ends it early.
    """

    def __init__(self, settings: LucySettings, source: str, stream: str, memory: MemoryStore,
                 captioner: Captioner | None, *, realtime: bool = False, holder: Holder | None = None,
                 observer: RecorderObserver | None = None, give_up_seconds: float | None = None,
                 drain_timeout: float | None = None, frames: FrameStores,
                 transcriber: Transcriber | None = None, embedder: Embedder | None = None) -> None:
        self.stream = stream
        self.observer = observer or RecorderObserver()
        self.give_up_seconds = settings.memory.drain_give_up_seconds if give_up_seconds is None else give_up_seconds
        self.drain_timeout = drain_timeout
        # The detect stage writes what it sees into the stream's memory store; the builder captions a span once it
        # is observed to its end (and is woken by each write).
        detector = open_detector(settings.detect)
        self.ingestor = Ingestor(settings, source, stream, realtime=realtime, on_commit=self._on_commit,
                                 holder=holder, frames=frames, detector=detector, observations=memory,
                                 on_observed=self._on_observed)
        # The builder owns its listeners (and through them the transcriber, the embedder and the checker's reasoner).
        self.speech = None if captioner is None or transcriber is None else SpeechWorker(
            settings, stream, memory, transcriber)
        listeners: list[SpanListener] = [] if self.speech is None else [self.speech]
        self.checker = None
        if captioner is not None and settings.watch.enabled:
            self.checker = WatchChecker(settings, stream, memory, builder_reasoner(settings), captioner, frames,
                                        embedder=embedder)
            listeners.append(self.checker)
        if captioner is not None and embedder is not None:
            # No vector cache: the writer embeds each new node once and never reads a vector back, so a cache would
            # only grow with the stream (to 50,000 vectors, ~150 MiB with the default embedder, in every worker).
            listeners.append(IndexWriter(MemoryIndex(memory, embedder, cache_vectors=0), stream))
        observed = None if detector is None else (lambda: memory.observed_until(stream))
        self.builder = None if captioner is None else CoarseBuilder(settings, stream, memory, captioner,
                                                                    frames=frames, listeners=listeners,
                                                                    observed_until=observed)
        self.live: bool | None = None  # known from the first commit
        self._stopping = threading.Event()

    def stop(self) -> None:
        """End the recording early (any thread; returns at once). Frames decoded so far are committed."""
        self._stopping.set()
        self.ingestor.stop()
        if self.builder is not None:
            self.builder.interrupt()

    def progress(self) -> StreamProgress:
        """Where the recording is now (any thread)."""
        return StreamProgress(live=self.live, ingest=self.ingestor.stats.snapshot(),
                              caption=None if self.builder is None else self.builder.stats.snapshot(),
                              speech=None if self.speech is None else self.speech.stats.snapshot(),
                              detect=None if self.ingestor.detect is None else self.ingestor.detect.stats.snapshot(),
                              watch=None if self.checker is None else self.checker.stats.progress())

    def run(self) -> Recording:
        """Record until the source ends (then drain its captions) or :meth:`stop`; see the module's rules."""
        try:
            result, outcome, backlog = self._record()
        finally:  # on an error too: the builder's captions in flight are dropped, their spans stay pending
            uncaptioned = self._stop_builder()
        error = self.builder.stats.snapshot().last_error if self.builder is not None else None
        return Recording(outcome, result, backlog, uncaptioned, error)

    def _record(self) -> tuple[IngestResult, Outcome, Backlog | None]:
        if self.builder is not None:
            self.builder.start()  # first: spans stored by an earlier recording and not captioned are resumed
        result = self.ingestor.run()
        outcome = self._outcome(result)
        if outcome is not Outcome.FINISHED:
            return result, outcome, None
        if self.builder is not None:
            # The builder learns that a file has ended on its next look at the frame store; until then it does
            # not count the file's last, partial span. Have it look now, so that whoever hears of the end hears
            # figures that count every span.
            self.builder.sync(BUILDER_SYNC_SECONDS)
        self.observer.on_ingest_end(self.progress())
        backlog = self._drain()
        return result, Outcome.STOPPED if backlog is Backlog.INTERRUPTED else outcome, backlog

    def _outcome(self, result: IngestResult) -> Outcome:
        if self._stopping.is_set():
            return Outcome.STOPPED
        if self.live and result.lost:
            return Outcome.FAILED
        return Outcome.FINISHED

    def _drain(self) -> Backlog | None:
        if self.builder is None:
            return None
        if self.builder.drain(self.give_up_seconds, timeout=self.drain_timeout,
                              progress=lambda _: self.observer.on_drain(self.progress())):
            return Backlog.CAUGHT_UP
        if self._stopping.is_set():
            return Backlog.INTERRUPTED
        if self.builder.stats.down_since is not None:
            return Backlog.CAPTIONER_DOWN
        return Backlog.TIMED_OUT

    def _stop_builder(self) -> int | None:
        """Stop the builder (idempotent); the closed spans it leaves uncaptioned."""
        if self.builder is None:
            return None
        self.builder.stop()
        return self.builder.stats.pending

    def _on_observed(self, _until: float) -> None:
        if self.builder is not None:
            self.builder.on_commit()

    def _on_commit(self, store: FrameStore, stats: IngestStats) -> None:
        first = self.live is None
        if first:
            self.live = store.info().live
        if self.builder is not None:
            self.builder.on_commit(store, stats)  # never blocks: it only wakes the builder
        progress = self.progress()
        if first:
            self.observer.on_started(progress)
        self.observer.on_commit(progress)
