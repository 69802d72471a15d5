"""Frame sampling by presentation time, and the stored frame size."""

from __future__ import annotations

import math


class Sampler:
    """Keeps the first frame of every ``1/fps`` slot of media time.

    Works on timestamps, not frame counts, so variable frame rates, dropped frames and pts jumps give the same
    stored rate. ``after`` continues a resumed stream: slots up to that time count as already filled.
    """

    def __init__(self, fps: float, after: float | None = None) -> None:
        self.fps = fps
        self._last_slot = -1 if after is None else self._slot(after)

    def _slot(self, t: float) -> int:
        return math.floor(t * self.fps + 1e-6)

    def keep(self, t: float) -> bool:
        slot = self._slot(t)
        if slot <= self._last_slot:
            return False
        self._last_slot = slot
        return True


def fit_size(width: int, height: int, max_width: int, max_height: int) -> tuple[int, int]:
    """The largest even size inside ``max_width x max_height`` with the source's aspect ratio (no upscaling)."""
    scale = min(max_width / width, max_height / height, 1.0)
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)
