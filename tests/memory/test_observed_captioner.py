"""Metering is an observer of captioners: each request a wrapped captioner makes reaches every observer once."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from lucy.config import Level
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import Captioner, CaptionerError
from lucy.memory.captioners.guard import CaptionerUnavailable
from lucy.memory.captioners.observed import ObservedCaptioner
from lucy.memory.nodes import Caption
from lucy.metrics.stats import CaptionCall


class Scripted(Captioner):
    """Replies with ``outcome``: a caption, or the error it raises."""

    name, model = "scripted", "scripted-eye"

    def __init__(self, outcome: Caption | BaseException) -> None:
        self.outcome = outcome

    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class Seen:
    def __init__(self) -> None:
        self.calls: list[CaptionCall] = []

    def on_caption_call(self, call: CaptionCall) -> None:
        self.calls.append(call)


CLIP = Clip(np.zeros((3, 4, 4, 3), np.uint8), np.array([0.0, 1.0, 2.0]))


def test_every_observer_sees_each_request_with_its_tokens() -> None:
    first, second = Seen(), Seen()
    reply = Caption("a van", "scripted-eye", prompt_tokens=7, completion_tokens=3)
    wrapped = ObservedCaptioner(Scripted(reply), first, second)
    caption = asyncio.run(wrapped.describe(CLIP, "describe", level=Level.COARSE))
    assert caption.text == "a van"
    for seen in (first, second):
        assert [(c.ok, c.prompt_tokens, c.completion_tokens, c.frames) for c in seen.calls] == [(True, 7, 3, 3)]


def test_a_failed_request_counts_and_a_refused_one_does_not() -> None:
    seen = Seen()
    with pytest.raises(CaptionerError):
        asyncio.run(ObservedCaptioner(Scripted(CaptionerError("down")), seen).describe(
            CLIP, "describe", level=Level.COARSE))
    with pytest.raises(CaptionerUnavailable):
        asyncio.run(ObservedCaptioner(Scripted(CaptionerUnavailable("open")), seen).describe(
            CLIP, "describe", level=Level.COARSE))
    assert [c.ok for c in seen.calls] == [False]
