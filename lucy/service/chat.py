"""What ``POST /v1/chat/completions`` answers (its route is in :mod:`lucy.service.routes.openai`), OpenAI-compatible:
``model`` names a stream, the last user message is the question. Any OpenAI client can ask; streamed replies
carry the trace as ``reasoning_content`` deltas (as reasoning models do) and then the answer as ``content``. The
full answer object rides along as ``lucy``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse, StreamingResponse

from lucy.service.errors import InvalidRequest, NotFound, ServiceError, error_body, in_band_error
from lucy.service.schemas import ChatRequest

log = logging.getLogger(__name__)


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse(error_body(status, message, code), status_code=status)


def last_user_text(body: ChatRequest) -> str:
    """The text of the last user message (string content, or the text parts of a content list)."""
    for message in reversed(body.messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            return "\n".join(str(p) for p in parts)
        return ""
    raise InvalidRequest("the conversation has no user message: the last user message is the question")


def answer_text(answer: dict[str, Any]) -> str:
    """The assistant message: the answer, its evidence in media time, and a note when it is not confident."""
    text = str(answer.get("answer", ""))
    spans = [f"{e['start']:.1f}-{e['end']:.1f} s" for e in answer.get("evidence", [])]
    if spans:
        text += f"\n\nEvidence: {', '.join(spans)}."
    if not answer.get("confident", False):
        text += "\n(Not confident: the memory does not clearly support this answer.)"
    return text


def step_text(step: dict[str, Any]) -> str:
    where = ""
    if step.get("start") is not None and step.get("end") is not None:
        where = f" {step.get('level') or ''} {step['start']:g}-{step['end']:g} s"
    line = f"[{step.get('agent', 'step')}{where}]"
    if step.get("detail"):
        line += f" {step['detail']}"
    if step.get("instruction"):
        line += f" (look for: {step['instruction']})"
    if step.get("error"):
        line += f" ERROR: {step['error']}"
    return line + "\n"


def _usage(answer: dict[str, Any]) -> dict[str, int]:
    prompt, completion = int(answer.get("prompt_tokens", 0)), int(answer.get("completion_tokens", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunk(cid: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None,
           **extra: Any) -> bytes:
    body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


async def complete(svc: Any, body: ChatRequest, client_gone: Callable[[], Awaitable[bool]]) -> Any:
    """Answer a chat completion request (``svc``: the server's :class:`lucy.service.state.Service`): a
    ``chat.completion`` object, or a stream of ``chat.completion.chunk`` events when ``body.stream``."""
    try:
        question, options = svc.questions.check(last_user_text(body), body.options)
        await asyncio.to_thread(svc.manager.require, body.model)
    except NotFound:
        return _error(404, f"the model {body.model!r} does not exist: models are stream names "
                           f"(GET /v1/models)", "model_not_found")
    except ServiceError as err:
        return _error(err.status, str(err), "invalid_request")
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    if body.stream:
        return StreamingResponse(_stream(svc, body.model, question, options, cid, created),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    # Errors from here on (busy, timed out...) answer through the app's handlers: JSON with Retry-After.
    answer = await svc.questions.ask(body.model, question, options, client_gone=client_gone)
    return {
        "id": cid, "object": "chat.completion", "created": created, "model": body.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer_text(answer)},
                     "finish_reason": "stop", "logprobs": None}],
        "usage": _usage(answer), "lucy": answer,
    }


async def _stream(svc: Any, model: str, question: str, options: tuple[str, ...], cid: str,
                  created: int) -> AsyncIterator[bytes]:
    yield _chunk(cid, created, model, {"role": "assistant", "content": ""})
    try:
        async for kind, value in svc.questions.events(model, question, options):
            if kind == "step":
                yield _chunk(cid, created, model, {"reasoning_content": step_text(value)})
            elif kind == "answer":
                yield _chunk(cid, created, model, {"content": answer_text(value)})
                yield _chunk(cid, created, model, {}, "stop", usage=_usage(value), lucy=value)
    except Exception as err:  # noqa: BLE001  (the stream has started: the error can only go in-band)
        _, body = in_band_error(err, f"chat question about {model}")
        yield f"data: {json.dumps(body)}\n\n".encode()
    yield b"data: [DONE]\n\n"
