"""The question service's events, in process: typed steps and answer handed from the question loop to the reader in
the order they happened, a begun step as it was when it began, the metrics record filled from the typed answer, and
an engine's error raised to the reader (redacted). The engine is scripted; the question loop, queue and slots are
the service's own."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from lucy.config import LucySettings
from lucy.errors import LucyError
from lucy.metrics.stats import QuestionStats
from lucy.query.events import QuestionAnswer, QuestionStep, QuestionUpdate, StepBegun, StepProgress
from lucy.query.trace import Evidence, QueryResult, TraceStep
from lucy.service.errors import Conflict
from lucy.service.questions import QuestionService

LOCATE = TraceStep(index=1, agent="localise", iteration=1, llm_calls=2, prompt_tokens=30, completion_tokens=4)
LOOK = TraceStep(index=2, agent="caption", level="fine", start=10.0, end=20.0, iteration=1, caption_calls=3)


def _result() -> QueryResult:
    return QueryResult(question_id=7, stream="hall", question="What was shown?", options=[], answer="a red box",
                       option_index=None, confident=True, evidence=[Evidence(10.0, 20.0)], reason="seen at 0:10",
                       iterations=1, horizon=30.0, wall_seconds=0.5, trace=[LOCATE, LOOK])


class _Scripted(QuestionService):
    """The service with its engine replaced by a script that runs on the question loop, as the engine does."""

    def __init__(self, settings: LucySettings, script: Callable[..., AsyncIterator[Any]]) -> None:
        self.stats = QuestionStats()
        manager = SimpleNamespace(require=lambda _: None, question_stats=lambda _: self.stats,
                                  settings_for=lambda _: settings)
        super().__init__(settings, manager, memory=None)  # type: ignore[arg-type]
        self.script = script

    async def _run_engine(self, settings: LucySettings, stream: str, question: str, options: tuple[str, ...],
                          on_begin: Any = None, on_progress: Any = None) -> AsyncIterator[Any]:
        async for event in self.script(on_begin, on_progress):
            yield event


def _collect(svc: QuestionService, progress: bool = False) -> list[QuestionUpdate]:
    async def run() -> list[QuestionUpdate]:
        return [event async for event in svc.events("hall", "What was shown?", progress=progress)]

    try:
        return asyncio.run(run())
    finally:
        svc.close()


def test_steps_then_the_answer_typed_and_the_record_from_the_answer(settings: LucySettings) -> None:
    async def script(on_begin: Any, on_progress: Any) -> AsyncIterator[Any]:
        step = dataclasses.replace(LOCATE)
        on_begin(step)
        step.detail = "filled in once done"  # after it began: the begun event must not see this
        on_progress(step, "halfway")
        yield QuestionStep.of(step)
        yield QuestionStep.of(LOOK)
        yield QuestionAnswer(_result())

    svc = _Scripted(settings, script)
    events = _collect(svc, progress=True)
    assert [type(e) for e in events] == [StepBegun, StepProgress, QuestionStep, QuestionStep, QuestionAnswer]
    begun, headway, done = events[0], events[1], events[2]
    assert isinstance(begun, StepBegun) and begun.step.detail == ""
    assert isinstance(headway, StepProgress) and headway.to_json() == {"index": 1, "agent": "localise",
                                                                       "text": "halfway"}
    assert isinstance(done, QuestionStep) and done.step.detail == "filled in once done"
    answer = events[-1]
    assert isinstance(answer, QuestionAnswer) and answer.result.to_json() == _result().to_json()
    # The record comes from the typed answer: its calls are the trace's sums.
    (record,) = svc.stats.drain()
    assert (record.iterations, record.llm_calls, record.caption_calls, record.confident) == (1, 2, 3, True)
    assert svc.stats.answered == 1 and svc.stats.failures == 0 and svc.stats.in_flight == 0


def test_without_progress_no_begun_or_headway_events(settings: LucySettings) -> None:
    async def script(on_begin: Any, on_progress: Any) -> AsyncIterator[Any]:
        assert on_begin is None and on_progress is None
        yield QuestionStep.of(LOOK)
        yield QuestionAnswer(_result())

    assert [type(e) for e in _collect(_Scripted(settings, script))] == [QuestionStep, QuestionAnswer]


def test_an_engine_error_is_raised_to_the_reader_redacted(settings: LucySettings) -> None:
    async def script(on_begin: Any, on_progress: Any) -> AsyncIterator[Any]:
        yield QuestionStep.of(LOOK)
        raise LucyError("cannot read rtsp://admin:hunter2@cam.local/live")

    svc = _Scripted(settings, script)
    seen: list[QuestionUpdate] = []

    async def run() -> None:
        async for event in svc.events("hall", "What was shown?"):
            seen.append(event)

    try:
        with pytest.raises(Conflict) as caught:
            asyncio.run(run())
    finally:
        svc.close()
    assert [type(e) for e in seen] == [QuestionStep]
    assert "hunter2" not in str(caught.value) and "cam.local" in str(caught.value)
    assert svc.stats.failures == 1 and svc.stats.answered == 0
