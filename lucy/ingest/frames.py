"""The frame-store boundary: what ingest writes and what captioning and questions read back."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from lucy.errors import StoreError

_STREAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_stream_name(name: str) -> str:
    """Stream names become folder names: refuse anything that could escape the data directory."""
    if not _STREAM_NAME.fullmatch(name) or ".." in name:
        raise StoreError(
            f"bad stream name {name!r}: use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit")
    return name


@dataclass(frozen=True, slots=True)
class Clip:
    """Frames of one stream, in media-time order: ``frames[i]`` was shown at ``times[i]`` seconds."""

    frames: np.ndarray  # uint8 (N, H, W, 3), RGB
    times: np.ndarray  # float64 (N,), media seconds from the stream's start

    def __len__(self) -> int:
        return len(self.times)


@dataclass(frozen=True, slots=True)
class Gap:
    """Media time during which a live stream delivered nothing (it dropped and was reconnected)."""

    start: float
    end: float
    reason: str = ""


@dataclass(frozen=True)
class StreamInfo:
    """What a stream's frame store holds; everything here is safe to show (the source is redacted)."""

    name: str
    source: str
    live: bool
    frames: int
    first_time: float | None
    last_time: float | None
    stored_fps: float
    width: int
    height: int
    codec: str
    wall_start: float | None  # Unix time of media time 0 (live streams)
    complete: bool  # a file was decoded to its end
    lost: str | None  # what a damaged source could not give
    gaps: list[Gap] = field(default_factory=list)
    expired_before: float = 0.0  # retention deleted every frame before this media time (memory text is kept)
    thinned_before: float = 0.0  # frames before this media time were thinned to a coarse rate by retention

    @property
    def media_seconds(self) -> float:
        """Media time covered so far (the end of the last stored frame's sampling interval)."""
        return 0.0 if self.last_time is None else self.last_time + 1.0 / self.stored_fps


@dataclass(frozen=True)
class RetentionState:
    """What retention has deleted from a stream's frames (see :mod:`lucy.ingest.retention`).

    Frames before ``dropped_before`` are gone. Between ``dropped_before`` and ``thinned_before`` only the first
    frame of each ``1 / fps`` slot is left, ``fps`` being the rate of the thinning segment the frame lies in
    (``thinned``: ``(before, fps)`` pairs in time order, each covering media time up to its ``before``).
    """

    dropped_before: float = 0.0
    thinned: tuple[tuple[float, float], ...] = ()
    bytes_freed: int = 0  # by retention over the stream's life

    @property
    def thinned_before(self) -> float:
        return max(self.dropped_before, self.thinned[-1][0]) if self.thinned else self.dropped_before


class FrameStore(ABC):
    """One stream's stored frames. One writer appends; any number of readers, in any process."""

    name: str

    @abstractmethod
    def append(self, frames: np.ndarray, times: np.ndarray) -> int:
        """Store and commit frames (times strictly increasing, after all stored ones); return the count."""

    @abstractmethod
    def committed(self) -> int:
        """Number of frames a reader can see. Never counts a frame that is not fully written."""

    @abstractmethod
    def times(self) -> np.ndarray:
        """Media times of the committed frames a reader can get back (those retention has not deleted)."""

    @abstractmethod
    def read(self, start: float, end: float, fps: float | None = None) -> Clip:
        """Committed frames with ``start <= t < end``, thinned to about ``fps`` (None: all stored frames).
        Frames deleted by retention are never returned (a span whose frames expired gives an empty clip)."""

    @abstractmethod
    def info(self) -> StreamInfo:
        """The stream's description and progress."""

    def available_from(self) -> float:
        """Media time before which retention has deleted every frame (0.0: none deleted). Memory text of that
        time is kept; only its frames are gone, so it cannot be captioned again."""
        return 0.0

    def retention_state(self) -> RetentionState:
        """What retention has deleted so far (nothing, for stores without retention)."""
        return RetentionState()


def pick_rate(times: np.ndarray, start: float, end: float, fps: float | None) -> np.ndarray:
    """Indices of the frames in ``[start, end)`` nearest to a regular grid of ``fps`` frames per second."""
    lo, hi = np.searchsorted(times, [start, end], side="left")
    if fps is None or hi - lo <= 1:
        return np.arange(lo, hi)
    window = times[lo:hi]
    first, last = float(window[0]), float(window[-1])
    count = max(1, int(np.floor((last - first) * fps + 1e-6)) + 1)
    targets = first + np.arange(count) / fps
    right = np.clip(np.searchsorted(window, targets), 1, len(window) - 1)
    left = right - 1
    nearest = np.where(targets - window[left] <= window[right] - targets, left, right)
    return lo + np.unique(nearest)
