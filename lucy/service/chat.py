"""What ``POST /v1/chat/completions`` answers (its route is in :mod:`lucy.service.routes.openai`), OpenAI-compatible:
``model`` names a stream (or :data:`lucy.config.ALL_STREAMS`, ``_all``: every stream, answered across them), the
conversation's last user message is what is asked.

What that message is decides the work (:mod:`lucy.service.conversation`): a question about the video goes to the
query engine, with the earlier turns it leans on; a chat front-end's own task (a title, tags, follow-up suggestions)
and small talk ("hi", "thanks") are answered at once from the conversation and what memory holds, with no caption
and no reasoner call. Any OpenAI client can ask; streamed replies (server-sent events with keep-alive pings) say what
the question is doing as each step begins ("looking closer at 0:40–0:50 …"), since one step can take minutes: as
``reasoning_content`` deltas (what reasoning models send and chat front-ends show as thinking), or as ``content``
before the answer, or not at all (``service.chat_progress``); then the answer is the ``content``. The full answer
object rides along as ``lucy``, with ``lucy.chat`` saying how the message was read. ``usage`` counts what the
reasoner's model counted, else estimates from the text (``usage.estimated``). Errors come in OpenAI's shape
(:mod:`lucy.service.http_errors`), so OpenAI clients show their message.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sse_starlette import ServerSentEvent

from lucy.config import ALL_STREAMS, Level
from lucy.errors import InvalidStream, StreamNotFound
from lucy.query.events import QuestionAnswer, QuestionStep, StepBegun, StepProgress
from lucy.query.trace import progress_line
from lucy.service import conversation, sse
from lucy.service.conversation import Kind, MemoryGlance, Reading
from lucy.service.errors import InvalidRequest, ModelNotFound, in_band_error
from lucy.service.schemas import ChatRequest
from lucy.text import clip_words, estimate_tokens

log = logging.getLogger(__name__)


def answer_text(answer: dict[str, Any]) -> str:
    """The assistant message: the answer, its evidence in media time (each span with the path of its clip), and a
    note when it is not confident."""
    text = str(answer.get("answer", ""))
    spans = [f"{e['stream'] + ' ' if e.get('stream') else ''}{e['start']:.1f}-{e['end']:.1f} s"
             + (f" ({e['clip_url']})" if e.get("clip_url") else "") for e in answer.get("evidence", [])]
    if spans:
        text += f"\n\nEvidence: {', '.join(spans)}."
    if not answer.get("confident", False):
        text += "\n(Not confident: the memory does not clearly support this answer.)"
    return text


ERROR_CHARS = 200  # of a failed step's reason in a progress line (the whole of it is in ``lucy.trace``)


def usage(answer: dict[str, Any], asked: str, content: str) -> dict[str, Any]:
    """A reply's ``usage``. Where the reasoner's model counted tokens, theirs over every agent call the question
    made; where none did (the embedded agents, a title or small talk answered without a model, a server that sends
    no usage), an estimate from the text: the messages asked and the answer's content
    (:func:`lucy.text.estimate_tokens`, on the high side). ``estimated`` says which."""
    prompt, completion = int(answer.get("prompt_tokens") or 0), int(answer.get("completion_tokens") or 0)
    estimated = not (prompt or completion)
    if estimated:
        prompt, completion = estimate_tokens(asked), estimate_tokens(content)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "estimated": estimated}


def asked_text(body: ChatRequest) -> str:
    """The text of the request's messages (the parts that are text), for a usage estimate."""
    parts: list[str] = []
    for message in body.messages:
        if isinstance(message.content, str):
            parts.append(message.content)
        elif message.content:
            parts += [str(p["text"]) for p in message.content if isinstance(p, dict) and p.get("text")]
    return "\n".join(parts)


