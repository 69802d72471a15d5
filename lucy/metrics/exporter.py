"""The one place where Lucy's stats objects become Prometheus metrics.

Conventions: every name starts with ``lucy_`` and carries its unit (``_seconds``, ``_total``, ``_ratio``...),
histograms have explicit buckets, and the only label is the stream name (bounded by ``service.max_streams``;
never a URL), plus a ``reason`` of four values on the bytes retention freed, a ``sink`` and ``outcome`` (a few
values each) on alert deliveries, and ``version`` and ``python`` on ``lucy_build_info``. The registry also holds
prometheus_client's process and platform collectors (``process_*`` of the server process, ``python_info``,
``python_gc_*``); each stream's worker process is measured from /proc (``lucy_stream_worker_*``). The exporter is called
before each scrape and on a timer; it reads plain figures and never hides an error (a bug here fails the scrape loudly
rather than serving stale numbers).
"""

from __future__ import annotations

import os
import platform
import threading
from collections.abc import Iterable

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from lucy import __version__
from lucy.metrics.progress import CaptionProgress, DetectProgress, SpeechProgress, WatchProgress
from lucy.metrics.stats import VERDICTS, DeliveryStats, RetentionStats, StreamSample

CAPTION_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
QUESTION_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
ITERATION_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 10)
LLM_CALL_BUCKETS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 15, 20, 30)
CAPTION_CALL_BUCKETS = (0, 1, 2, 3, 5, 10, 20, 50, 100)
ALERT_LATENCY_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

STATE_CODES = {"stopped": 0, "starting": 1, "recording": 2, "reconnecting": 3, "finished": 4, "failed": 5,
               "catching_up": 6}  # codes never change meaning (dashboards map them); a new state gets a new code

CONTENT_TYPE = CONTENT_TYPE_LATEST


def process_figures(pid: int) -> tuple[float, int] | None:
    """CPU seconds (user + system) and resident bytes of a process, from /proc; None once it is gone (or where
    there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open(f"/proc/{pid}/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) ": the name may hold spaces
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, pages * os.sysconf("SC_PAGE_SIZE")


class MqttMetrics:
    """The MQTT bridge's link to its broker; registered by the bridge only (a server without one has none)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.connected = Gauge("lucy_mqtt_connected", "1 while the MQTT bridge is connected to its broker, else 0.",
                               registry=registry)
        self.connects = Counter("lucy_mqtt_connects_total", "Connections made to the MQTT broker (reconnects "
                                "included).", registry=registry)
        self.dropped = Counter("lucy_mqtt_dropped_messages_total", "Messages dropped from the MQTT outbox (oldest "
                               "first) while the broker was away too long.", registry=registry)


