"""Configuration (pydantic-settings), the memory-level presets, and the names both share (levels, backends).

The names are plain Python and imported at once; the presets and settings are pydantic models, imported on first
use (PEP 562), so that what needs only the names (``lucy --help``) does not pay for building them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lucy.config.names import (
    ALL_STREAMS,
    CAPTIONER_BACKENDS,
    EMBEDDER_BACKENDS,
    FRAME_BACKENDS,
    FRAME_CODECS,
    LEVEL_NAMES_HELP,
    MEMORY_BACKENDS,
    REASONER_BACKENDS,
    TRANSCRIBER_BACKENDS,
    CaptionerBackend,
    EmbedderBackend,
    FrameBackend,
    FrameCodec,
    Level,
    MemoryBackend,
    ReasonerBackend,
    TranscriberBackend,
    check_level_name,
    is_level_name,
    summary_depth,
    summary_level,
)

if TYPE_CHECKING:
    from lucy.config.presets import PRESETS, LevelSpec, Preset
    from lucy.config.settings import IngestSettings, LucySettings, load_settings

_LAZY = {"PRESETS": "lucy.config.presets", "LevelSpec": "lucy.config.presets", "Preset": "lucy.config.presets",
         "IngestSettings": "lucy.config.settings", "LucySettings": "lucy.config.settings",
         "load_settings": "lucy.config.settings"}

__all__ = [
    "ALL_STREAMS", "CAPTIONER_BACKENDS", "EMBEDDER_BACKENDS", "FRAME_BACKENDS", "FRAME_CODECS", "LEVEL_NAMES_HELP",
    "MEMORY_BACKENDS", "PRESETS", "REASONER_BACKENDS", "TRANSCRIBER_BACKENDS", "CaptionerBackend", "EmbedderBackend",
    "FrameBackend", "FrameCodec", "IngestSettings", "Level", "LevelSpec", "LucySettings", "MemoryBackend", "Preset",
    "ReasonerBackend", "TranscriberBackend", "check_level_name", "is_level_name", "load_settings", "summary_depth",
    "summary_level",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value
