"""Request and response bodies of the HTTP API (pydantic at the edge; they make the OpenAPI docs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lucy.config import CaptionerBackend
from lucy.runtime.messages import StreamState
from lucy.untrusted import normalise_question


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StreamRetention(_Body):
    """A stream's own frame retention ages; an unset one is the server's (``retention`` settings)."""

    full_seconds: float | None = Field(
        None, ge=0, le=10 * 366 * 86_400,
        description="Frames older than this (media seconds behind the newest) are thinned to the coarse rate "
                    "(0: never).")
    keep_seconds: float | None = Field(
        None, ge=0, le=10 * 366 * 86_400,
        description="Frames older than this are deleted; memory text is kept (0: never).")


class StreamCreate(_Body):
    """A stream to ingest."""

    name: str = Field(min_length=1, max_length=64, description="Stream name: letters, digits, '_', '-', '.'.",
                      examples=["door"])
    source: str = Field(min_length=1, max_length=4096,
                        description="Absolute path of a video file, or an rtsp://, rtsps://, http:// or https:// URL "
                                    "(credentials in it are never shown back).",
                        examples=["rtsp://user:password@camera.local:554/stream1"])
    preset: str | None = Field(None, description="Memory-level preset (default: the server's).")
    captioner: CaptionerBackend | None = Field(
        None, description="Captioner that builds the stream's memory (default: the server's).")
    realtime: bool = Field(False, description="Pace a file like a live stream.")
    retention: StreamRetention | None = Field(
        None, description="The stream's own frame retention ages (default: the server's).")
    recording: bool | None = Field(
        None, description="Keep a live stream's original video as MP4 segments, for clips (default: the server's "
                          "recording.enabled; a file is its own recording).")


class CaptionStatus(BaseModel):
    captions_per_second: float
    queued: int
    pending: int
    in_flight: int
    coarse_nodes: int
    failures: int
    last_error: str | None


class SpeechStatus(BaseModel):
    """Transcription of the stream's sound, beside its captions."""

    has_audio: bool
    transcribed_until: float = Field(description="Media seconds covered by contiguous transcripts.")
    lag_seconds: float = Field(description="Media seconds of stored sound not transcribed yet.")
    lines: int
    spans_per_second: float
    realtime_factor: float = Field(description="Sound seconds transcribed per wall second spent transcribing.")
    pending: int
    in_flight: int
    failures: int
    last_error: str | None


class DetectStatus(BaseModel):
    """The detect stage of ingest: objects found on full-resolution frames and tracked."""

    frames: int = Field(description="Frames through the detector and tracker by this run.")
    dropped: int = Field(description="Frames of a live source dropped while the detector was behind.")
    seconds_per_frame: float = Field(description="Detection and tracking time of one frame (moving average).")
    observed_until: float = Field(description="Media seconds up to which the stream has been through the detector.")
    lag_seconds: float = Field(description="Media seconds decoded but not through the detector yet.")
    tracks: int = Field(description="Track records written by this run (new, updated, ended).")


class WatchCounts(BaseModel):
    """The checks of the stream's standing questions by whoever records it (closed coarse spans)."""

    checks: int = Field(description="(watch, span) pairs checked by this run, errors included.")
    yes: int
    no: int
    maybe: int = Field(description="Final maybes (unconfirmed: the confirmation budget was spent).")
    confirmations: int = Field(description="Maybes confirmed by captioning the span's fine sub-spans.")
    alerts: int
    errors: int
    llm_calls: int
    caption_calls: int


class QuestionCounts(BaseModel):
    answered: int
    confident: int
    failed: int
    in_flight: int


class StreamStatus(BaseModel):
    """A stream's state and progress (made by :func:`lucy.runtime.status.stream_status` from the stream's one
    progress record). ``source`` is shown with credentials redacted."""

    name: str
    source: str
    preset: str | None
    captioner: str | None
    realtime: bool
    managed: bool = Field(description="Ingested by this server (False: only stored in its data directory).")
    state: StreamState = Field(description="One of the stream states of the README's table (StreamState).")
    error: str | None
    lost: str | None
    live: bool | None
    created: float | None
    started_at: float | None
    ended_at: float | None
    ingested_until: float = Field(description="Media seconds stored.")
    captioned_until: float = Field(description="Media seconds covered by contiguous coarse captions.")
    lag_seconds: float = Field(description="ingested_until - captioned_until.")
    decode_fps: float
    realtime_factor: float
    frames: int
    reconnects: int
    decode_errors: int
    gaps: int
    worker_pid: int | None = Field(
        None, description="Process id of the worker that ingests and captions the stream, while it runs.")
    restarts: int = Field(0, description="Times the stream's worker was restarted after dying without ending its "
                                         "run (killed by the OS, crashed in native code).")
    caption: CaptionStatus
    questions: QuestionCounts
    speech: SpeechStatus | None = Field(None, description="None: no transcriber records the stream now.")
    detect: DetectStatus | None = Field(None, description="None: no detector runs on the stream now.")
    watch: WatchCounts | None = Field(None, description="None: no watch checker records the stream now.")
    purged: bool | None = None