class MetricsExporter:
    """Owns a registry of Lucy's metrics; :meth:`update` maps current figures onto it."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # the *_created series double the exposition and no dashboard uses them
        self.registry = registry or CollectorRegistry()
        r, s = self.registry, ("stream",)
        if r is not REGISTRY:  # the default registry has them already
            ProcessCollector(registry=r)  # process_*: CPU, resident memory, open fds of the server process
            PlatformCollector(registry=r)  # python_info
            GCCollector(registry=r)  # python_gc_*
        self.build_info = Gauge("lucy_build_info", "Always 1; the labels say which Lucy and Python serve.",
                                ("version", "python"), registry=r)
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self._mqtt: MqttMetrics | None = None
        states = ", ".join(f"{code}={name}" for name, code in STATE_CODES.items())
        self.streams = Gauge("lucy_streams", "Streams the server knows (running or not).", registry=r)
        self.state = Gauge("lucy_stream_state", f"Stream state code: {states}.", s, registry=r)
        # ingest
        self.frames_decoded = Counter("lucy_ingest_frames_decoded_total", "Frames decoded from the source.", s,
                                      registry=r)
        self.frames_stored = Counter("lucy_ingest_frames_stored_total", "Sampled frames written to the frame store.",
                                     s, registry=r)
        self.media = Counter("lucy_ingest_media_seconds_total", "Media seconds ingested.", s, registry=r)
        self.ingested_until = Gauge("lucy_ingest_ingested_until_seconds",
                                    "Media time covered by committed frames.", s, registry=r)
        self.decode_fps = Gauge("lucy_ingest_decode_frames_per_second",
                                "Decode rate of the current ingest run.", s, registry=r)
        self.realtime = Gauge("lucy_ingest_realtime_factor_ratio",
                              "Media seconds ingested per wall second (current run).", s, registry=r)
        self.reconnects = Counter("lucy_ingest_reconnects_total", "Reconnects of live sources.", s, registry=r)
        self.decode_errors = Counter("lucy_ingest_decode_errors_total", "Damaged packets skipped.", s, registry=r)
        self.worker_restarts = Counter("lucy_stream_worker_restarts_total",
                                       "Stream workers restarted after dying without ending their run.", s,
                                       registry=r)
        self.worker_cpu = Counter("lucy_stream_worker_cpu_seconds_total",
                                  "CPU time (user and system) of the stream's worker processes.", s, registry=r)
        self.worker_memory = Gauge("lucy_stream_worker_resident_memory_bytes",
                                   "Resident memory of the stream's worker process (while it runs).", s, registry=r)
        # captioning
        self.caption_requests = Counter("lucy_caption_requests_total", "Requests made to the captioner.", s,
                                        registry=r)
        self.caption_failures = Counter("lucy_caption_failures_total", "Captioner requests that failed.", s,
                                        registry=r)
        self.caption_latency = Histogram("lucy_caption_latency_seconds", "Latency of one captioner request.", s,
                                         buckets=CAPTION_LATENCY_BUCKETS, registry=r)
        self.prompt_tokens = Counter("lucy_caption_prompt_tokens_total", "Prompt tokens used by captions.", s,
                                     registry=r)
        self.completion_tokens = Counter("lucy_caption_completion_tokens_total",
                                         "Completion tokens used by captions.", s, registry=r)
        self.captions_stored = Counter("lucy_caption_coarse_nodes_total",
                                       "Coarse captions stored by the background builder.", s, registry=r)
        self.queue_depth = Gauge("lucy_caption_queue_depth_spans", "Closed coarse spans waiting for a caption.", s,
                                 registry=r)
        self.lag = Gauge("lucy_caption_lag_seconds", "Media time ingested but not yet captioned.", s, registry=r)
        self.captioned_until = Gauge("lucy_caption_captioned_until_seconds",
                                     "Media time covered by contiguous coarse captions.", s, registry=r)
        # transcription (streams with sound), beside captioning
        self.speech_spans = Counter("lucy_speech_spans_total", "Coarse spans whose sound was transcribed.", s,
                                    registry=r)
        self.speech_lines = Counter("lucy_speech_lines_total", "Transcript lines stored.", s, registry=r)
        self.speech_failures = Counter("lucy_speech_failures_total", "Transcriptions that failed (each retried).",
                                       s, registry=r)
        self.speech_queue_depth = Gauge("lucy_speech_queue_depth_spans",
                                        "Closed coarse spans with sound waiting for a transcript.", s, registry=r)
        self.speech_lag = Gauge("lucy_speech_lag_seconds", "Media time of stored sound not yet transcribed.", s,
                                registry=r)
        self.speech_until = Gauge("lucy_speech_transcribed_until_seconds",
                                  "Media time covered by contiguous transcripts.", s, registry=r)
        self.speech_realtime = Gauge("lucy_speech_realtime_factor_ratio",
                                     "Sound seconds transcribed per wall second spent transcribing.", s, registry=r)
        # the detect stage of ingest
        self.detect_frames = Counter("lucy_detect_frames_total", "Frames through the detector and tracker.", s,
                                     registry=r)
        self.detect_dropped = Counter("lucy_detect_frames_dropped_total",
                                      "Frames of a live source dropped while the detector was behind.", s, registry=r)
        self.detect_seconds = Gauge("lucy_detect_seconds_per_frame",
                                    "Detection and tracking time of one frame (moving average).", s, registry=r)
        self.detect_lag = Gauge("lucy_detect_lag_seconds", "Media time decoded but not through the detector yet.", s,
                                registry=r)
        self.detect_until = Gauge("lucy_detect_observed_until_seconds",
                                  "Media time up to which the stream has been through the detector.", s, registry=r)
        # the checks of the stream's watches by its recorder
        self.watch_checks = Counter("lucy_watch_checks_total", "Watch checks of closed coarse spans (errors included).",
                                    s, registry=r)
        self.watch_confirmations = Counter("lucy_watch_confirmations_total",
                                           "Maybe verdicts confirmed by captioning the span's fine sub-spans.", s,
                                           registry=r)
        self.watch_errors = Counter("lucy_watch_check_errors_total", "Watch checks that failed.", s, registry=r)
        self.watch_llm_calls = Counter("lucy_watch_llm_calls_total", "Reasoner calls of watch checks.", s, registry=r)
        # questions
        self.questions = Counter("lucy_questions_total", "Questions answered.", s, registry=r)
        self.questions_confident = Counter("lucy_questions_confident_total", "Questions answered with confidence.",
                                           s, registry=r)
        self.question_failures = Counter("lucy_question_failures_total", "Questions that failed or timed out.", s,
                                         registry=r)
        self.questions_in_flight = Gauge("lucy_questions_in_flight", "Questions being answered now.", s, registry=r)
        self.confident_share = Gauge("lucy_question_confident_ratio", "Share of the questions answered since the "
                                     "server started that were confident (no series before the first answer).", s,
                                     registry=r)
        self.question_latency = Histogram("lucy_question_latency_seconds", "Time to answer a question.", s,
                                          buckets=QUESTION_LATENCY_BUCKETS, registry=r)
        self.question_iterations = Histogram("lucy_question_iterations", "Backtracking rounds per question.", s,
                                             buckets=ITERATION_BUCKETS, registry=r)
        self.question_llm_calls = Histogram("lucy_question_llm_calls", "Reasoner (LLM) calls per question.", s,
                                            buckets=LLM_CALL_BUCKETS, registry=r)
        self.question_caption_calls = Histogram("lucy_question_caption_calls", "Captioner calls per question.", s,
                                                buckets=CAPTION_CALL_BUCKETS, registry=r)
        self._per_stream = [m for m in vars(self).values()
                            if isinstance(m, (Counter, Gauge, Histogram)) and m not in (self.streams, self.build_info)]
        self.watch_verdicts = Counter("lucy_watch_verdicts_total", "Final verdicts of watch checks.",
                                      ("stream", "verdict"), registry=r)
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], float] = {}
        self._known: set[str] = set()
        self._worker_cpu: dict[str, tuple[int, float]] = {}  # stream -> (pid, CPU seconds last counted)
        # frame storage, from the retention maintainer (set ``retention`` to its stats); ``reason`` takes the
        # four values of RetentionStats.REASONS
        self.retention: RetentionStats | None = None
        self.frame_bytes = Gauge("lucy_frame_stored_bytes", "Bytes of stored frames on disk.", s, registry=r)
        self.frame_freed = Counter("lucy_frame_freed_bytes_total", "Bytes of frames deleted by retention, by "
                                   "reason: thinned, expired (age), max_bytes, min_free (disk pressure).",
                                   ("stream", "reason"), registry=r)
        self.disk_free = Gauge("lucy_data_disk_free_bytes", "Free space on the data directory's disk.", registry=r)
        self.recording_bytes = Gauge("lucy_recording_stored_bytes", "Bytes of recorded segments on disk.", s,
                                     registry=r)
        self.recording_freed = Counter("lucy_recording_freed_bytes_total", "Bytes of recorded segments deleted by "
                                       "retention, by reason: expired (age), min_free (disk pressure).",
                                       ("stream", "reason"), registry=r)
        self._freed_last: dict[Counter, dict[tuple[str, str], int]] = {}
        self._stored_known: dict[Gauge, set[str]] = {}
        # standing questions, from the alert follower (set ``alerts`` to its stats); ``sink`` is sse, mqtt or
        # webhook, ``outcome`` one of DeliveryStats' few outcomes
        self.alerts: DeliveryStats | None = None
        self.alerts_raised = Counter("lucy_alerts_total", "Alerts raised by standing questions.", s, registry=r)
        self.alert_deliveries = Counter(
            "lucy_alert_deliveries_total", "Alert deliveries by sink (sse, mqtt, webhook) and final outcome "
            "(delivered, queued, failed, refused, stale, error); never a host, port or HTTP status.",
            ("sink", "outcome"), registry=r)
        self.alert_latency = Histogram(
            "lucy_alert_latency_seconds", "Wall time from the end of the event to the alert being stored.",
            buckets=ALERT_LATENCY_BUCKETS, registry=r)
        self.watches = Gauge("lucy_watches", "Active standing questions.", s, registry=r)
        self._alerts_last: dict[str, int] = {}
        self._outcomes_last: dict[tuple[str, str], int] = {}
        self._watches_known: set[str] = set()

    # ------------------------------------------------------------------------------------------ mapping

    def _count(self, counter: Counter, stream: str, key: str, value: float, *labels: str) -> None:
        """Advance a counter to a cumulative figure; a figure that went down started again from zero. ``labels``:
        the counter's labels after the stream's name."""
        last = self._last.get((stream, key), 0.0)
        delta = value - last if value >= last else value
        if delta > 0:
            counter.labels(stream, *labels).inc(delta)
        else:
            counter.labels(stream, *labels)  # the series exists from the start, at 0
        self._last[(stream, key)] = value

    def update(self, streams: Iterable[StreamSample]) -> None:
        """Map the current figures of every stream; series of streams no longer listed are removed."""
        with self._lock:
            seen: set[str] = set()
            for sample in streams:
                name, calls, questions = sample.stream, sample.calls, sample.questions
                ingest = sample.progress.ingest
                caption = sample.progress.caption or CaptionProgress()
                seen.add(name)
                self.state.labels(name).set(STATE_CODES[sample.state])
                self._count(self.frames_decoded, name, "decoded", ingest.frames_decoded)
                self._count(self.frames_stored, name, "stored", ingest.frames_stored)
                self._count(self.media, name, "media", ingest.media_seconds)
                self._count(self.reconnects, name, "reconnects", ingest.reconnects)
                self._count(self.decode_errors, name, "decode_errors", ingest.decode_errors)
                self._count(self.worker_restarts, name, "worker_restarts", sample.worker_restarts)
                self.ingested_until.labels(name).set(ingest.ingested_until if ingest.started else 0.0)
                self._map_worker(name, sample.worker_pid)
                self.decode_fps.labels(name).set(ingest.decode_fps)
                self.realtime.labels(name).set(ingest.realtime_factor)

                self._count(self.caption_requests, name, "caption_requests", calls.requests)
                self._count(self.caption_failures, name, "caption_failures", calls.failures)
                self._count(self.prompt_tokens, name, "prompt_tokens", calls.prompt_tokens)
                self._count(self.completion_tokens, name, "completion_tokens", calls.completion_tokens)
                self._count(self.captions_stored, name, "captions_stored", caption.captioned)
                latency = self.caption_latency.labels(name)
                for seconds in calls.drain():
                    latency.observe(seconds)
                self.queue_depth.labels(name).set(caption.pending)
                self.lag.labels(name).set(caption.lag)
                self.captioned_until.labels(name).set(caption.captioned_until)
                speech = sample.progress.speech or SpeechProgress()
                self._count(self.speech_spans, name, "speech_spans", speech.transcribed)
                self._count(self.speech_lines, name, "speech_lines", speech.lines)
                self._count(self.speech_failures, name, "speech_failures", speech.failures)
                self.speech_queue_depth.labels(name).set(speech.pending)
                self.speech_lag.labels(name).set(speech.lag)
                self.speech_until.labels(name).set(speech.transcribed_until)
                self.speech_realtime.labels(name).set(speech.realtime_factor)
                watch = sample.progress.watch or WatchProgress()
                self._count(self.watch_checks, name, "watch_checks", watch.checks)
                self._count(self.watch_confirmations, name, "watch_confirmations", watch.confirmations)
                self._count(self.watch_errors, name, "watch_errors", watch.errors)
                self._count(self.watch_llm_calls, name, "watch_llm_calls", watch.llm_calls)
                for verdict in VERDICTS:
                    self._count(self.watch_verdicts, name, f"verdict_{verdict}", getattr(watch, verdict), verdict)
                detect = sample.progress.detect or DetectProgress()
                self._count(self.detect_frames, name, "detect_frames", detect.frames_detected)
                self._count(self.detect_dropped, name, "detect_dropped", detect.frames_dropped)
                self.detect_seconds.labels(name).set(detect.seconds_per_frame)
                self.detect_lag.labels(name).set(detect.lag)
                self.detect_until.labels(name).set(detect.observed_until)

                self._count(self.questions, name, "questions", questions.answered)
                self._count(self.questions_confident, name, "confident", questions.confident)
                self._count(self.question_failures, name, "question_failures", questions.failures)
                self.questions_in_flight.labels(name).set(questions.in_flight)
                share = questions.confident_share
                if share is not None:
                    self.confident_share.labels(name).set(share)
                else:  # no answers yet: no series (a 0 would read as "never confident")
                    self._remove(self.confident_share, name)
                q_latency, q_iter = self.question_latency.labels(name), self.question_iterations.labels(name)
                q_llm, q_cap = self.question_llm_calls.labels(name), self.question_caption_calls.labels(name)
                for record in questions.drain():
                    q_latency.observe(record.latency_seconds)
                    q_iter.observe(record.iterations)
                    q_llm.observe(record.llm_calls)
                    q_cap.observe(record.caption_calls)
            for gone in self._known - seen:
                self._forget(gone)
            self._known = seen
            self.streams.set(len(seen))
            if self.retention is not None:
                self._map_retention(self.retention)
            if self.alerts is not None:
                self._map_alerts(self.alerts)

    def _map_worker(self, stream: str, pid: int | None) -> None:
        """The worker's CPU time (a new process counts from its own 0) and resident memory, while it runs."""
        figures = process_figures(pid) if pid is not None else None
        self.worker_cpu.labels(stream)  # the series exists from the start, at 0
        if pid is None or figures is None:
            self._remove(self.worker_memory, stream)
            return
        cpu, rss = figures
        last_pid, last_cpu = self._worker_cpu.get(stream, (pid, 0.0))
        delta = cpu - last_cpu if last_pid == pid else cpu
        if delta > 0:
            self.worker_cpu.labels(stream).inc(delta)
        self._worker_cpu[stream] = (pid, max(cpu, last_cpu) if last_pid == pid else cpu)
        self.worker_memory.labels(stream).set(rss)

    def _map_alerts(self, stats: DeliveryStats) -> None:
        raised, outcomes, watches, latencies = stats.snapshot()
        for name, total in raised.items():
            self.alerts_raised.labels(name).inc(total - self._alerts_last.get(name, 0))
        self._alerts_last = raised
        for key, total in outcomes.items():
            self.alert_deliveries.labels(*key).inc(total - self._outcomes_last.get(key, 0))
        self._outcomes_last = outcomes
        for seconds in latencies:
            self.alert_latency.observe(seconds)
        for name, count in watches.items():
            self.watches.labels(name).set(count)
        for name in self._watches_known - set(watches):
            self.watches.remove(name)
        self._watches_known = set(watches)

    def _map_retention(self, stats: RetentionStats) -> None:
        stored, freed, disk_free = stats.snapshot()
        self._map_storage(self.frame_bytes, stored, self.frame_freed, freed)
        recorded, recording_freed = stats.recording_snapshot()
        self._map_storage(self.recording_bytes, recorded, self.recording_freed, recording_freed)
        if disk_free is not None:
            self.disk_free.set(disk_free)

    def _map_storage(self, gauge: Gauge, stored: dict[str, int], counter: Counter,
                     freed: dict[tuple[str, str], int]) -> None:
        """Bytes stored per stream onto ``gauge``, running totals of bytes freed onto ``counter`` (a total that went
        down is a restarted count); streams and keys that are gone lose their series."""
        for name, nbytes in stored.items():
            gauge.labels(name).set(nbytes)
        for name in self._stored_known.get(gauge, set()) - set(stored):
            gauge.remove(name)
        self._stored_known[gauge] = set(stored)
        last_totals = self._freed_last.setdefault(counter, {})
        for key, total in freed.items():
            last = last_totals.get(key, 0)
            counter.labels(*key).inc(total - last if total >= last else total)
            last_totals[key] = total
        for key in set(last_totals) - set(freed):
            counter.remove(*key)
            del last_totals[key]

    def mqtt(self) -> MqttMetrics:
        """The MQTT bridge's metrics, registered on the first call."""
        with self._lock:
            if self._mqtt is None:
                self._mqtt = MqttMetrics(self.registry)
            return self._mqtt

    @staticmethod
    def _remove(metric: Counter | Gauge | Histogram, stream: str) -> None:
        try:
            metric.remove(stream)
        except KeyError:
            pass  # this metric never had the stream

    def _forget(self, stream: str) -> None:
        for metric in self._per_stream:
            self._remove(metric, stream)
        for verdict in VERDICTS:
            try:
                self.watch_verdicts.remove(stream, verdict)
            except KeyError:
                pass
        self._last = {k: v for k, v in self._last.items() if k[0] != stream}
        self._worker_cpu.pop(stream, None)

    def render(self) -> bytes:
        """The text exposition format (``/metrics``)."""
        return generate_latest(self.registry)
