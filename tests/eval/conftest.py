"""Evaluation tests: samples of each benchmark's format around synthetic videos, on the embedded backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from lucy.config import LucySettings, load_settings

EMBEDDED = {"ingest.frame_width": 320, "ingest.frame_height": 180, "captioner.backend": "pixels",
            "captioner.pixels.coarse_max_frames": 8, "reasoner.backend": "lexical", "transcriber.backend": "none",
            "embedder.backend": "none"}
CONFIG = """[ingest]
frame_width = 320
frame_height = 180
[captioner]
backend = "pixels"
[captioner.pixels]
coarse_max_frames = 8
[reasoner]
backend = "lexical"
[transcriber]
backend = "none"
[embedder]
backend = "none"
"""


@pytest.fixture
def embedded(tmp_path: Path) -> LucySettings:
    """Pixels captioner, lexical reasoner, no speech or embeddings, small frames."""
    return load_settings(data=tmp_path / "unused", **EMBEDDED)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """The same settings as a lucy.toml, for the module run in a child process."""
    path = tmp_path / "lucy.toml"
    path.write_text(CONFIG)
    return path
