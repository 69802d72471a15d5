"""Questions for the service: the query engine behind a bounded, timed, never-blocking front.

Each question runs the engine on its own worker thread with its own event loop, so that nothing the engine does
(embedded reasoners and captioners work on the CPU; SQLite and Zarr reads block) can hold up the server's event
loop. Its trace steps are handed to the server's loop as they happen, for SSE, the OpenAI-compatible stream and
MQTT. At most ``service.max_concurrent_questions`` run at once; the rest wait their turn, within
``service.question_timeout_seconds`` from arrival.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lucy.config import LucySettings
from lucy.errors import LucyError, StoreError
from lucy.ingest import redact_url
from lucy.memory.captioners import make_captioner
from lucy.memory.store import MemoryStore
from lucy.metrics import QuestionRecord
from lucy.metrics.captioning import MeteredCaptioner
from lucy.service.errors import Conflict, InvalidRequest, ServiceError, TimedOut, Unavailable
from lucy.service.streams import StreamManager

log = logging.getLogger(__name__)

_END = object()


@dataclass
class _Job:
    """One question on its worker thread, and the way back to the server's loop."""

    stream: str
    question: str
    options: tuple[str, ...]
    settings: LucySettings
    out: asyncio.Queue[tuple[str, Any]]
    server_loop: asyncio.AbstractEventLoop
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)

    def emit(self, kind: str, value: Any) -> None:
        try:
            self.server_loop.call_soon_threadsafe(self.out.put_nowait, (kind, value))
        except RuntimeError:
            pass  # the server's loop has closed (shutdown)

    def cancel(self) -> None:
        self.cancelled.set()
        loop, task = self.loop, self.task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # already finished


class QuestionService:
    """Validates questions, bounds how many run at once, and runs them off the event loop."""

    def __init__(self, settings: LucySettings, manager: StreamManager, memory: MemoryStore) -> None:
        self.settings = settings
        self.manager = manager
        self.memory = memory
        self._slots: asyncio.Semaphore | None = None

    def check(self, question: str, options: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        """Refuse empty, oversized or malformed questions (422)."""
        s = self.settings.service
        text = question.strip()
        if not text:
            raise InvalidRequest("the question is empty")
        if len(text) > s.max_question_chars:
            raise InvalidRequest(f"the question has {len(text)} characters; the limit is {s.max_question_chars} "
                                 f"(service.max_question_chars)")
        if "\0" in text:
            raise InvalidRequest("the question contains a NUL character")
        if len(options) > s.max_options:
            raise InvalidRequest(f"{len(options)} options given; the limit is {s.max_options}")
        cleaned = tuple(o.strip() for o in options)
        if any(not o or len(o) > s.max_question_chars for o in cleaned):
            raise InvalidRequest(f"every option must have 1 to {s.max_question_chars} characters")
        if len(cleaned) == 1:
            raise InvalidRequest("a multiple-choice question needs at least two options")
        return text, cleaned

    def _settings_for(self, stream: str) -> LucySettings:
        managed = self.manager.get(stream)
        return managed.settings if managed is not None else self.settings

    async def events(self, stream: str, question: str, options: Sequence[str] = ()) -> AsyncIterator[tuple[str, Any]]:
        """Yield ``("step", dict)`` for each trace step as it happens, then ``("answer", dict)``.

        Raises a :class:`ServiceError` (bad question, unknown stream, timeout) or the engine's error. Closing the
        iterator early cancels the question.
        """
        text, opts = self.check(question, options)
        await asyncio.to_thread(self.manager.require, stream)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.settings.service.max_concurrent_questions)
        deadline = time.monotonic() + self.settings.service.question_timeout_seconds
        stats = self.manager.question_stats(stream)
        stats.started()
        record: QuestionRecord | None = None
        job: _Job | None = None
        began = time.monotonic()
        try:
            try:
                await asyncio.wait_for(self._slots.acquire(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise TimedOut("the server is busy with other questions; try again later") from None
            try:
                job = _Job(stream, text, opts, self._settings_for(stream), asyncio.Queue(), asyncio.get_running_loop())
                threading.Thread(target=self._work, args=(job,), name=f"question-{stream}", daemon=True).start()
                while True:
                    remaining = deadline - time.monotonic()
                    try:
                        kind, value = await asyncio.wait_for(job.out.get(), max(0.0, remaining))
                    except TimeoutError:
                        raise TimedOut(f"no answer within {self.settings.service.question_timeout_seconds:g} s "
                                       f"(service.question_timeout_seconds)") from None
                    if kind == "error":
                        raise value
                    if kind == "answer":
                        record = QuestionRecord(
                            latency_seconds=time.monotonic() - began, iterations=int(value.get("iterations", 0)),
                            llm_calls=int(value.get("llm_calls", 0)), caption_calls=int(value.get("caption_calls", 0)),
                            confident=bool(value.get("confident")))
                    yield kind, value
                    if kind == "answer":
                        return
            finally:
                self._slots.release()
        finally:
            if job is not None and record is None:
                job.cancel()
            stats.finished(record)

    async def ask(self, stream: str, question: str, options: Sequence[str] = ()) -> dict[str, Any]:
        """The answer object (the trace is in it)."""
        async for kind, value in self.events(stream, question, options):
            if kind == "answer":
                return value
        raise Unavailable("the question ended without an answer")

    # ------------------------------------------------------------------------------------ worker thread

    def _work(self, job: _Job) -> None:
        try:
            asyncio.run(self._drive(job))
        except BaseException as err:  # noqa: BLE001  (handed to the waiting request)
            job.emit("error", err)

    async def _drive(self, job: _Job) -> None:
        job.loop = asyncio.get_running_loop()
        job.task = asyncio.current_task()
        if job.cancelled.is_set():
            return
        try:
            async for kind, value in run_engine(job.settings, self.memory, self.manager.caption_stats(job.stream),
                                                job.stream, job.question, job.options):
                job.emit(kind, value)
        except asyncio.CancelledError:
            return
        except ServiceError as err:
            job.emit("error", err)
        except LucyError as err:  # e.g. no frames yet: the stream is not in a state to answer
            job.emit("error", Conflict(redact_url(str(err))))
        except Exception as err:
            log.exception("question about %s failed", job.stream)
            job.emit("error", err)


async def run_engine(settings: LucySettings, memory: MemoryStore, caption_stats: Any, stream: str, question: str,
                     options: tuple[str, ...]) -> AsyncIterator[tuple[str, Any]]:
    """The query engine's trace and answer as ``("step", dict)`` ... ``("answer", dict)``.

    The question's captioner (for deeper captions) is metered into the stream's caption figures; the reasoner
    is made from ``settings`` by :func:`lucy.query.factory.open_engine`.
    """
    from lucy.ingest import ZarrFrameStore
    from lucy.query.factory import open_engine

    try:
        await asyncio.to_thread(ZarrFrameStore.open, settings.data, stream)
    except StoreError:
        raise Conflict(f"stream {stream!r} has no frames yet; ask again once ingest has stored some") from None
    inner = make_captioner(settings)
    captioner = MeteredCaptioner(inner, caption_stats) if inner is not None else None
    try:
        async with open_engine(settings, stream, memory=memory, captioner=captioner) as engine:
            run = engine.run(question, options)
            async for step in run:
                yield "step", step.to_json()
            assert run.result is not None
            yield "answer", run.result.to_json()
    finally:
        if captioner is not None:
            await captioner.aclose()
