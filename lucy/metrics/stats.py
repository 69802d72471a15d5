"""Plain stats objects that the pipeline fills as it works; the exporter maps them onto Prometheus metrics.

Nothing here knows about Prometheus: the figures are also read by the HTTP API, the dashboard and MQTT.
Counters only grow; per-event figures (latencies, calls per question) wait in a short list until the exporter
takes them (``drain``), so each event is observed exactly once.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Literal, Protocol

from lucy.metrics.progress import StreamProgress, WatchProgress


class RecentRate:
    """Events per wall second over the last ``window`` seconds (or since ``started``, if that is shorter): the
    throughput figure of the caption builder and the speech worker. :meth:`tick` from any thread."""

    def __init__(self, started: float, window: float = 30.0) -> None:
        self.started = started
        self.window = window
        self._times: collections.deque[float] = collections.deque(maxlen=4096)

    def tick(self) -> None:
        self._times.append(time.monotonic())

    def per_second(self) -> float:
        now = time.monotonic()
        recent = sum(1 for t in list(self._times) if now - t <= self.window)
        return recent / max(min(self.window, now - self.started), 1e-9) if recent else 0.0


# Events kept for the exporter at most (if nothing scrapes, the oldest are dropped: counters stay exact).
_PENDING_MAX = 10_000


@dataclass(frozen=True, slots=True)
class CaptionCall:
    """One request made to a captioner, as :class:`lucy.memory.captioners.observed.ObservedCaptioner` saw it."""

    latency_seconds: float
    ok: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    frames: int = 0


class CaptionCallObserver(Protocol):
    """Whatever wants to know of each caption request: a stream's :class:`CaptionCallStats`, or a stream worker's
    pipe to the server (which passes the :class:`CaptionCall` on unchanged)."""

    def on_caption_call(self, call: CaptionCall) -> None: ...


class CaptionCallStats:
    """Every request made to a stream's captioner (background coarse captions and question-time captions)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.failures = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.frames = 0
        self._latencies: list[float] = []

    def record(self, latency_seconds: float, *, ok: bool, prompt_tokens: int = 0, completion_tokens: int = 0,
               frames: int = 0) -> None:
        self.on_caption_call(CaptionCall(latency_seconds, ok, prompt_tokens, completion_tokens, frames))

    def on_caption_call(self, call: CaptionCall) -> None:
        with self._lock:
            self.requests += 1
            if not call.ok:
                self.failures += 1
            self.prompt_tokens += call.prompt_tokens
            self.completion_tokens += call.completion_tokens
            self.frames += call.frames
            if len(self._latencies) < _PENDING_MAX:
                self._latencies.append(call.latency_seconds)

    def drain(self) -> list[float]:
        """Latencies recorded since the last call."""
        with self._lock:
            taken, self._latencies = self._latencies, []
        return taken


@dataclass(frozen=True, slots=True)
class QuestionRecord:
    """What one answered question cost."""

    latency_seconds: float
    iterations: int
    llm_calls: int
    caption_calls: int
    confident: bool