class StreamList(BaseModel):
    streams: list[StreamStatus]


class HistoryPoint(BaseModel):
    t: float = Field(description="Unix time of the sample.")
    state: str
    ingested_until: float
    captioned_until: float
    lag_seconds: float
    captions_per_second: float
    decode_fps: float


class History(BaseModel):
    stream: str
    interval_seconds: float
    points: list[HistoryPoint]


class QuestionIn(_Body):
    """A question about everything a stream has ingested so far."""

    question: str = Field(min_length=1, max_length=100_000, description="The question (size limit: "
                          "service.max_question_chars).", examples=["What is the delivery van's plate?"])
    options: list[str] = Field(default_factory=list, max_length=64,
                               description="Answer options of a multiple-choice question (empty: open question).")


class QuestionsIn(QuestionIn):
    """A question across streams: about everything every stream (or some) has ingested so far."""

    streams: list[str] | None = Field(None, max_length=256, description="The streams to ask about (default: every "
                                      "stream of the data directory).", examples=[["door", "yard"]])


class EvidenceOut(BaseModel):
    start: float
    end: float
    wall_start: str | None = None
    wall_end: str | None = None
    stream: str | None = Field(None, description="The stream the span is on (answers across streams).")
    clip_url: str | None = Field(None, description="The clip of the span to watch (GET /v1/streams/{s}/clip, "
                                 "with the API token).")


class AnswerOut(BaseModel):
    """The answer object (the same as ``lucy ask --json``)."""

    model_config = ConfigDict(extra="allow")

    answer: str
    option_index: int | None = None
    confident: bool
    evidence: list[EvidenceOut]
    iterations: int
    llm_calls: int
    caption_calls: int
    horizon: float
    trace: list[dict[str, Any]]


class MemoryNodeOut(BaseModel):
    id: int | None
    stream: str
    level: str
    start: float
    end: float
    text: str
    instruction: str
    origin: str
    parent: int | None
    model: str
    created: float


class MemoryOut(BaseModel):
    stream: str
    level: str | None
    start: float
    end: float | None
    nodes: list[MemoryNodeOut]
    truncated: bool


class SearchHitOut(BaseModel):
    """One memory node that matches a search, with how it matched."""

    stream: str
    node_id: int | None
    level: str
    start: float
    end: float
    text: str
    snippet: str = Field(description="The line of the text that matched best (boilerplate header lines skipped).")
    origin: str
    score: float = Field(description="Relevance from 0 to 1: closeness in meaning (the cosine of the search and the "
                                     "text or its best line, mapped linearly from 0.70 to 0.90) combined with the "
                                     "share of the search's words the text holds; below 0.3 a hit is not returned "
                                     "unless it holds every word.")
    lexical_rank: int | None = Field(description="Rank among the word matches (1: best; None: no word matched).")
    semantic_rank: int | None = Field(description="Rank by meaning (None: not among the nearest, or words only).")
    similarity: float | None = Field(description="Cosine similarity of the query and the text (None: words only).")
    frame_url: str | None = Field(
        description="The stored frame at the hit's middle time (GET it with the same token); None when the stream "
                    "has no video or retention has deleted the frames of that time.")


class SearchOut(BaseModel):
    stream: str | None = Field(description="The stream searched (None when several were).")
    streams: list[str] = Field(description="Every stream searched.")
    query: str
    semantic: bool = Field(description="Whether hits were also ranked by meaning (False: by words only).")
    no_match: bool = Field(description="True when nothing in memory matches well enough: hits is empty.")
    hits: list[SearchHitOut] = Field(description="Best first, one per stream and time span.")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "lucy"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = Field(max_length=64)
    content: str | list[dict[str, Any]] | None = None


