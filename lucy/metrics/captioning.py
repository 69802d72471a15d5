"""A captioner that records every request it passes on (count, latency, tokens, failures)."""

from __future__ import annotations

import time

from lucy.config import Level
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import Captioner
from lucy.memory.captioners.guard import CaptionerUnavailable
from lucy.memory.nodes import Caption
from lucy.metrics.stats import CaptionCallStats


class MeteredCaptioner(Captioner):
    """Wraps any :class:`Captioner`; the figures land in a :class:`CaptionCallStats`."""

    def __init__(self, inner: Captioner, stats: CaptionCallStats) -> None:
        self.inner = inner
        self.stats = stats
        self.name = inner.name
        self.model = inner.model

    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        began = time.monotonic()
        try:
            caption = await self.inner.describe(clip, instruction, level=level)
        except CaptionerUnavailable:  # refused before any request was made: nothing to count
            raise
        except BaseException:  # failures, timeouts and cancellations all count as a failed request
            self.stats.record(time.monotonic() - began, ok=False, frames=len(clip))
            raise
        self.stats.record(time.monotonic() - began, ok=True, prompt_tokens=caption.prompt_tokens,
                          completion_tokens=caption.completion_tokens, frames=len(clip))
        return caption

    async def aclose(self) -> None:
        await self.inner.aclose()
