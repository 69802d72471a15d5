"""Names that config, the CLI, the API and the backends share, defined once: memory levels and backend names.

A backend name is a ``Literal`` (what pydantic validates in settings and API bodies) and a tuple of the same
names (what argparse and hand-written checks offer); the tuple is derived from the ``Literal``, so the two cannot
drift apart.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal, get_args


class Level(StrEnum):
    """Memory depths, coarsest first. Summary levels above coarse (:func:`summary_level`) are built by the query
    stage."""

    COARSE = "coarse"
    FINE = "fine"
    ULTRA_FINE = "ultra_fine"

    @property
    def deeper(self) -> Level | None:
        order = list(Level)
        i = order.index(self)
        return order[i + 1] if i + 1 < len(order) else None

    @property
    def depth(self) -> int:
        """0 for coarse, 1 for fine, 2 for ultra_fine."""
        return list(Level).index(self)


SUMMARY_PREFIX = "summary"
MAX_SUMMARY_DEPTH = 99
_LEVEL_NAME = re.compile(
    rf"^(?:{'|'.join(level.value for level in Level)}|{SUMMARY_PREFIX}[1-9][0-9]?)$")
LEVEL_NAMES_HELP = f"{', '.join(level.value for level in Level)} or {SUMMARY_PREFIX}N"


def summary_level(depth: int) -> str:
    """The name of the summary level ``depth`` levels above coarse: ``summary1``, ``summary2``, ..."""
    if not 1 <= depth <= MAX_SUMMARY_DEPTH:
        raise ValueError(f"summary depth {depth} is outside 1-{MAX_SUMMARY_DEPTH}")
    return f"{SUMMARY_PREFIX}{depth}"


def summary_depth(level: str) -> int:
    """1 for ``summary1``, 2 for ``summary2``, ...; 0 for the memory levels (and anything else)."""
    if level.startswith(SUMMARY_PREFIX) and level[len(SUMMARY_PREFIX):].isdigit():
        return int(level[len(SUMMARY_PREFIX):])
    return 0


def is_level_name(name: str) -> bool:
    """Whether ``name`` names a memory level (coarse, fine, ultra_fine) or a summary level (summary1-99)."""
    return _LEVEL_NAME.fullmatch(name) is not None


def check_level_name(name: str) -> str:
    """``name`` if it names a level; else :class:`ValueError` saying which names there are."""
    if not is_level_name(name):
        raise ValueError(f"unknown level {name!r}: use {LEVEL_NAMES_HELP}")
    return name


# ------------------------------------------------------------------------------------------------ streams

ALL_STREAMS = "_all"
"""What stands for every stream of the data directory where one stream's name is expected: the OpenAI chat API's
model for questions across all streams, and the stream a question across streams is recorded under in the question
history. Stream names start with a letter or a digit (lucy.ingest.frames.check_stream_name), so no stream can take
this name (tests/query/test_across.py checks it)."""


# ------------------------------------------------------------------------------------------------ backends

CaptionerBackend = Literal["pixels", "openai", "vllm", "none"]
"""Captioners: pixels (embedded, CPU), openai (any compatible server), vllm (in-process GPU), none."""
CAPTIONER_BACKENDS: tuple[str, ...] = get_args(CaptionerBackend)

TranscriberBackend = Literal["whisper", "openai", "none"]
"""Transcribers: whisper (embedded faster-whisper, CPU), openai (any compatible /v1/audio/transcriptions), none."""
TRANSCRIBER_BACKENDS: tuple[str, ...] = get_args(TranscriberBackend)

EmbedderBackend = Literal["local", "openai", "none"]
"""Embedders (semantic memory search): local (embedded e5 and MiniLM, CPU), openai (any compatible /v1/embeddings),
none."""
EMBEDDER_BACKENDS: tuple[str, ...] = get_args(EmbedderBackend)

# Benchmarks `lucy eval` reads from their own annotation files (lucy.eval.formats).
Benchmark = Literal["videomme", "lvbench", "mlvu", "egomem", "ovobench"]
BENCHMARKS: tuple[str, ...] = get_args(Benchmark)

ReasonerBackend = Literal["lexical", "openai"]
"""Reasoners: lexical (embedded, deterministic, CPU), openai (any compatible chat model)."""
REASONER_BACKENDS: tuple[str, ...] = get_args(ReasonerBackend)

DetectorBackend = Literal["nanodet", "ssd-oid", "hog", "none"]
"""Object detectors of the detect stage: nanodet (NanoDet-m, 80 COCO classes, ONNX on the CPU), ssd-oid
(SSD-MobileNetV2 on Open Images V4: faster, 23 classes), hog (OpenCV's HOG people detector, no model file, people
only), none (no detect stage)."""
DETECTOR_BACKENDS: tuple[str, ...] = get_args(DetectorBackend)

MemoryBackend = Literal["sqlite", "postgres"]
"""Memory stores: sqlite (one file in the data directory, one machine), postgres (a shared PostgreSQL database)."""
MEMORY_BACKENDS: tuple[str, ...] = get_args(MemoryBackend)

FrameBackend = Literal["local", "s3"]
"""Frame stores: local (Zarr in the data directory), s3 (Zarr in an S3 bucket, over obstore)."""
FRAME_BACKENDS: tuple[str, ...] = get_args(FrameBackend)

FrameCodec = Literal["jpeg", "jpeg420", "jpegxl", "zstd"]
"""Per-frame compression in the frame store: jpeg keeps colour at full resolution (4:4:4), jpeg420 at half (fewer
bytes; the colour of small letters and objects blurs)."""
FRAME_CODECS: tuple[str, ...] = get_args(FrameCodec)