class ChatStreamOptions(BaseModel):
    """OpenAI's ``stream_options``: with ``include_usage``, a last chunk (no choices) carries the reply's usage."""

    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI chat-completions request; ``model`` names a stream. The last user message is what is asked; earlier
    user and assistant turns give a follow-up its context (see :mod:`lucy.service.conversation`). Sampling
    parameters are accepted and ignored (answers come from the stream's memory). ``options`` (via ``extra_body``)
    makes it multiple choice."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=64)
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    stream_options: ChatStreamOptions | None = None
    options: list[str] = Field(default_factory=list, max_length=64)


class WatchIn(_Body):
    """A standing question: asked of the stream's memory as it grows; each time it comes true, an alert."""

    question: str = Field(min_length=1, max_length=500, description="What to watch for, as a yes/no question.",
                          examples=["Is a delivery van at the gate?"])

    @field_validator("question")
    @classmethod
    def _visible_question(cls, value: str) -> str:
        return normalise_question(value, what="watch question")[0]  # an InputError is a ValueError: 422
    cooldown_seconds: float | None = Field(
        None, ge=0, le=86_400, description="Quiet time after an alert before the watch alerts again (default: the "
                                           "server's).")
    webhook_url: str | None = Field(
        None, min_length=8, max_length=2048,
        description="http:// or https:// URL the server POSTs each alert to (signed with alerts.webhook_secret when "
                    "set). The server connects outward to it: never to link-local or cloud metadata addresses, "
                    "nor to its own or Ray's ports on loopback; with alerts.webhook_allowed_hosts set, only to "
                    "those hosts (else 422).",
        examples=["https://hooks.example.com/lucy"])

    @field_validator("webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from urllib.parse import urlsplit

        if any(c.isspace() for c in value):
            raise ValueError("the webhook URL must not contain spaces")
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018  (raises on a bad port)
        except ValueError as err:
            raise ValueError(f"not a URL: {err}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the webhook URL must be http://host/... or https://host/...")
        return value


class WatchOut(BaseModel):
    id: int
    stream: str
    question: str
    cooldown_seconds: float
    webhook_url: str | None
    created: float = Field(description="Unix time.")
    active: bool


class WatchList(BaseModel):
    stream: str
    watches: list[WatchOut]


class AlertOut(BaseModel):
    """A standing question that came true: when (media seconds), why, and the frame it was seen on."""

    id: int
    watch_id: int
    stream: str
    question: str
    start: float = Field(description="Media seconds: start of the span that answered yes.")
    end: float
    reason: str = Field(description="The reasoner's reason (text from the model: show it as text).")
    frame_time: float
    level: str
    created: float = Field(description="Unix time the alert was stored.")
    event_end: float | None = None
    llm_calls: int
    caption_calls: int
    frame_url: str = Field(description="The frame at frame_time (GET it with the same token).")


class AlertList(BaseModel):
    stream: str
    alerts: list[AlertOut]


class PathPointOut(BaseModel):
    time: float = Field(description="Media seconds.")
    x: float = Field(description="Centre of the object's box, as a fraction of the frame's width.")
    y: float = Field(description="Centre of the object's box, as a fraction of the frame's height.")


class ObjectOut(BaseModel):
    """A tracked object (an event, as Frigate's): one object followed over time, not one line per frame."""

    id: int = Field(description="Track id, unique within the stream (across runs).")
    stream: str
    label: str = Field(description="COCO's name of what it is: person, car, truck, bicycle, dog, ...")
    first_seen: float = Field(description="Media seconds.")
    last_seen: float = Field(description="Media seconds (so far, while active).")
    dwell: float = Field(description="last_seen - first_seen, seconds.")
    entered: str = Field(description="Where it came into the picture: left, right, top, bottom, or 'in view' (there "
                                     "when first seen).")
    exited: str | None = Field(description="Where it left: an edge, or 'in view' (lost in the middle of the "
                                           "picture); None while it is still tracked.")
    moving: bool = Field(description="False: it stayed in (about) one place all its life (a parked car).")
    attributes: dict[str, str] = Field(
        description="What a person would say of it: colour (a vehicle's), upper / lower (a person's clothes), face "
                    "('seen'). Read from video: show it as text.")
    score: float = Field(description="The detector's best score for it (0-1).")
    path: list[PathPointOut] = Field(description="A summary of where it went, first and last points included.")
    best_time: float = Field(description="Media seconds of its best (largest, most confident) view.")
    best_box: list[float] = Field(description="Its box then: x0, y0, x1, y1 as fractions of the frame.")
    active: bool = Field(description="Still tracked (it has not left or been lost yet).")
    snapshot_url: str | None = Field(description="A JPEG of its best frame with its box drawn (GET it with the same "
                                                 "token); null when none was kept (e.g. detect.snapshots = false).")
    clip_url: str = Field(description="The clip of it to watch (GET /v1/streams/{s}/clip with the same token): its "
                                      "whole time in view, or the first minute of a longer stay.")


class ObjectList(BaseModel):
    stream: str
    label: str | None
    start: float | None = Field(description="from, media seconds (None: the start).")
    end: float | None = Field(description="to, media seconds (None: the end).")
    objects: list[ObjectOut] = Field(description="Seen at any time in [from, to), by first_seen, oldest first.")
    truncated: bool = Field(description="More objects matched than limit: ask again from a later time.")
