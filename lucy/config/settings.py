"""Lucy's configuration: a TOML file, then ``LUCY_*`` environment variables, then command-line flags.

Every field is bounded and described; unknown keys are refused at start (``extra="forbid"``), so a typo in
``lucy.toml`` fails loudly instead of being ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
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
    codec: Literal["jpeg", "jpegxl", "zstd"] = Field(
        "jpeg", description="Per-frame compression in the Zarr store (see bench/ingest.py for the trade-off).")
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
    decode_threads: int = Field(0, ge=0, le=64, description="FFmpeg decoder threads (0: automatic).")


class LucySettings(BaseSettings):
    """Everything Lucy can be told. Nested sections map to TOML tables and ``LUCY_SECTION__KEY`` variables."""

    model_config = SettingsConfigDict(
        env_prefix="LUCY_", env_nested_delimiter="__", extra="forbid", validate_assignment=True)

    data: Path = Field(Path("lucy-data"), description="Data directory (frame store and memory).")
    preset: str = Field("live", description=f"Memory-level table, one of: {', '.join(PRESETS)}.")
    ingest: IngestSettings = Field(default_factory=IngestSettings)

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value not in PRESETS:
            raise ValueError(f"unknown preset {value!r}; choose one of: {', '.join(PRESETS)}")
        return value

    @property
    def levels(self) -> Preset:
        return PRESETS[self.preset]

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


def _config_file() -> Path | None:
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
    if config_file is not None:
        if not config_file.is_file():
            raise LucyError(f"configuration file {config_file} does not exist")
        os.environ[CONFIG_ENV] = str(config_file)
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
