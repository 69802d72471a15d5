"""Questions for the service: the query engine behind a bounded, timed, never-blocking front.

Every question of the server runs on one *question loop*: an event loop on a thread of its own, so that
nothing the engine does (embedded reasoners work on the CPU; SQLite and Zarr reads block in its I/O threads)
holds up the server's event loop. The loop lives as long as the server, and so does everything a question
uses: a fixed pool of I/O threads (hence a fixed number of SQLite connections), and the captioners and
reasoners of :class:`lucy.backends.Backends`, one per configuration, shared by every question and closed at
shutdown. Nothing a question opens outlives it, and nothing grows with the number of questions answered.

Limits, so that one stream's trouble stays its own: at most ``service.max_questions_per_stream`` questions about
one stream and ``service.max_concurrent_questions`` in all run at once; the rest wait their turn, within
``service.question_timeout_seconds`` from arrival. A question whose client goes away is cancelled and frees its
slot. A captioner that hangs or fails is paused after a few failures (:mod:`lucy.memory.captioners.guard`), so
questions about its stream answer from memory at once, saying so, instead of waiting out timeouts.

A question across streams (a list of names: ``POST /v1/questions``, the chat model ``_all``) takes one slot of its
own kind (:data:`lucy.config.ALL_STREAMS`) and runs one engine over all of them (:mod:`lucy.query.lanes`).

Trace steps are handed to the server's loop as they happen, for SSE, the OpenAI-compatible stream and MQTT, as
typed events (:mod:`lucy.query.events`) that carry the engine's own step and result records.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from lucy.backends import Backends
from lucy.config import ALL_STREAMS, LucySettings
from lucy.errors import InputError, LucyError, StoreError
from lucy.memory.captioners.observed import ObservedCaptioner
from lucy.memory.store import MemoryStore
from lucy.metrics import QuestionRecord
from lucy.metrics.stats import CaptionCallStats
from lucy.query.events import (
    QuestionAnswer,
    QuestionEvent,
    QuestionFailed,
    QuestionStep,
    QuestionUpdate,
    StepBegun,
    StepProgress,
)
from lucy.redaction import redact_url
from lucy.runtime.protocol import StreamRuntime
from lucy.service.errors import (
    ClientGone,
    Conflict,
    InvalidRequest,
    ServiceError,
    TimedOut,
    Unavailable,
    service_error_for,
)
from lucy.untrusted import normalise_question

if TYPE_CHECKING:
    from lucy.query.trace import QueryResult, TraceStep

log = logging.getLogger(__name__)

DISCONNECT_POLL_SECONDS = 0.5

Emit = Callable[[QuestionEvent], None]


class QuestionLoop:
    """The thread, event loop, I/O threads and backends on which every question of a server runs."""

    def __init__(self, io_threads: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=io_threads, thread_name_prefix="question-io"))
        self.backends = Backends()
        self._thread = threading.Thread(target=self._run, name="questions", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, work: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        """Run ``work`` on the question loop; cancelling the future cancels it."""
        return asyncio.run_coroutine_threadsafe(work, self.loop)

    def close(self, timeout: float = 30.0) -> None:
        """Cancel what still runs, close the backends and the I/O threads, end the thread (blocking)."""
        if self.loop.is_closed():
            return
        try:
            self.submit(self._shutdown()).result(timeout)
        except (concurrent.futures.TimeoutError, RuntimeError) as err:
            log.warning("questions did not shut down cleanly: %s", err)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()

    async def _shutdown(self) -> None:
        here = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not here]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        await self.backends.aclose()
        await self.loop.shutdown_default_executor()


class QuestionService:
    """Validates questions, bounds how many run at once (per stream and in all), and runs them on the
    question loop."""

    def __init__(self, settings: LucySettings, manager: StreamRuntime, memory: MemoryStore) -> None:
        self.settings = settings
        self.manager = manager
        self.memory = memory
        s = settings.service
        # Each running question uses at most a couple of I/O threads at a time (a read, a write).
        self.runner = QuestionLoop(io_threads=min(32, 2 * s.max_concurrent_questions + 2))
        self._slots: asyncio.Semaphore | None = None
        self._stream_slots: dict[str, asyncio.Semaphore] = {}

    def close(self) -> None:
        """Stop the question loop and close every backend it made (blocking; at server shutdown)."""
        self.runner.close()

    def check(self, question: str, options: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        """The question and options normalised (:func:`lucy.untrusted.normalise_question`: NFC, no invisible or
        control characters, one space between words); refuse empty, oversized or malformed ones and duplicate
        options (422)."""
        s = self.settings.service
        if len(question) > 2 * s.max_question_chars:  # not worth normalising
            raise InvalidRequest(f"the question has {len(question)} characters; the limit is "
                                 f"{s.max_question_chars} (service.max_question_chars)")
        if len(options) > s.max_options:
            raise InvalidRequest(f"{len(options)} options given; the limit is {s.max_options}")
        try:
            text, cleaned = normalise_question(question, options)
        except InputError as err:
            raise InvalidRequest(str(err)) from None
        if len(text) > s.max_question_chars:
            raise InvalidRequest(f"the question has {len(text)} characters; the limit is {s.max_question_chars} "
                                 f"(service.max_question_chars)")
        if any(len(o) > s.max_question_chars for o in cleaned):
            raise InvalidRequest(f"every option must have 1 to {s.max_question_chars} characters")
        if len(cleaned) == 1:
            raise InvalidRequest("a multiple-choice question needs at least two options")
        return text, cleaned

    def _stream_slot(self, stream: str) -> asyncio.Semaphore:
        slot = self._stream_slots.get(stream)
        if slot is None:
            s = self.settings.service
            slot = self._stream_slots[stream] = asyncio.Semaphore(
                min(s.max_questions_per_stream, s.max_concurrent_questions))
        return slot

    async def events(self, stream: str | Sequence[str], question: str, options: Sequence[str] = (), *,
                     progress: bool = False) -> AsyncIterator[QuestionUpdate]:
        """Yield a :class:`QuestionStep` for each trace step as it happens, then a :class:`QuestionAnswer`. With
        ``progress``, also a :class:`StepBegun` as each step begins (what it is about to do: a step is yielded once
        done, and a caption round can take minutes) and a :class:`StepProgress` for headway inside one.

        Raises a :class:`ServiceError` (bad question, unknown stream, timeout) or the engine's error. Closing the
        iterator early (or cancelling the task that iterates it) cancels the question. ``stream``: a name, or a
        list of names for a question across those streams (its slot, figures and settings are the server's own,
        under :data:`lucy.config.ALL_STREAMS`).
        """
        text, opts = self.check(question, options)
        names = [stream] if isinstance(stream, str) else list(dict.fromkeys(stream))
        if not names:
            raise Conflict("the data directory holds no stream yet: add one (POST /v1/streams) and ask again")
        for name in names:
            await asyncio.to_thread(self.manager.require, name)
        across = not isinstance(stream, str)
        key = ALL_STREAMS if across else names[0]
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.settings.service.max_concurrent_questions)
        timeout = self.settings.service.question_timeout_seconds
        deadline = time.monotonic() + timeout
        stats = self.manager.question_stats(key)
        stats.started()
        record: QuestionRecord | None = None
        began = time.monotonic()
        try:
            async with _slot(self._stream_slot(key), deadline, "questions about this stream"), \
                    _slot(self._slots, deadline, "other questions"):
                out: asyncio.Queue[QuestionEvent] = asyncio.Queue()
                server_loop = asyncio.get_running_loop()

                def emit(event: QuestionEvent) -> None:
                    try:
                        server_loop.call_soon_threadsafe(out.put_nowait, event)
                    except RuntimeError:
                        pass  # the server's loop has closed (shutdown)

                settings = self.settings if across else self.manager.settings_for(key)
                work = self.runner.submit(self._drive(emit, settings, names if across else key, text, opts,
                                                      progress))
                try:
                    while True:
                        try:
                            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                                event = await out.get()
                        except TimeoutError:
                            raise TimedOut(f"no answer within {timeout:g} s (service.question_timeout_seconds)") \
                                from None
                        match event:
                            case QuestionFailed(error=error):
                                raise error
                            case QuestionAnswer(result=result):
                                record = QuestionRecord(
                                    latency_seconds=time.monotonic() - began, iterations=result.iterations,
                                    llm_calls=result.llm_calls, caption_calls=result.caption_calls,
                                    confident=result.confident)
                                yield event
                                return
                            case _:
                                yield event
                finally:
                    work.cancel()  # a no-op once answered; else the question stops where it is
        finally:
            stats.finished(record)

    async def streams_across(self, streams: Sequence[str] | None) -> list[str]:
        """The streams a question across streams asks (``POST /v1/questions``, MQTT's ``_all``): ``streams``, each
        checked (:class:`StreamNotFound` for an unknown one), or every stream of the data directory (a
        :class:`Conflict` when there is none: nothing to ask about yet)."""
        if streams is None:
            names = await asyncio.to_thread(self.manager.names)
            if not names:
                raise Conflict("the data directory holds no stream yet: add one (POST /v1/streams) and ask again")
            return sorted(names)
        wanted = list(dict.fromkeys(n.strip() for n in streams if n.strip()))
        if not wanted:
            raise InvalidRequest("streams names no stream: give their names, or leave it out to ask every stream")
        return [await asyncio.to_thread(self.manager.require, n) for n in wanted]

    async def ask(self, stream: str | Sequence[str], question: str, options: Sequence[str] = (), *,
                  client_gone: Callable[[], Awaitable[bool]] | None = None) -> QueryResult:
        """The answer (the trace is in it; its ``to_json()`` is the answer object of the API).

        ``client_gone`` (e.g. Starlette's ``request.is_disconnected``) is polled while the question runs; when it
        says the client has gone, the question is cancelled and :class:`ClientGone` raised.
        """
        answering = asyncio.ensure_future(self._answer(stream, question, options))
        if client_gone is None:
            return await answering
        watching = asyncio.ensure_future(_until(client_gone))
        try:
            await asyncio.wait({answering, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watching.cancel()
        if answering.done():
            return answering.result()
        answering.cancel()
        await asyncio.gather(answering, return_exceptions=True)
        raise ClientGone("the client went away; the question was cancelled")

    async def _answer(self, stream: str | Sequence[str], question: str, options: Sequence[str]) -> QueryResult:
        async for event in self.events(stream, question, options):
            if isinstance(event, QuestionAnswer):
                return event.result
        raise Unavailable("the question ended without an answer")

    # ------------------------------------------------------------------------------------ on the question loop

    async def _drive(self, emit: Emit, settings: LucySettings, stream: str | list[str], question: str,
                     options: tuple[str, ...], progress: bool = False) -> None:
        # Told on the question loop, handed over like every event: they arrive in the order they happened.
        on_begin = (lambda step: emit(StepBegun.of(step))) if progress else None
        on_progress = (lambda step, text: emit(StepProgress(step.index, step.agent, text))) if progress else None
        try:
            async for event in self._run_engine(settings, stream, question, options, on_begin, on_progress):
                emit(event)
        except asyncio.CancelledError:
            raise
        except ServiceError as err:
            emit(QuestionFailed(err))
        except LucyError as err:  # e.g. no frames yet: the stream is not in a state to answer, unless the
            # environment failed (a locked store, a full disk, no descriptors left): that is not the stream's state
            emit(QuestionFailed(service_error_for(err) or Conflict(redact_url(str(err)))))
        except Exception as err:
            log.exception("question about %s failed", stream)
            emit(QuestionFailed(err))

    async def _run_engine(self, settings: LucySettings, stream: str | list[str], question: str,
                          options: tuple[str, ...],
                          on_begin: Callable[[TraceStep], None] | None = None,
                          on_progress: Callable[[TraceStep, str], None] | None = None,
                          ) -> AsyncIterator[QuestionStep | QuestionAnswer]:
        """The query engine's trace and answer as :class:`QuestionStep` ... :class:`QuestionAnswer`.

        The shared captioner (for deeper captions) is metered into the stream's own caption figures (across
        streams, into those of :data:`lucy.config.ALL_STREAMS`). Across streams, one with no frames yet is left
        out (the engine says so when none has any).
        """
        from lucy.wiring.engine import build_engine  # the query engine's modules load with the first question

        names = [stream] if isinstance(stream, str) else stream
        stores = []
        for name in names:
            try:
                stores.append(await asyncio.to_thread(self.manager.frames.open, name))
            except StoreError:
                if isinstance(stream, str):
                    raise Conflict(f"stream {stream!r} has no frames yet; ask again once ingest has stored some") \
                        from None
        if not stores:
            raise Conflict(f"none of the streams ({', '.join(names)}) has frames yet; ask again once ingest has "
                           "stored some")
        backends = self.runner.backends
        shared = backends.captioner(settings)
        stats: CaptionCallStats = self.manager.caption_stats(stream if isinstance(stream, str) else ALL_STREAMS)
        engine = build_engine(settings, stores[0] if isinstance(stream, str) else stores, self.memory,
                              reasoner=backends.reasoner(settings),
                              captioner=None if shared is None else ObservedCaptioner(shared, stats),
                              index=backends.index(settings, self.memory))
        run = engine.run(question, options, on_begin=on_begin, on_progress=on_progress)
        async for step in run:
            yield QuestionStep.of(step)
        assert run.result is not None
        yield QuestionAnswer(run.result)


class _slot:
    """``async with``: hold a semaphore, waiting for it no later than ``deadline`` (else 504)."""

    def __init__(self, semaphore: asyncio.Semaphore, deadline: float, busy_with: str) -> None:
        self.semaphore, self.deadline, self.busy_with = semaphore, deadline, busy_with

    async def __aenter__(self) -> None:
        try:
            async with asyncio.timeout(max(0.0, self.deadline - time.monotonic())):
                await self.semaphore.acquire()
        except TimeoutError:
            raise TimedOut(f"the server is busy with {self.busy_with}; try again later") from None

    async def __aexit__(self, *exc: object) -> None:
        self.semaphore.release()


async def _until(gone: Callable[[], Awaitable[bool]]) -> None:
    """Return once ``gone()`` says so. If it cannot tell (it raised), the question is left to run."""
    try:
        while not await gone():
            await asyncio.sleep(DISCONNECT_POLL_SECONDS)
    except Exception as err:  # noqa: BLE001  (not knowing is no reason to cancel a question)
        log.debug("cannot watch the client connection: %s", err)
        await asyncio.Event().wait()  # until cancelled by ask()
