"""A captioner that reports every request it passes on (latency, tokens, success) to an observer."""

from __future__ import annotations

import time

from lucy.config import Level
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import Captioner, WrappingCaptioner
from lucy.memory.captioners.guard import CaptionerUnavailable
from lucy.memory.nodes import Caption
from lucy.metrics.stats import CaptionCall, CaptionCallObserver


class MeteredCaptioner(WrappingCaptioner):
    """Wraps any :class:`Captioner`; each request it makes becomes one :class:`CaptionCall` for ``observer`` (a
    :class:`lucy.metrics.CaptionCallStats`, or a stream worker's pipe to the server)."""

    def __init__(self, inner: Captioner, observer: CaptionCallObserver) -> None:
        self.inner = inner
        self.observer = observer

    async def describe(self, clip: Clip, instruction: str, *, level: Level, **heard: str) -> Caption:
        """As the inner captioner's; ``heard`` (``transcript=``) is passed on to one that :attr:`hears`."""
        began = time.monotonic()
        try:
            caption = await self.inner.describe(clip, instruction, level=level, **heard)
        except CaptionerUnavailable:  # refused before any request was made: nothing to count
            raise
        except BaseException:  # failures, timeouts and cancellations all count as a failed request
            self.observer.on_caption_call(CaptionCall(time.monotonic() - began, ok=False, frames=len(clip)))
            raise
        self.observer.on_caption_call(CaptionCall(
            time.monotonic() - began, ok=True, prompt_tokens=caption.prompt_tokens,
            completion_tokens=caption.completion_tokens, frames=len(clip)))
        return caption

    async def aclose(self) -> None:
        await self.inner.aclose()
