"""The vllm captioner with a real engine on a real GPU (extra ``lucy[gpu]``); skipped everywhere else.

The model is ``LUCY_TEST_VLLM_MODEL`` (a local path or a name already in the Hugging Face cache), by default
the configured one. The clip holds big on-screen text that any capable VLM reads.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re

import numpy as np
import pytest

from lucy.config import Level
from lucy.config.settings import VllmCaptionerSettings
from lucy.ingest.frames import Clip
from lucy.synth import PALETTE, Overlay, Scene
from lucy.synth.video import FramePainter

pytestmark = pytest.mark.gpu


def _cuda() -> bool:
    if importlib.util.find_spec("vllm") is None or importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


@pytest.fixture(scope="module")
def captioner():
    if not _cuda():
        pytest.skip("needs vllm (pip install 'lucy[gpu]') and a CUDA GPU")
    from lucy.memory.captioners.vllm import VllmCaptioner

    model = os.environ.get("LUCY_TEST_VLLM_MODEL", VllmCaptionerSettings().model)
    settings = VllmCaptionerSettings(model=model, max_model_len=16_384, max_frames=8, max_tokens=256,
                                     gpu_memory_utilization=0.8, max_batch=4, batch_wait_seconds=0.5)
    return VllmCaptioner(settings)


def _clip(word: str, colour: str) -> Clip:
    painter = FramePainter(640, 360, [Scene(0, 10, PALETTE[colour])], [Overlay(0, 10, word, size=0.15)], [])
    times = np.arange(0, 8, 1.0)
    return Clip(np.stack([painter(t) for t in times]), times)


def test_reads_text_and_batches_concurrent_clips(captioner):
    words = [("HELLO 42", "blue"), ("EXIT 7", "red"), ("GATE 9", "green")]

    async def run():
        return await asyncio.gather(*(captioner.describe(_clip(w, c), "What text is shown, on what colour?",
                                                         level=Level.FINE) for w, c in words))

    captions = asyncio.run(run())
    for (word, _), caption in zip(words, captions, strict=True):
        assert caption.text and caption.prompt_tokens > 0 and caption.completion_tokens > 0
        assert re.search(word.split()[1], caption.text), caption.text  # the number on screen
    assert captioner.stats.largest_batch >= 2
