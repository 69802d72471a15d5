"""Captioning with vLLM inside this process, on a local GPU (extra ``lucy[gpu]``).

Frames go to the engine as video multi-modal data (``multi_modal_data={"video": frames}``, a (N, H, W, 3)
uint8 array, as vLLM documents for offline inference), with the prompt made by the model's own chat template
(one video placeholder, then the delimited instruction). Concurrent ``describe`` calls are batched: the first
request of a batch waits up to ``batch_wait_seconds`` for others (at most ``max_batch``), then the batch runs
as one ``LLM.generate`` call in a worker thread, so the event loop never blocks on the GPU.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from lucy.config import Level
from lucy.config.settings import VllmCaptionerSettings
from lucy.errors import LucyError
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import Captioner, CaptionerError, check_clip, pick_evenly
from lucy.memory.captioners.openai import SYSTEM_PROMPT, delimit_instruction, fit_side
from lucy.memory.nodes import Caption


def import_vllm() -> Any:
    """The ``vllm`` module, or a clear error naming the extra to install."""
    try:
        import vllm
    except ImportError as err:
        raise LucyError("the vllm captioner needs vLLM and a CUDA GPU: install the extra with "
                        "`pip install 'lucy[gpu]'`, or choose --captioner pixels|openai") from err
    return vllm


@dataclass
class VllmCaptionerStats:
    captions: int = 0
    failures: int = 0
    batches: int = 0
    largest_batch: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    batch_sizes: list[int] = field(default_factory=list)


@dataclass
class _Request:
    prompt: dict[str, Any]
    frames: int
    future: asyncio.Future[Any]


def shrink_frames(frames: np.ndarray, max_side: int) -> np.ndarray:
    """Frames shrunk (never enlarged) to fit ``max_side``; CPU work for a worker thread."""
    height, width = frames.shape[1:3]
    size = fit_side(width, height, max_side)
    if size == (width, height):
        return np.ascontiguousarray(frames)
    return np.stack([np.asarray(Image.fromarray(f).resize(size, Image.Resampling.BICUBIC, reducing_gap=3.0))
                     for f in frames])


class VllmCaptioner(Captioner):
    """A vision-language model run by vLLM in this process. ``llm`` may be given (tests, shared engines)."""

    name = "vllm"

    def __init__(self, settings: VllmCaptionerSettings, *, llm: Any | None = None) -> None:
        self.settings = settings
        self.model = settings.model
        self.stats = VllmCaptionerStats()
        vllm = import_vllm()
        if llm is None:
            llm = vllm.LLM(model=settings.model, max_model_len=settings.max_model_len,
                           gpu_memory_utilization=settings.gpu_memory_utilization,
                           tensor_parallel_size=settings.tensor_parallel_size,
                           limit_mm_per_prompt={"image": 0, "video": 1})
        self._llm = llm
        self._params = vllm.SamplingParams(temperature=0.0, max_tokens=settings.max_tokens)
        self._tokenizer = llm.get_tokenizer()
        self._engine_lock = threading.Lock()  # one generate() at a time, whatever the event loop
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Queue[_Request]] = \
            weakref.WeakKeyDictionary()
        self._workers: set[asyncio.Task[None]] = set()
        self.prompt_text("check")  # fail at start if the model's chat template cannot take a video

    def prompt_text(self, instruction: str, times: np.ndarray | None = None) -> str:
        """The model's chat template applied to: system prompt, one video, the delimited instruction."""
        when = "" if times is None else (
            "The video holds frames taken at these times (seconds): " + ", ".join(f"{t:.1f}" for t in times) + ". ")
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": [{"type": "video"},
                                                 {"type": "text", "text": when + delimit_instruction(instruction)}]}]
        try:
            return self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as err:  # jinja errors differ by model; say which model cannot do it
            raise LucyError(f"the chat template of {self.model} does not accept a video part: {err}") from err

    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        check_clip(clip)
        began = time.monotonic()
        picked = pick_evenly(len(clip), self.settings.max_frames)
        times = clip.times[picked]
        frames = await asyncio.to_thread(shrink_frames, clip.frames[picked], self.settings.image_max_side)
        duration = float(times[-1] - times[0])
        fps = (len(times) - 1) / duration if len(times) > 1 and duration > 0 else 1.0
        prompt = {"prompt": self.prompt_text(instruction, times), "multi_modal_data": {"video": frames},
                  "mm_processor_kwargs": {"fps": fps}}
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._queue().put(_Request(prompt, len(frames), future))
        try:
            output = await future
        except CaptionerError:
            self.stats.failures += 1
            raise
        text = output.outputs[0].text.strip() if output.outputs else ""
        if not text:
            self.stats.failures += 1
            raise CaptionerError(f"{self.model} returned an empty caption")
        prompt_tokens = len(output.prompt_token_ids or [])
        completion_tokens = len(output.outputs[0].token_ids or [])
        self.stats.captions += 1
        self.stats.prompt_tokens += prompt_tokens
        self.stats.completion_tokens += completion_tokens
        return Caption(text=text, model=self.model, prompt_tokens=prompt_tokens,
                       completion_tokens=completion_tokens, latency_seconds=time.monotonic() - began,
                       frames=len(frames), extra={"finish_reason": output.outputs[0].finish_reason,
                                                  "frame_size": [int(frames.shape[2]), int(frames.shape[1])]})

    def _queue(self) -> asyncio.Queue[_Request]:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = asyncio.Queue()
            task = loop.create_task(self._batcher(queue), name="vllm-captioner-batcher")
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)
        return queue

    async def _batcher(self, queue: asyncio.Queue[_Request]) -> None:
        """Collect requests into batches and run each batch on the engine in a worker thread."""
        s = self.settings
        while True:
            batch = [await queue.get()]
            deadline = asyncio.get_running_loop().time() + s.batch_wait_seconds
            while len(batch) < s.max_batch:
                try:
                    async with asyncio.timeout_at(deadline):
                        batch.append(await queue.get())
                except TimeoutError:
                    break
            live = [r for r in batch if not r.future.done()]  # a cancelled describe() needs no caption
            if not live:
                continue
            self.stats.batches += 1
            self.stats.largest_batch = max(self.stats.largest_batch, len(live))
            self.stats.batch_sizes.append(len(live))
            try:
                outputs = await asyncio.to_thread(self._generate, [r.prompt for r in live])
            except Exception as err:  # noqa: BLE001  (the engine failed, GPU out of memory...: each caller sees it)
                for r in live:
                    if not r.future.done():
                        r.future.set_exception(CaptionerError(f"vLLM failed on a batch of {len(live)}: "
                                                              f"{type(err).__name__}: {str(err)[:300]}"))
                continue
            for r, out in zip(live, outputs, strict=True):
                if not r.future.done():
                    r.future.set_result(out)

    def _generate(self, prompts: list[dict[str, Any]]) -> list[Any]:
        with self._engine_lock:
            return list(self._llm.generate(prompts, self._params, use_tqdm=False))

    async def aclose(self) -> None:
        running = asyncio.get_running_loop()
        for task in list(self._workers):
            loop = task.get_loop()
            if loop is running:
                task.cancel()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(task.cancel)
        self._workers.clear()
