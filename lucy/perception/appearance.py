"""What a tracked object looks like, in the words a person would use: a person's shirt and trousers, a car's colour.

The colour of each pixel is named by hue, saturation and value (:func:`lucy.perception.colours.colour_names`, the
names the pixels captioner uses too). An object's colour is the commonest name in a part of its box that is
mostly the object (a person's torso and legs, the middle of a vehicle's side), and nothing at all when no name
holds a clear share of it: saying "a person" is better than saying a wrong colour.

An object's :func:`signature` (hue and saturation histograms of the same parts) is what the tracker re-identifies
it by after it was hidden for a while: finer than the names (two people in "blue" tops may be told apart by the
shade) and compared with :func:`distance`.
"""

from __future__ import annotations

import cv2
import numpy as np

from lucy.perception.colours import COLOURS, colour_names
from lucy.perception.objects import PERSON, VEHICLES, Box

_INDEX = {name: i for i, name in enumerate(COLOURS)}
_NEUTRAL = frozenset({_INDEX["black"], _INDEX["gray"], _INDEX["white"]})

# Parts of a box (fractions of its width and height: x0, y0, x1, y1) that are mostly the object. A person's head is
# the top ~15% and the ground or a shadow may reach into the bottom; the sides of a walking figure's box are
# background between the arms and legs. A vehicle's box holds windows above and wheels and road below its body.
_UPPER = (0.25, 0.18, 0.75, 0.48)
_LOWER = (0.3, 0.56, 0.7, 0.86)
_BODY = (0.12, 0.3, 0.88, 0.75)
MIN_SHARE = 0.3  # a colour name must cover this share of the part, at least, to be said
# A vehicle's body beats its dark windows, tyres and shadows when it covers this share of what the neutral colour
# covers: a red car seen from the side is red, not black.
_CHROMA_OVER_NEUTRAL = 0.5
_MAX_SIDE = 24  # parts are sampled on a grid of at most this many pixels a side (colour needs no more)
_MIDDLE = (0.2, 0.2, 0.8, 0.8)  # the part of any other object's box a signature is taken of
# Signature bins, per part: 12 hues (30 degrees each) x 2 saturations for coloured pixels, and 4 values for the
# others (black to white). Coloured = saturation and value as colours.colour_names has them (0.22, 0.2).
_HUE_BINS, _SAT_BINS, _VALUE_BINS = 12, 2, 4
_CHROMA_S, _CHROMA_V = 56, 51  # of 255
SIGNATURE_SIZE = _HUE_BINS * _SAT_BINS + _VALUE_BINS


def _part(frame: np.ndarray, box: Box, part: tuple[float, float, float, float]) -> np.ndarray | None:
    """The pixels of one part of ``box`` (fractions of the frame), sampled on a coarse grid; None if it is empty."""
    height, width = frame.shape[:2]
    x0, y0, x1, y1 = box
    bw, bh = x1 - x0, y1 - y0
    px0 = int(round((x0 + part[0] * bw) * width))
    px1 = int(round((x0 + part[2] * bw) * width))
    py0 = int(round((y0 + part[1] * bh) * height))
    py1 = int(round((y0 + part[3] * bh) * height))
    px0, px1 = max(0, px0), min(width, px1)
    py0, py1 = max(0, py0), min(height, py1)
    if px1 - px0 < 2 or py1 - py0 < 2:
        return None
    step = max(1, max(px1 - px0, py1 - py0) // _MAX_SIDE)
    return frame[py0:py1:step, px0:px1:step]


def dominant_colour(pixels: np.ndarray | None, *, prefer_chroma: bool = False) -> str | None:
    """The commonest colour name of ``pixels`` (H x W x 3 RGB), or None when none covers :data:`MIN_SHARE`.

    ``prefer_chroma``: a chromatic colour wins over a commoner black, gray or white when it covers at least half as
    much (a vehicle's body against its windows and tyres).
    """
    if pixels is None or pixels.size == 0:
        return None
    shares = np.bincount(colour_names(pixels).ravel(), minlength=len(COLOURS)) / (pixels.shape[0] * pixels.shape[1])
    best = int(np.argmax(shares))
    if prefer_chroma and best in _NEUTRAL:
        chroma = [i for i in np.argsort(-shares) if i not in _NEUTRAL]
        if chroma and shares[chroma[0]] >= max(MIN_SHARE, _CHROMA_OVER_NEUTRAL * shares[best]):
            best = int(chroma[0])
    return COLOURS[best] if shares[best] >= MIN_SHARE else None


def describe(frame: np.ndarray, label: str, box: Box) -> dict[str, str]:
    """The appearance attributes of one object in one frame (H x W x 3 uint8 RGB): ``upper`` / ``lower`` for a
    person, ``colour`` for a vehicle; a name that cannot be told is left out."""
    out: dict[str, str] = {}
    if label == PERSON:
        for key, part in (("upper", _UPPER), ("lower", _LOWER)):
            colour = dominant_colour(_part(frame, box, part))
            if colour is not None:
                out[key] = colour
    elif label in VEHICLES:
        colour = dominant_colour(_part(frame, box, _BODY), prefer_chroma=True)
        if colour is not None:
            out["colour"] = colour
    return out


def _parts_of(label: str) -> tuple[tuple[float, float, float, float], ...]:
    if label == PERSON:
        return _UPPER, _LOWER
    if label in VEHICLES:
        return (_BODY,)
    return (_MIDDLE,)


def _histogram(pixels: np.ndarray) -> np.ndarray:
    hsv = cv2.cvtColor(np.ascontiguousarray(pixels), cv2.COLOR_RGB2HSV).reshape(-1, 3).astype(np.int32)
    h, s, v = hsv[:, 0], hsv[:, 1], hsv[:, 2]  # OpenCV's hue is 0-179
    chroma = (s >= _CHROMA_S) & (v >= _CHROMA_V)
    hue_bin = np.minimum(h * _HUE_BINS // 180, _HUE_BINS - 1)
    sat_bin = np.minimum((s - _CHROMA_S) * _SAT_BINS // (256 - _CHROMA_S), _SAT_BINS - 1)
    index = np.where(chroma, hue_bin * _SAT_BINS + sat_bin,
                     _HUE_BINS * _SAT_BINS + np.minimum(v * _VALUE_BINS // 256, _VALUE_BINS - 1))
    counts = np.bincount(index, minlength=SIGNATURE_SIZE).astype(np.float32)
    return counts / max(1.0, float(counts.sum()))


def signature(frame: np.ndarray, label: str, box: Box) -> np.ndarray | None:
    """What an object looks like in one frame (H x W x 3 uint8 RGB) as a vector to re-identify it by: a histogram
    of hue, saturation and value for each part of its box that is mostly the object (a person's torso and legs, a
    vehicle's side), each summing to 1. None when a part is too small to sample."""
    hists = []
    for part in _parts_of(label):
        pixels = _part(frame, box, part)
        if pixels is None:
            return None
        hists.append(_histogram(pixels))
    return np.concatenate(hists)


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """How different two signatures of the same kind of object look: 1 - the Bhattacharyya coefficient, averaged
    over their parts (0: the same colours in the same shares, 1: no colour in common)."""
    parts = max(1, a.size // SIGNATURE_SIZE)
    return float(1.0 - np.sqrt(np.clip(a, 0, None) * np.clip(b, 0, None)).sum() / parts)
