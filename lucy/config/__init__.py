"""Configuration (pydantic-settings) and the memory-level presets."""

from lucy.config.presets import PRESETS, Level, LevelSpec, Preset
from lucy.config.settings import IngestSettings, LucySettings, load_settings

__all__ = ["PRESETS", "IngestSettings", "Level", "LevelSpec", "LucySettings", "Preset", "load_settings"]
