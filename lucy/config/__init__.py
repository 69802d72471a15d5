"""Configuration (pydantic-settings), the memory-level presets, and the names both share (levels, backends)."""

from lucy.config.names import (
    CAPTIONER_BACKENDS,
    EMBEDDER_BACKENDS,
    FRAME_CODECS,
    LEVEL_NAMES_HELP,
    REASONER_BACKENDS,
    TRANSCRIBER_BACKENDS,
    CaptionerBackend,
    EmbedderBackend,
    FrameCodec,
    Level,
    ReasonerBackend,
    TranscriberBackend,
    check_level_name,
    is_level_name,
    summary_depth,
    summary_level,
)
from lucy.config.presets import PRESETS, LevelSpec, Preset
from lucy.config.settings import IngestSettings, LucySettings, load_settings

__all__ = [
    "CAPTIONER_BACKENDS", "EMBEDDER_BACKENDS", "FRAME_CODECS", "LEVEL_NAMES_HELP", "PRESETS", "REASONER_BACKENDS", "TRANSCRIBER_BACKENDS",
    "CaptionerBackend", "EmbedderBackend",
    "FrameCodec", "IngestSettings", "Level", "LevelSpec", "LucySettings", "Preset", "ReasonerBackend",
    "TranscriberBackend", "check_level_name", "is_level_name", "load_settings", "summary_depth", "summary_level",
]