class QuestionStats:
    """Questions asked about one stream through the service (HTTP, OpenAI-compatible API, MQTT)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.answered = 0
        self.confident = 0
        self.failures = 0
        self.in_flight = 0
        self._pending: list[QuestionRecord] = []

    def started(self) -> None:
        with self._lock:
            self.in_flight += 1

    def finished(self, record: QuestionRecord | None) -> None:
        """A question ended: answered (``record``) or failed (None)."""
        with self._lock:
            self.in_flight -= 1
            if record is None:
                self.failures += 1
                return
            self.answered += 1
            self.confident += int(record.confident)
            if len(self._pending) < _PENDING_MAX:
                self._pending.append(record)

    @property
    def confident_share(self) -> float | None:
        """Confident answers / answers; None before the first answer (no share to speak of)."""
        return self.confident / self.answered if self.answered else None

    def drain(self) -> list[QuestionRecord]:
        with self._lock:
            taken, self._pending = self._pending, []
        return taken


class RetentionStats:
    """Frame storage as the retention maintainer sees it: each stream's stored frame bytes (as last measured),
    bytes freed since the process started (by stream and reason), and the data disk's free space; the same two
    figures for recordings (reasons ``expired`` and ``min_free``)."""

    REASONS = ("thinned", "expired", "max_bytes", "min_free")
    RECORDING_REASONS = ("expired", "min_free")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stored: dict[str, int] = {}
        self.freed: dict[tuple[str, str], int] = {}
        self.recorded: dict[str, int] = {}
        self.recording_freed: dict[tuple[str, str], int] = {}
        self.disk_free: int | None = None
        self.passes = 0
        self.failures = 0  # passes (or streams within one) that raised

    def measured(self, stream: str, stored_bytes: int) -> None:
        with self._lock:
            self.stored[stream] = stored_bytes

    def record_freed(self, stream: str, reason: str, nbytes: int) -> None:
        assert reason in self.REASONS, reason
        self._add(self.freed, stream, reason, nbytes)

    def measured_recording(self, stream: str, recorded_bytes: int) -> None:
        with self._lock:
            self.recorded[stream] = recorded_bytes

    def record_recording_freed(self, stream: str, reason: str, nbytes: int) -> None:
        assert reason in self.RECORDING_REASONS, reason
        self._add(self.recording_freed, stream, reason, nbytes)

    def _add(self, freed: dict[tuple[str, str], int], stream: str, reason: str, nbytes: int) -> None:
        with self._lock:
            freed[stream, reason] = freed.get((stream, reason), 0) + nbytes

    def forget(self, stream: str) -> None:
        """A stream that is no longer in the data directory."""
        with self._lock:
            self.stored.pop(stream, None)
            self.recorded.pop(stream, None)
            self.freed = {k: v for k, v in self.freed.items() if k[0] != stream}
            self.recording_freed = {k: v for k, v in self.recording_freed.items() if k[0] != stream}

    def snapshot(self) -> tuple[dict[str, int], dict[tuple[str, str], int], int | None]:
        with self._lock:
            return dict(self.stored), dict(self.freed), self.disk_free

    def recording_snapshot(self) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        with self._lock:
            return dict(self.recorded), dict(self.recording_freed)


@dataclass(frozen=True, slots=True)
class StreamSample:
    """What the exporter reads of one stream (frigate's per-camera metrics object): its state, its progress record
    as its recorder last reported it (counts since the current run began; the exporter turns a restart into
    counter increments correctly), its worker (restarts, and the process id while it runs), and its caption-request
    and question stats."""

    stream: str
    state: str  # a key of lucy.metrics.exporter.STATE_CODES
    progress: StreamProgress
    calls: CaptionCallStats
    questions: QuestionStats
    worker_restarts: int = 0
    worker_pid: int | None = None  # the stream's worker process while it runs


# A watch check's verdict on one span (:mod:`lucy.watch.checker`).
Verdict = Literal["yes", "no", "maybe"]
VERDICTS: tuple[Verdict, ...] = ("yes", "no", "maybe")


@dataclass
class WatchStats:
    """Counters of one stream's watch checker, written by the builder's loop and read from any thread through
    :meth:`snapshot` (the exporter, the API). They only grow."""

    stream: str
    checks: int = 0  # (watch, coarse span) pairs checked, errors included
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))  # final verdicts
    confirmations: int = 0  # "maybe" verdicts confirmed by captioning the span's fine sub-spans
    confirmations_skipped: int = 0  # "maybe" verdicts left unconfirmed (the hourly budget was spent)
    alerts: int = 0  # alerts stored
    merged: int = 0  # yeses within a watch's cooldown, taken as the same event as its open alert
    errors: int = 0  # checks that failed (logged; the span counts as checked)
    llm_calls: int = 0
    caption_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, verdict: Verdict | None = None, **counts: int) -> None:
        """Add to counters by name; ``verdict`` counts one final verdict of that kind."""
        with self._lock:
            if verdict is not None:
                self.verdicts[verdict] += 1
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def progress(self) -> WatchProgress:
        """The counters as the stream's progress record carries them."""
        with self._lock:
            return WatchProgress(checks=self.checks, yes=self.verdicts["yes"], no=self.verdicts["no"],
                                 maybe=self.verdicts["maybe"], confirmations=self.confirmations, alerts=self.alerts,
                                 errors=self.errors, llm_calls=self.llm_calls, caption_calls=self.caption_calls)

    def snapshot(self) -> dict[str, object]:
        """The counters, copied under the lock."""
        with self._lock:
            return {"stream": self.stream, "checks": self.checks, "verdicts": dict(self.verdicts),
                    "confirmations": self.confirmations, "confirmations_skipped": self.confirmations_skipped,
                    "alerts": self.alerts, "merged": self.merged, "errors": self.errors,
                    "llm_calls": self.llm_calls, "caption_calls": self.caption_calls}


class SeenAlert(Protocol):
    """What delivery counts of an alert (:class:`lucy.memory.watches.Alert` has it; stats import no record)."""

    stream: str
    created: float
    event_end: float


@dataclass
class DeliveryStats:
    """Plain figures of alert delivery, read by the metrics exporter (thread-safe)."""

    alerts: collections.Counter[str] = field(default_factory=collections.Counter)  # stream -> alerts seen
    outcomes: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)  # (sink, outcome)
    watches: dict[str, int] = field(default_factory=dict)  # stream -> active watches
    _latencies: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, alert: SeenAlert, wall_start: float | None) -> None:
        """Count an alert; with the stream's wall time of media time 0 (live streams), its latency: from the
        wall time its event's span closed to the wall time it was stored."""
        with self._lock:
            self.alerts[alert.stream] += 1
            if wall_start is not None:
                self._latencies.append(max(0.0, alert.created - (wall_start + alert.event_end)))

    def outcome(self, sink: str, outcome: str) -> None:
        with self._lock:
            self.outcomes[(sink, outcome)] += 1

    def set_watches(self, counts: dict[str, int]) -> None:
        with self._lock:
            self.watches = dict(counts)

    def snapshot(self) -> tuple[dict[str, int], dict[tuple[str, str], int], dict[str, int], list[float]]:
        """Cumulative alerts and outcomes, current watches, and the latencies since the last snapshot."""
        with self._lock:
            latencies, self._latencies = self._latencies, []
            return dict(self.alerts), dict(self.outcomes), dict(self.watches), latencies