class _Reply:
    """One chat completion's id, time and model, and its pieces: the whole object or its chunks."""

    def __init__(self, model: str) -> None:
        self.id, self.created, self.model = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), model

    def completion(self, answer: dict[str, Any], content: str, used: dict[str, Any]) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop", "logprobs": None}],
                "usage": used, "lucy": answer}

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> ServerSentEvent:
        return sse.event({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                          "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                          **extra})

    def closing(self, answer: dict[str, Any], used: dict[str, Any], include_usage: bool) -> list[ServerSentEvent]:
        """The last chunks: ``finish_reason`` with the answer object; with ``stream_options.include_usage``, then
        OpenAI's usage chunk (no choices); without, the usage rides on the finishing chunk (front-ends that never
        ask for it read it there)."""
        if not include_usage:
            return [self.chunk({}, "stop", usage=used, lucy=answer)]
        return [self.chunk({}, "stop", usage=None, lucy=answer),
                sse.event({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                           "model": self.model, "choices": [], "usage": used})]


def read_request(body: ChatRequest, max_chars: int) -> Reading:
    """How the conversation's last user message is read (422 when there is none). With answer options it is a
    question, whatever its words."""
    messages = [m.model_dump() for m in body.messages]
    try:
        reading = conversation.read(messages, max_chars=max_chars)
    except ValueError as err:
        raise InvalidRequest(str(err), param="messages") from None
    if body.options and reading.kind is not Kind.QUESTION:
        question, why = conversation.with_context(reading.text, reading.history, max_chars=max_chars)
        return Reading(Kind.QUESTION, reading.text, f"a multiple-choice question ({why})", question=question,
                       history=reading.history)
    return reading


async def complete(svc: Any, body: ChatRequest, client_gone: Callable[[], Awaitable[bool]]) -> Any:
    """Answer a chat completion request (``svc``: the server's :class:`lucy.service.state.Service`): a
    ``chat.completion`` object, or a stream of ``chat.completion.chunk`` events when ``body.stream``."""
    target: str | list[str] = body.model
    try:
        if body.model == ALL_STREAMS:  # every stream: asked across them
            target = sorted(await asyncio.to_thread(svc.manager.names))
            if not target:
                raise InvalidRequest(f"the model {ALL_STREAMS!r} asks every stream, and the data directory holds "
                                     "none yet: add one (POST /v1/streams)", param="model")
        else:
            await asyncio.to_thread(svc.manager.require, body.model)
    except StreamNotFound:
        raise ModelNotFound(f"the model {body.model!r} does not exist: models are stream names (GET /v1/models)",
                            param="model") from None
    except InvalidStream as err:
        raise InvalidRequest(str(err), param="model") from None
    reading = read_request(body, svc.settings.service.max_question_chars)
    reply = _Reply(body.model)
    ping = svc.settings.service.sse_ping_seconds
    asked = asked_text(body)
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    if reading.kind is not Kind.QUESTION:
        answer = await _without_engine(svc, target, reading)
        log.info("chat about %s answered without the query engine: %s", body.model, reading.why)
        used = usage(answer, asked, answer["answer"])
        if body.stream:
            return sse.event_stream(_stream_direct(reply, answer, used, include_usage), ping)
        return reply.completion(answer, answer["answer"], used)
    try:
        question, options = svc.questions.check(reading.question, body.options)
    except InvalidRequest as err:
        raise InvalidRequest(str(err), param="messages") from None
    if body.stream:
        progress = svc.settings.service.chat_progress
        return sse.event_stream(_stream(svc, reply, target, reading, question, options, progress=progress,
                                        asked=asked, include_usage=include_usage), ping)
    # Errors from here on (busy, timed out...) answer through the app's handlers: JSON with Retry-After.
    result = await svc.questions.ask(target, question, options, client_gone=client_gone)
    answer = {**result.to_json(), "chat": _chat_note(reading)}
    content = answer_text(answer)
    return reply.completion(answer, content, usage(answer, asked, content))


def _chat_note(reading: Reading) -> dict[str, Any]:
    """How the message was read, for ``lucy.chat``."""
    note: dict[str, Any] = {"kind": reading.kind.value, "why": reading.why}
    if reading.kind is Kind.QUESTION:
        note["asked"] = reading.question
    elif reading.kind is Kind.TASK:
        note["task"] = reading.task
    else:
        note["small_talk"] = reading.small_talk
    return note


async def _without_engine(svc: Any, target: str | list[str], reading: Reading) -> dict[str, Any]:
    """The answer object of a task or small talk: no question recorded, no caption, no reasoner call."""
    glance = await asyncio.to_thread(_glance, svc, target) if isinstance(target, str) else \
        await asyncio.to_thread(_glance_all, svc, target)
    stream = target if isinstance(target, str) else ALL_STREAMS
    if reading.kind is Kind.TASK:
        content = conversation.task_reply(reading, glance)
    else:
        content = conversation.small_talk_reply(reading.small_talk, glance)
    return {"question_id": None, "stream": stream, "question": reading.text, "answer": content, "confident": True,
            "evidence": [], "reason": reading.why, "iterations": 0, "llm_calls": 0, "caption_calls": 0,
            "prompt_tokens": 0, "completion_tokens": 0, "horizon": round(glance.captioned_seconds, 3),
            "wall_seconds": 0.0, "errors": [], "trace": [], "chat": _chat_note(reading)}


def _glance_all(svc: Any, streams: list[str]) -> MemoryGlance:
    """What the memory of several streams holds, together: the longest captioned, all coarse memories, the latest."""
    glances = [_glance(svc, name) for name in streams]
    latest = [g for g in glances if g.latest is not None]
    newest = max(latest, key=lambda g: g.captioned_seconds, default=None)
    return MemoryGlance(f"{len(streams)} streams", max((g.captioned_seconds for g in glances), default=0.0),
                        sum(g.coarse_memories for g in glances), None if newest is None else newest.latest)


def _glance(svc: Any, stream: str) -> MemoryGlance:
    """What the stream's memory holds (blocking: a status and two short reads of the memory store)."""
    captioned = float(svc.manager.status(stream).get("captioned_until") or 0.0)
    coarse = Level.COARSE.value
    count = svc.memory.count(stream, level=coarse)
    if count == 0:
        return MemoryGlance(stream, captioned)
    span = svc.manager.settings_for(stream).levels.level(Level.COARSE).span_seconds
    recent = svc.memory.nodes(stream, level=coarse, start=max(0.0, captioned - 3 * span))
    latest = max(recent, key=lambda n: n.end, default=None)
    return MemoryGlance(stream, captioned, count, None if latest is None else (latest.start, latest.end, latest.text))


async def _stream_direct(reply: _Reply, answer: dict[str, Any], used: dict[str, Any],
                         include_usage: bool) -> AsyncIterator[ServerSentEvent]:
    yield reply.chunk({"role": "assistant", "content": ""})
    yield reply.chunk({"content": answer["answer"]})
    for chunk in reply.closing(answer, used, include_usage):
        yield chunk
    yield sse.event("[DONE]")


async def _stream(svc: Any, reply: _Reply, target: str | list[str], reading: Reading, question: str,
                  options: tuple[str, ...], *,
                  progress: str, asked: str, include_usage: bool) -> AsyncIterator[ServerSentEvent]:
    """The question's progress and answer as chunks: a line as each step begins, one for each caption of a round,
    and one when a step failed (as ``progress`` says: ``reasoning_content``, ``content`` or none). When the client
    goes, the response cancels this generator where it waits, and with it the question."""
    field = "reasoning_content" if progress == "reasoning" else "content"
    shown = False  # whether progress went out as content: the answer then starts on a line of its own
    yield reply.chunk({"role": "assistant", "content": ""})
    if progress != "none":  # at once: opening memory (and a model's first load) can take seconds before a step
        yield reply.chunk({field: f"opening the memory of {reply.model} …\n"})
        shown = field == "content"
    try:
        async for event in svc.questions.events(target, question, options, progress=progress != "none"):
            match event:
                case StepBegun(step=step):
                    yield reply.chunk({field: progress_line(step.to_json()) + "\n"})
                    shown = field == "content"
                case StepProgress(text=text):
                    yield reply.chunk({field: f"  {text}\n"})
                case QuestionStep(step=step) if step.error and progress != "none":
                    reason = clip_words(" ".join(step.error.split()), ERROR_CHARS)
                    yield reply.chunk({field: f"  (that failed: {reason})\n"})
                case QuestionAnswer(result=result):
                    answer = {**result.to_json(), "chat": _chat_note(reading)}
                    content = answer_text(answer)
                    yield reply.chunk({"content": "\n" + content if shown else content})
                    for chunk in reply.closing(answer, usage(answer, asked, content), include_usage):
                        yield chunk
    except Exception as err:  # noqa: BLE001  (the stream has started: the error can only go in-band)
        _, body = in_band_error(err, f"chat question about {reply.model}")
        yield sse.event(body)
    yield sse.event("[DONE]")
