"""Moving regions and tracks across the sampled frames of a scene, told in words a person would use.

Moving regions come from differencing consecutive frames of one scene on a small grey picture (160 px wide):
pixels that change by more than ``DELTA`` grey levels, closed and grouped into connected blobs. Background
models (MOG2) need dozens of frames to learn a background; a coarse span sampled at 0.5 fps gives 30 frames a
minute with the camera's content changing between them, so plain differencing is both cheaper and steadier here.
Tracks join blobs (or people boxes) frame to frame by nearest centroid within ``MAX_STEP`` of the frame size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

WIDTH = 160  # px of the grey picture motion is measured on
DELTA = 30  # grey levels a pixel must change by to count as moving
MIN_AREA = 0.002  # least share of the picture a moving blob covers
MAX_MOVING = 0.3  # above this share of changed pixels the whole view moved (camera pan, light), not a thing
MAX_STEP = 0.25  # farthest a tracked thing may jump between sampled frames (fraction of the frame diagonal)


@dataclass(frozen=True, slots=True)
class Blob:
    """A moving region at time ``time``: centre and size as fractions of the frame."""

    time: float
    x: float
    y: float
    area: float


@dataclass
class Track:
    """One thing followed across frames."""

    points: list[Blob] = field(default_factory=list)

    @property
    def first(self) -> float:
        return self.points[0].time

    @property
    def last(self) -> float:
        return self.points[-1].time


def small_grey(frame: np.ndarray) -> np.ndarray:
    """The grey picture motion is measured on (``WIDTH`` px wide), uint8."""
    h, w = frame.shape[:2]
    size = (WIDTH, max(8, round(h * WIDTH / w)))
    return cv2.cvtColor(cv2.resize(frame, size, interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2GRAY)


def moving_blobs(before: np.ndarray, after: np.ndarray, t: float) -> list[Blob]:
    """Regions that moved between two grey pictures (see :func:`small_grey`), biggest first."""
    moving = (cv2.absdiff(before, after) > DELTA).astype(np.uint8)
    if moving.mean() > MAX_MOVING:  # the camera moved or the light changed: no single thing to follow
        return []
    moving = cv2.morphologyEx(moving, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
    count, _, stats, centres = cv2.connectedComponentsWithStats(moving, connectivity=8)
    h, w = moving.shape
    blobs = [Blob(t, float(centres[i][0]) / w, float(centres[i][1]) / h, float(stats[i, cv2.CC_STAT_AREA]) / (h * w))
             for i in range(1, count) if stats[i, cv2.CC_STAT_AREA] >= MIN_AREA * h * w]
    return sorted(blobs, key=lambda b: -b.area)[:8]


def track(frames: list[list[Blob]]) -> list[Track]:
    """Tracks from per-frame detections (time order), by greedy nearest-centroid association."""
    finished: list[Track] = []
    open_tracks: list[Track] = []
    for detections in frames:
        pairs = sorted(((math.hypot(d.x - tr.points[-1].x, d.y - tr.points[-1].y), i, j)
                        for i, tr in enumerate(open_tracks) for j, d in enumerate(detections)))
        used_tracks: set[int] = set()
        used_dets: set[int] = set()
        for dist, i, j in pairs:
            if dist > MAX_STEP * math.sqrt(2) or i in used_tracks or j in used_dets:
                continue
            open_tracks[i].points.append(detections[j])
            used_tracks.add(i)
            used_dets.add(j)
        still = [tr for i, tr in enumerate(open_tracks) if i in used_tracks]
        finished += [tr for i, tr in enumerate(open_tracks) if i not in used_tracks]
        open_tracks = still + [Track([d]) for j, d in enumerate(detections) if j not in used_dets]
    return sorted(finished + open_tracks, key=lambda tr: (tr.first, tr.points[0].x))


def place(x: float, y: float) -> str:
    """'near the centre', 'at the top left'..."""
    row = "top" if y < 1 / 3 else ("bottom" if y > 2 / 3 else "middle")
    col = "left" if x < 1 / 3 else ("right" if x > 2 / 3 else "centre")
    return "near the centre" if (row, col) == ("middle", "centre") else f"at the {row} {col}"


def heading(tr: Track) -> str | None:
    """How a track went, in words ('left to right across the lower half'), or None when it stayed put."""
    a, b = tr.points[0], tr.points[-1]
    dx, dy = b.x - a.x, b.y - a.y
    if max(abs(dx), abs(dy)) < 0.1:
        return None
    mean_y = float(np.mean([p.y for p in tr.points]))
    mean_x = float(np.mean([p.x for p in tr.points]))
    if abs(dx) >= abs(dy):
        band = "upper half" if mean_y < 0.4 else "lower half" if mean_y > 0.6 else "middle"
        way = "left to right" if dx > 0 else "right to left"
        return f"{way} across the {band}"
    side = "left side" if mean_x < 0.4 else "right side" if mean_x > 0.6 else "centre"
    way = "downwards" if dy > 0 else "upwards"
    return f"{way} on the {side}"


def span_words(first: float, last: float) -> str:
    return f"{first:.0f} s" if round(first) == round(last) else f"{first:.0f}-{last:.0f} s"
