"""One stream's progress, in one typed record.

A recording (:class:`lucy.recorder.StreamRecorder`) measures as it works: the ingestor counts frames in
:class:`lucy.ingest.IngestStats`, the coarse builder counts captions in :class:`lucy.memory.builder.BuilderStats`.
Those live counters freeze into a :class:`StreamProgress` (each knows its own ``snapshot()``), and that record is
what every reader gets, unchanged: the CLI's progress line, the stream worker's reports to the server (the record
itself crosses the pipe), the API's stream status, the Prometheus exporter, MQTT status and the dashboard's history.
The API's JSON view of it is made in one place (:mod:`lucy.runtime.status`).

Frozen and picklable; nothing here imports the rest of Lucy.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """Frames decoded and stored by the current ingest run (``committed``: in the store, all runs)."""

    frames_decoded: int = 0
    frames_stored: int = 0  # by this run
    committed: int = 0  # frames in the store, all runs
    media_start: float | None = None  # media time where this run began; None until its first commit
    ingested_until: float = 0.0  # media time covered by committed frames (by sound, for a stream without pictures)
    decode_fps: float = 0.0
    realtime_factor: float = 0.0  # media seconds ingested per wall second by this run
    decode_errors: int = 0
    reconnects: int = 0
    gaps: int = 0
    audio_seconds: float = 0.0  # sound stored by this run (0: the stream has none)
    audio_until: float = 0.0  # media time up to which sound is committed, all runs
    down: bool = False  # the live source dropped and is being reconnected now

    @property
    def started(self) -> bool:
        """This run has committed frames (before that, ``ingested_until`` says nothing about the store)."""
        return self.media_start is not None

    @property
    def media_seconds(self) -> float:
        """Media seconds ingested by this run."""
        return max(0.0, self.ingested_until - self.media_start) if self.media_start is not None else 0.0


@dataclass(frozen=True, slots=True)
class CaptionProgress:
    """Coarse captions of a stream. A builder's figures count this run; a stream whose memory no builder is
    making now shows only what is stored (``captioned_until``, ``coarse_nodes``) and zeros."""

    captioned: int = 0  # spans captioned by this run
    captioned_until: float = 0.0  # media time covered by contiguous coarse captions from 0
    captions_per_second: float = 0.0  # over the last 30 s
    queued: int = 0  # spans in the builder's bounded queue
    pending: int = 0  # closed spans not captioned yet (the caption queue depth)
    in_flight: int = 0  # describe() calls running now
    coarse_nodes: int = 0  # coarse ingest nodes in memory, all runs
    failures: int = 0  # failed describe() attempts of this run (each one retried)
    last_error: str | None = None  # redacted
    lag: float = 0.0  # media seconds ingested but not captioned yet, as the builder sees them


@dataclass(frozen=True, slots=True)
class SpeechProgress:
    """Transcripts of a stream's audio (:mod:`lucy.memory.speech`), beside its captions. A stream without audio
    shows ``has_audio`` False and zeros."""

    has_audio: bool = False
    transcribed: int = 0  # spans transcribed by this run
    lines: int = 0  # transcript lines stored by this run
    transcribed_until: float = 0.0  # media time covered by contiguous transcripts from 0
    spans_per_second: float = 0.0  # over the last 30 s
    realtime_factor: float = 0.0  # audio seconds transcribed per wall second spent transcribing
    pending: int = 0  # closed spans with audio not transcribed yet
    in_flight: int = 0
    failures: int = 0  # failed transcribe() attempts of this run (each one retried)
    last_error: str | None = None  # redacted
    lag: float = 0.0  # media seconds of committed audio not transcribed yet


@dataclass(frozen=True, slots=True)
class DetectProgress:
    """The detect stage of the current ingest run (:mod:`lucy.ingest.detect`)."""

    frames_detected: int = 0
    frames_dropped: int = 0  # a live source's frames dropped while the detector was behind
    seconds_per_frame: float = 0.0  # detection and tracking of one frame (moving average)
    observed_until: float = 0.0  # media time up to which frames have been through the stage
    lag: float = 0.0  # media seconds handed to the stage and not observed yet
    tracks: int = 0  # track records written (new, updated, ended)


@dataclass(frozen=True, slots=True)
class WatchProgress:
    """The checks of a stream's watches (standing questions) by whoever records it (:mod:`lucy.watch.checker`)."""

    checks: int = 0  # (watch, coarse span) pairs checked, errors included
    yes: int = 0  # final verdicts
    no: int = 0
    maybe: int = 0
    confirmations: int = 0  # "maybe" verdicts confirmed by captioning the span's fine sub-spans
    alerts: int = 0  # alerts stored
    errors: int = 0  # checks that failed
    llm_calls: int = 0
    caption_calls: int = 0


@dataclass(frozen=True, slots=True)
class StreamProgress:
    """A stream's progress at one moment, one record filled by each stage (Frigate's per-camera stats): ingest,
    coarse captioning (None: no captioner builds the stream's memory in this run), transcription, detection and
    the checks of its watches."""

    live: bool | None = None  # None until the stream's first frames are stored
    ingest: IngestProgress = field(default_factory=IngestProgress)
    caption: CaptionProgress | None = None
    speech: SpeechProgress | None = None  # None: no transcriber in this run
    detect: DetectProgress | None = None  # None: no detect stage in this run
    watch: WatchProgress | None = None  # None: no watch checker in this run
