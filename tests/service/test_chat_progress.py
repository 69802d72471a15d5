"""What a streamed chat reply sends while its question runs, in each ``service.chat_progress`` mode, and its
``usage``: the chat code driven by a scripted question service, each chunk read back with the ``openai`` package's
own chunk type (which keeps the ``reasoning_content`` it does not declare)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from lucy.config import load_settings
from lucy.query.events import QuestionAnswer, QuestionStep, QuestionUpdate, StepBegun, StepProgress
from lucy.query.trace import Evidence, QueryResult, TraceStep
from lucy.service import chat
from lucy.service.schemas import ChatRequest

QUESTION = "What did the announcement say?"
CAPTION = TraceStep(index=4, agent="caption", level="fine", start=40, end=50, iteration=1,
                    instruction="what the speaker says", caption_calls=1)
FAILED = TraceStep(index=4, agent="caption", level="fine", start=40, end=50, iteration=1,
                   error="the captioner timed out\nafter 60 s")


def _answer(prompt_tokens: int = 0, completion_tokens: int = 0) -> QueryResult:
    step = dataclasses.replace(CAPTION, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, llm_calls=3)
    return QueryResult(question_id=1, stream="hall", question=QUESTION, options=[], answer="Platform 7 at 14:05",
                       option_index=None, confident=True, evidence=[Evidence(40.0, 50.0)], reason="", iterations=1,
                       horizon=60.0, wall_seconds=1.0, trace=[step])


class _Questions:
    """Scripted events of one question: each step begins, then ends; then the answer."""

    def __init__(self, steps: Sequence[TraceStep], answer: QueryResult) -> None:
        self.steps, self.answer = steps, answer
        self.progress: list[bool] = []  # what each events() call was asked for

    def check(self, question: str, options: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        return question, tuple(options)

    async def events(self, stream: str, question: str, options: Sequence[str] = (), *,
                     progress: bool = False) -> AsyncIterator[QuestionUpdate]:
        self.progress.append(progress)
        for step in self.steps:
            if progress:
                yield StepBegun(TraceStep(index=step.index, agent=step.agent, level=step.level, start=step.start,
                                          end=step.end, iteration=step.iteration, instruction=step.instruction))
                if step.caption_calls:
                    yield StepProgress(step.index, step.agent, "fine 0:40–0:45 captioned (1 of 2)")
            yield QuestionStep(step)
        yield QuestionAnswer(self.answer)

    async def ask(self, stream: str, question: str, options: Sequence[str] = (), **_: Any) -> QueryResult:
        return self.answer


def _service(mode: str, questions: _Questions) -> SimpleNamespace:
    settings = load_settings(service={"chat_progress": mode})
    return SimpleNamespace(settings=settings, questions=questions, manager=SimpleNamespace(require=lambda _: None))


async def _gone() -> bool:
    return False


def _chunks(mode: str, steps: Sequence[TraceStep], answer: QueryResult,
            **body: Any) -> tuple[list[ChatCompletionChunk], list[bool]]:
    questions = _Questions(steps, answer)
    request = ChatRequest(model="hall", stream=True, messages=[{"role": "user", "content": QUESTION}], **body)

    async def collect() -> list[str]:
        response = await chat.complete(_service(mode, questions), request, _gone)
        return [event.data async for event in response.body_iterator]

    data = asyncio.run(collect())
    assert data[-1] == "[DONE]"
    return [ChatCompletionChunk.model_validate(json.loads(d)) for d in data[:-1]], questions.progress


def _reasoning(chunk: ChatCompletionChunk) -> str | None:
    return (chunk.choices[0].delta.model_extra or {}).get("reasoning_content") if chunk.choices else None


def _content(chunks: list[ChatCompletionChunk]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_progress_as_reasoning_comes_first_then_the_answer() -> None:
    chunks, asked = _chunks("reasoning", [CAPTION], _answer())
    assert asked == [True]
    reasoning = [_reasoning(c) for c in chunks if _reasoning(c)]
    assert reasoning == ["opening the memory of hall …\n", "looking closer at 0:40–0:50 for: what the speaker says …\n",
                         "  fine 0:40–0:45 captioned (1 of 2)\n"]
    first_content = next(i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content)
    assert all(not _reasoning(c) for c in chunks[first_content:])
    assert _content(chunks).startswith("Platform 7 at 14:05")


def test_progress_as_content_comes_before_the_answer_on_lines_of_its_own() -> None:
    chunks, _ = _chunks("content", [CAPTION], _answer())
    assert not any(_reasoning(c) for c in chunks)
    assert _content(chunks).startswith("opening the memory of hall …\nlooking closer at 0:40–0:50 for: what the "
                                       "speaker says …\n  fine 0:40–0:45 captioned (1 of 2)\n\nPlatform 7")


def test_no_progress_sends_the_answer_alone() -> None:
    chunks, asked = _chunks("none", [CAPTION, FAILED], _answer())
    assert asked == [False] and not any(_reasoning(c) for c in chunks)
    assert _content(chunks).startswith("Platform 7 at 14:05")


def test_a_failed_step_says_so_in_one_line() -> None:
    chunks, _ = _chunks("reasoning", [FAILED], _answer())
    reasoning = [_reasoning(c) for c in chunks if _reasoning(c)]
    assert reasoning[1:] == ["looking closer at 0:40–0:50 …\n", "  (that failed: the captioner timed out after 60 s)\n"]


@pytest.mark.parametrize("include_usage", [True, False])
def test_usage_estimated_from_the_text_when_no_model_counted(include_usage: bool) -> None:
    chunks, _ = _chunks("reasoning", [CAPTION], _answer(), stream_options={"include_usage": include_usage})
    with_usage = [c for c in chunks if c.usage is not None]
    assert len(with_usage) == 1
    usage = with_usage[0].usage
    assert usage is not None and usage.model_extra == {"estimated": True}
    assert usage.prompt_tokens >= len(QUESTION) // 4 and usage.completion_tokens >= len("Platform 7 at 14:05") // 4
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    if include_usage:  # OpenAI's shape: the last chunk, with no choices; the finishing chunk before it has none
        assert with_usage[0] is chunks[-1] and chunks[-1].choices == []
        assert chunks[-2].choices[0].finish_reason == "stop"
    else:
        assert with_usage[0].choices[0].finish_reason == "stop"


def test_usage_is_what_the_model_counted_where_it_counted() -> None:
    chunks, _ = _chunks("reasoning", [CAPTION], _answer(321, 45), stream_options={"include_usage": True})
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (321, 45, 366)
    assert usage.model_extra == {"estimated": False}

    request = ChatRequest(model="hall", messages=[{"role": "user", "content": QUESTION}])
    reply = asyncio.run(chat.complete(_service("reasoning", _Questions([CAPTION], _answer())), request, _gone))
    usage = ChatCompletion.model_validate(reply).usage
    assert usage is not None and usage.prompt_tokens > 0 and usage.model_extra == {"estimated": True}


def test_usage_estimate_reads_text_parts_and_bad_stream_options_are_refused() -> None:
    from pydantic import ValidationError

    request = ChatRequest(model="hall", messages=[
        {"role": "system", "content": None},
        {"role": "user", "content": [{"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": {}}]}])
    assert chat.asked_text(request) == QUESTION
    for bad in ("yes", {"include_usage": "maybe"}):
        with pytest.raises(ValidationError):
            ChatRequest(model="hall", messages=[{"role": "user", "content": QUESTION}], stream_options=bad)
