"""Colour names for pixels, shared by everything that says what colour something is (the pixels captioner's
backgrounds, letters and shapes; a tracked object's clothes or body, :mod:`lucy.perception.appearance`)."""

from __future__ import annotations

import numpy as np

COLOURS = ("black", "gray", "white", "red", "orange", "brown", "yellow", "green", "teal", "blue", "purple", "pink")
_INDEX = {name: i for i, name in enumerate(COLOURS)}
_HUES = (("orange", 15, 45), ("yellow", 45, 70), ("green", 70, 165), ("teal", 165, 200), ("blue", 200, 260),
         ("purple", 260, 300), ("pink", 300, 345))


def colour_names(rgb: np.ndarray) -> np.ndarray:
    """A colour name index (into :data:`COLOURS`) for each RGB pixel of ``rgb`` (..., 3) uint8.

    Hue decides chromatic colours, value and saturation decide black / gray / white and brown vs orange,
    so names survive shading (a colour at 75%-115% brightness keeps its name).
    """
    c = rgb.astype(np.float32) / 255.0
    r, g, b = c[..., 0], c[..., 1], c[..., 2]
    v = c.max(axis=-1)
    span = v - c.min(axis=-1)
    s = np.where(v > 0, span / np.maximum(v, 1e-6), 0.0)
    safe = np.maximum(span, 1e-6)
    hue = np.where(v == r, (g - b) / safe % 6, np.where(v == g, (b - r) / safe + 2, (r - g) / safe + 4)) * 60.0
    out = np.full(rgb.shape[:-1], _INDEX["gray"], dtype=np.int8)
    chroma = (s >= 0.22) & (v >= 0.2)
    out[~chroma & (v >= 0.68)] = _INDEX["white"]
    out[v < 0.2] = _INDEX["black"]
    for name, lo, hi in _HUES:
        out[chroma & (hue >= lo) & (hue < hi)] = _INDEX[name]
    out[chroma & ((hue >= 345) | (hue < 15))] = _INDEX["red"]
    out[chroma & (hue >= 15) & (hue < 45) & (v < 0.6)] = _INDEX["brown"]
    return out
