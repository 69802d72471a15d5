"""A stream's status as the API, MQTT and the dashboard show it: the one JSON view of its progress record.

``GET /v1/streams/{name}``, the retained ``<prefix>/<stream>/status`` MQTT message and the dashboard's table and
history all come from :func:`stream_status`, which reads a :class:`lucy.metrics.progress.StreamProgress` (as the
stream's worker reported it, or as the stores tell it for a stream no worker records now) and the stream's
lifecycle. :class:`lucy.service.schemas.StreamStatus` documents the shape. Safe to show: the source is redacted.
The dashboard's live feed (:mod:`lucy.service.live_feed`) samples these.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lucy.config import Level
from lucy.ingest import StreamInfo
from lucy.ingest.lock import is_held, read_record, stream_lock
from lucy.memory.nodes import INGEST_ORIGIN
from lucy.memory.store import MemoryStore
from lucy.metrics import CaptionProgress, IngestProgress, QuestionStats, StreamProgress
from lucy.redaction import redact_url
from lucy.runtime.messages import StreamState, stored_state
from lucy.runtime.registry import StreamSpec


def stream_status(name: str, source: str, progress: StreamProgress, questions: QuestionStats, *,
                  spec: StreamSpec | None = None, state: StreamState = StreamState.STOPPED, error: str | None = None,
                  lost: str | None = None, started_at: float | None = None, ended_at: float | None = None,
                  worker_pid: int | None = None, restarts: int = 0) -> dict[str, Any]:
    """The status of a stream: one the server records (``spec``), or one only stored in its data directory.

    ``progress.caption`` must be set (for a stream no builder captions now, :func:`stored_captions`)."""
    ingest, caption = progress.ingest, progress.caption or CaptionProgress()
    ingested, captioned = ingest.ingested_until, caption.captioned_until
    return {
        "name": name, "source": redact_url(source), "preset": spec.preset if spec else None,
        "captioner": spec.captioner if spec else None, "realtime": spec.realtime if spec else False,
        "managed": spec is not None, "state": state.value, "error": error, "lost": lost, "live": progress.live,
        "created": spec.created if spec else None, "started_at": started_at, "ended_at": ended_at,
        "ingested_until": round(ingested, 3), "captioned_until": round(captioned, 3),
        "lag_seconds": round(max(0.0, ingested - captioned), 3),
        "decode_fps": round(ingest.decode_fps, 2), "realtime_factor": round(ingest.realtime_factor, 3),
        "frames": ingest.committed, "reconnects": ingest.reconnects, "decode_errors": ingest.decode_errors,
        "gaps": ingest.gaps, "worker_pid": worker_pid, "restarts": restarts,
        "caption": {"captions_per_second": round(caption.captions_per_second, 4), "queued": caption.queued,
                    "pending": caption.pending, "in_flight": caption.in_flight, "coarse_nodes": caption.coarse_nodes,
                    "failures": caption.failures, "last_error": caption.last_error},
        "questions": {"answered": questions.answered, "confident": questions.confident,
                      "failed": questions.failures, "in_flight": questions.in_flight},
        # transcription beside captioning (None: no transcriber records this stream now)
        "speech": None if progress.speech is None else {
            "has_audio": progress.speech.has_audio, "transcribed_until": round(progress.speech.transcribed_until, 3),
            "lag_seconds": round(progress.speech.lag, 3), "lines": progress.speech.lines,
            "spans_per_second": round(progress.speech.spans_per_second, 4),
            "realtime_factor": round(progress.speech.realtime_factor, 2), "pending": progress.speech.pending,
            "in_flight": progress.speech.in_flight, "failures": progress.speech.failures,
            "last_error": progress.speech.last_error},
        # the detect stage of ingest (None: no detector runs on this stream now)
        "detect": None if progress.detect is None else {
            "frames": progress.detect.frames_detected, "dropped": progress.detect.frames_dropped,
            "seconds_per_frame": round(progress.detect.seconds_per_frame, 4),
            "observed_until": round(progress.detect.observed_until, 3), "lag_seconds": round(progress.detect.lag, 3),
            "tracks": progress.detect.tracks},
        # the checks of the stream's watches (None: no checker records this stream now)
        "watch": None if progress.watch is None else {
            "checks": progress.watch.checks, "yes": progress.watch.yes, "no": progress.watch.no,
            "maybe": progress.watch.maybe, "confirmations": progress.watch.confirmations,
            "alerts": progress.watch.alerts, "errors": progress.watch.errors, "llm_calls": progress.watch.llm_calls,
            "caption_calls": progress.watch.caption_calls},
    }


def history_point(status: dict[str, Any]) -> dict[str, Any]:
    """One sample of a stream's status for the dashboard's charts (``GET /v1/streams/{name}/history``)."""
    return {"t": round(time.time(), 3), "state": status["state"], "ingested_until": status["ingested_until"],
            "captioned_until": status["captioned_until"], "lag_seconds": status["lag_seconds"],
            "captions_per_second": status["caption"]["captions_per_second"], "decode_fps": status["decode_fps"]}


def stored_captions(memory: MemoryStore, name: str) -> CaptionProgress:
    """The coarse captions of a stream that no builder captions now: what memory holds, nothing in flight."""
    return CaptionProgress(captioned_until=memory.captioned_until(name),
                           coarse_nodes=memory.count(name, level=Level.COARSE.value, origin=INGEST_ORIGIN))


def stored_stream_state(data: Path, info: StreamInfo) -> StreamState:
    """The state of a stream this process does not run, from its store and its writer lock in ``data``
    (:func:`lucy.runtime.messages.stored_state`): what the API, MQTT and ``lucy streams`` show for it. The writer's
    lock record says whether it paces a file and whether its live source is down (being reconnected)."""
    lock = stream_lock(data, info.name)
    writing = is_held(lock)
    told = (read_record(lock.path) or {}) if writing else {}
    return stored_state(live=info.live, complete=info.complete, lost=info.lost, writing=writing,
                        paced=told.get("paced") is True, down=told.get("down") is True)


def stored_progress(info: StreamInfo, memory: MemoryStore) -> StreamProgress:
    """The progress of a stream that nobody records now, as its stores tell it."""
    return StreamProgress(live=info.live,
                          ingest=IngestProgress(committed=info.frames, ingested_until=info.media_seconds,
                                                gaps=len(info.gaps)),
                          caption=stored_captions(memory, info.name))
