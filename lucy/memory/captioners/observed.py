"""A captioner that reports every request it passes on (latency, tokens, success) to its observers.

Metering is an observer of captioners (as pipecat's observers see frames without being a stage): a stream's
:class:`lucy.metrics.CaptionCallStats` or a stream worker's pipe to the server subscribes; the figures are plain
records of :mod:`lucy.metrics.stats`, and the metrics package knows no captioner."""

from __future__ import annotations

import time

from lucy.config import Level
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import Captioner, WrappingCaptioner
from lucy.memory.captioners.guard import CaptionerUnavailable
from lucy.memory.nodes import Caption
from lucy.metrics.stats import CaptionCall, CaptionCallObserver


class ObservedCaptioner(WrappingCaptioner):
    """Wraps any :class:`Captioner`; each request it makes becomes one :class:`CaptionCall` for each of
    ``observers`` (a :class:`lucy.metrics.CaptionCallStats`, or a stream worker's pipe to the server)."""

    def __init__(self, inner: Captioner, *observers: CaptionCallObserver) -> None:
        self.inner = inner
        self.observers = observers

    def _report(self, call: CaptionCall) -> None:
        for observer in self.observers:
            observer.on_caption_call(call)

    async def describe(self, clip: Clip, instruction: str, *, level: Level, **heard: object) -> Caption:
        """As the inner captioner's; ``heard`` (``transcript=``, ``observed=``) is passed on to one that
        :attr:`hears` (:attr:`sees`)."""
        began = time.monotonic()
        try:
            caption = await self.inner.describe(clip, instruction, level=level, **heard)
        except CaptionerUnavailable:  # refused before any request was made: nothing to count
            raise
        except BaseException:  # failures, timeouts and cancellations all count as a failed request
            self._report(CaptionCall(time.monotonic() - began, ok=False, frames=len(clip)))
            raise
        self._report(CaptionCall(
            time.monotonic() - began, ok=True, prompt_tokens=caption.prompt_tokens,
            completion_tokens=caption.completion_tokens, frames=len(clip)))
        return caption

    async def aclose(self) -> None:
        await self.inner.aclose()
