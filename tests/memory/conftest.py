"""Fixtures for memory tests: an in-process captioner whose speed and failures the test controls, videos, and a
real PostgreSQL server (for the PostgreSQL memory store)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lucy.config import Level
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import Captioner, CaptionerError
from lucy.memory.nodes import Caption
from lucy.synth import write_video


class ClipCaptioner(Captioner):
    """Describes a clip by what it holds (frame times and mean colour), so a test can check which frames a
    caption was made from. ``fail(call_number)`` returning True makes that call raise CaptionerError;
    ``gate`` (a threading.Event) holds every call until it is set."""

    name = "clip"
    model = "clip-test-1"

    def __init__(self, *, delay: float = 0.0, fail: Callable[[int], bool] | None = None,
                 gate: threading.Event | None = None) -> None:
        self.delay = delay
        self.fail = fail
        self.gate = gate
        self.calls = 0
        self.captions: list[tuple[float, float, int]] = []  # (first time, last time, frames) of each success
        self.in_flight = 0
        self.peak_in_flight = 0
        self.starts: list[tuple[float, int]] = []  # (monotonic time, calls in flight with it) of each call
        self.first_failure: float | None = None
        self.closed = False
        self._lock = threading.Lock()

    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        with self._lock:
            self.calls += 1
            call = self.calls
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.starts.append((time.monotonic(), self.in_flight))
        try:
            if self.gate is not None:
                while not self.gate.is_set():
                    await asyncio.sleep(0.01)
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail is not None and self.fail(call):
                if self.first_failure is None:
                    self.first_failure = time.monotonic()
                raise CaptionerError(f"scripted failure of call {call}")
            first, last = float(clip.times[0]), float(clip.times[-1])
            rgb = clip.frames.reshape(-1, 3).mean(axis=0)
            with self._lock:
                self.captions.append((first, last, len(clip)))
            text = (f"{len(clip)} frames from {first:.2f} s to {last:.2f} s, level {level.value}, "
                    f"mean colour {rgb[0]:.0f} {rgb[1]:.0f} {rgb[2]:.0f}")
            return Caption(text=text, model=self.model, frames=len(clip))
        finally:
            with self._lock:
                self.in_flight -= 1

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
def clip_captioner():
    """The :class:`ClipCaptioner` class (construct it with the behaviour a test needs)."""
    return ClipCaptioner


@pytest.fixture(scope="session")
def five_span_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """270 s of small generated video: four whole 60 s coarse spans and a 30 s partial one."""
    return write_video(tmp_path_factory.mktemp("memory-videos") / "five.mp4", duration=270, fps=4,
                       width=160, height=96)
