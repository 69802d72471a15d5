"""The captioner boundary: ``describe(clip, instruction) -> Caption``. Backends are chosen from config."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from lucy.config import Level
from lucy.ingest.frames import Clip, FrameStore
from lucy.memory.nodes import Caption


class CaptionerError(Exception):
    """The captioner could not produce a caption (server down, timed out, refused, empty reply...).

    Callers treat it as transient: the span stays uncaptioned and is retried later; nothing is lost.
    """


def check_clip(clip: Clip) -> None:
    """Refuse clips no captioner can describe (a caller's bug, not a captioner failure)."""
    frames = clip.frames
    if len(clip) == 0:
        raise ValueError("cannot describe an empty clip (no frames)")
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or len(frames) != len(clip.times):
        raise ValueError(f"clip frames must be uint8 (N, H, W, 3) matching times; got {frames.dtype} "
                         f"{frames.shape} for {len(clip.times)} times")


def pick_evenly(count: int, most: int) -> np.ndarray:
    """Indices of at most ``most`` of ``count`` items, spread evenly, first and last included."""
    if count <= most:
        return np.arange(count)
    if most == 1:
        return np.array([count // 2])
    return np.unique(np.round(np.linspace(0, count - 1, most)).astype(int))


@dataclass(frozen=True, slots=True)
class StoredSpan:
    """Every stored frame of the span a clip was sampled from (``start <= t < end``), read back on demand: what a
    captioner that :attr:`Captioner.looks_between` is handed beside its clip (``stored=``).

    A clip holds the frames of its level's rate (a coarse one, 0.5 fps in the live preset); the frame store keeps
    the finest rate (2 fps), one chunk a frame. A captioner that needs to know when something began or ended more
    exactly than its clip's frames tell reads the few stored frames in between, rather than have every caller
    hand it the whole span at the stored rate (four times the frames in memory for every caption in flight).
    Methods block (frame-store reads): call them from a worker thread.
    """

    frames: FrameStore
    start: float
    end: float

    def times(self) -> np.ndarray:
        """Media times of the span's stored frames (those retention has left), in order."""
        times = self.frames.times()
        lo, hi = np.searchsorted(times, [self.start, self.end], side="left")
        return times[lo:hi]

    def frame_at(self, t: float) -> np.ndarray | None:
        """The stored frame shown at exactly ``t`` (one of :meth:`times`), RGB (H, W, 3); None if it is gone."""
        clip = self.frames.read(t, float(np.nextafter(t, np.inf)))
        return clip.frames[0] if len(clip) else None


class Captioner(ABC):
    """The "eye": turns a clip of frames into text. Implementations must be safe to call concurrently."""

    name: str  # backend name, e.g. "pixels", "openai"
    model: str  # model name recorded on the nodes it makes
    # True for a backend whose describe() also takes ``transcript=`` (what was said in the clip's span, as
    # :func:`lucy.memory.transcribers.format_transcript` lines), given to the model as context (openai).
    hears: bool = False
    # True for a backend whose describe() also takes ``observed=`` (what the detect stage saw in the clip's span,
    # a :class:`lucy.perception.describe.SpanObservations`), written into its caption or given to its model as context.
    sees: bool = False
    # True for a backend whose describe() also takes ``stored=`` (a :class:`StoredSpan`: the span's frames at the
    # stored rate, read on demand), to look between its clip's frames (pixels: when a text appeared and went).
    looks_between: bool = False

    @abstractmethod
    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        """Describe ``clip`` following ``instruction``. ``level`` tells how deep (coarse sees less detail).

        Text read from the video is data: implementations keep it delimited from instructions.
        Raises :class:`CaptionerError` on failure.
        """

    async def aclose(self) -> None:
        """Release clients and connections."""


class WrappingCaptioner(Captioner):
    """A captioner that passes requests on to ``inner`` (a guard, a meter): its name, model and whether it hears (or
    sees) are the inner captioner's, read when asked rather than copied, since a guarded one is made on its first
    caption."""

    inner: Captioner

    @property  # type: ignore[override]
    def name(self) -> str:
        return self.inner.name

    @property  # type: ignore[override]
    def model(self) -> str:
        return self.inner.model

    @property  # type: ignore[override]
    def hears(self) -> bool:
        return self.inner.hears

    @property  # type: ignore[override]
    def sees(self) -> bool:
        return self.inner.sees

    @property  # type: ignore[override]
    def looks_between(self) -> bool:
        return self.inner.looks_between
