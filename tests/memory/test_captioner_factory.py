"""Choosing a captioner from config, and the vllm backend's guard and batching (engine replaced, CPU only)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import types
from dataclasses import dataclass

import numpy as np
import pytest

from lucy.config import Level, load_settings
from lucy.errors import LucyError
from lucy.ingest.frames import Clip
from lucy.memory.captioners import Captioner, CaptionerError, make_captioner
from lucy.memory.captioners.openai import OpenAICaptioner
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer

HAVE_VLLM = importlib.util.find_spec("vllm") is not None


def test_none_means_no_captioner(tmp_path):
    assert make_captioner(load_settings(data=tmp_path, **{"captioner.backend": "none"})) is None


def test_pixels_backend(tmp_path):
    cap = make_captioner(load_settings(data=tmp_path, **{"captioner.backend": "pixels",
                                                         "captioner.max_in_flight": 1}))
    assert isinstance(cap, PixelsCaptioner) and isinstance(cap, Captioner) and cap.workers == 1
    clip = Clip(np.full((2, 64, 96, 3), (30, 60, 200), np.uint8), np.array([0.0, 1.0]))
    result = asyncio.run(cap.describe(clip, "What colour is it?", level=Level.FINE))
    assert "mostly blue" in result.text


def test_openai_backend_uses_the_configured_server(tmp_path):
    with ScriptedOpenAIServer([Reply("configured caption")]) as server:
        settings = load_settings(data=tmp_path, **{
            "captioner.backend": "openai", "captioner.max_in_flight": 2, "captioner.openai.base_url": server.base_url,
            "captioner.openai.model": "my-vlm", "captioner.openai.send_as": "video"})
        cap = make_captioner(settings)
        assert isinstance(cap, OpenAICaptioner) and cap.max_in_flight == 2 and cap.model == "my-vlm"
        clip = Clip(np.zeros((3, 32, 32, 3), np.uint8), np.arange(3.0))
        assert asyncio.run(cap.describe(clip, "x", level=Level.COARSE)).text == "configured caption"
        assert server.requests[0]["model"] == "my-vlm"
        assert any(p["type"] == "video_url" for p in server.requests[0]["messages"][1]["content"])


@pytest.mark.skipif(HAVE_VLLM, reason="vllm is installed here")
def test_vllm_backend_without_vllm_names_the_extra(tmp_path):
    with pytest.raises(LucyError, match=r"lucy\[gpu\]"):
        make_captioner(load_settings(data=tmp_path, **{"captioner.backend": "vllm"}))


# ---------------------------------------------------------------- vllm batching, with the engine replaced

@dataclass
class _Out:
    text: str
    token_ids: list[int]
    finish_reason: str = "stop"


@dataclass
class _RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[_Out]


class _Tokenizer:
    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        user = messages[1]["content"]
        assert user[0] == {"type": "video"}
        return f"<sys>{messages[0]['content']}</sys><video/>{user[1]['text']}<assistant>"


class _FakeLLM:
    """Stands in for vllm.LLM: records each generate() batch; answers with what it was given."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[dict]] = []
        self.fail = fail
        self.threads: set[str] = set()

    def get_tokenizer(self) -> _Tokenizer:
        return _Tokenizer()

    def generate(self, prompts, params, use_tqdm):
        self.threads.add(threading.current_thread().name)
        self.batches.append(prompts)
        if self.fail:
            raise RuntimeError("CUDA out of memory")
        outs = []
        for p in prompts:
            video = p["multi_modal_data"]["video"]
            outs.append(_RequestOutput(list(range(100)), [_Out(
                f"{video.shape[0]} frames of {video.shape[2]}x{video.shape[1]} mean {video.mean():.0f}", [1, 2, 3])]))
        return outs


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.SamplingParams = lambda **kw: kw
    module.LLM = None  # never built: the test hands its engine in
    monkeypatch.setitem(sys.modules, "vllm", module)


def test_vllm_captioner_batches_concurrent_clips(fake_vllm):
    from lucy.config.settings import VllmCaptionerSettings
    from lucy.memory.captioners.vllm import VllmCaptioner

    llm = _FakeLLM()
    cap = VllmCaptioner(VllmCaptionerSettings(max_frames=4, image_max_side=100, max_batch=3,
                                              batch_wait_seconds=3.0), llm=llm)

    async def run():
        clips = [Clip(np.full((10, 90, 160, 3), 10 * i, np.uint8), np.arange(10) / 2.0) for i in range(5)]
        try:
            return await asyncio.gather(*(cap.describe(c, f"look {i}", level=Level.FINE)
                                          for i, c in enumerate(clips)))
        finally:
            await cap.aclose()

    captions = asyncio.run(run())
    assert [len(b) for b in llm.batches] == [3, 2] and cap.stats.largest_batch == 3
    assert [c.text for c in captions] == [f"4 frames of 100x56 mean {10 * i}" for i in range(5)]
    assert captions[0].prompt_tokens == 100 and captions[0].completion_tokens == 3
    # Clips are prepared in worker threads, so they may reach the batch queue in any order.
    first = next(r for batch in llm.batches for r in batch if "<instruction>\nlook 0\n</instruction>" in r["prompt"])
    assert "0.0, 1.5, 3.0, 4.5" in first["prompt"]
    assert first["mm_processor_kwargs"] == {"fps": pytest.approx(3 / 4.5)}
    assert "MainThread" not in llm.threads  # the engine runs off the event loop


def test_vllm_engine_failure_is_a_captioner_error(fake_vllm):
    from lucy.config.settings import VllmCaptionerSettings
    from lucy.memory.captioners.vllm import VllmCaptioner

    cap = VllmCaptioner(VllmCaptionerSettings(batch_wait_seconds=0), llm=_FakeLLM(fail=True))
    clip = Clip(np.zeros((2, 32, 32, 3), np.uint8), np.arange(2.0))
    with pytest.raises(CaptionerError, match="CUDA out of memory"):
        asyncio.run(cap.describe(clip, "x", level=Level.COARSE))
    assert cap.stats.failures == 1
