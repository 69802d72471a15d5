"""Questions: ask about everything a stream has ingested so far (an answer, or its trace as server-sent
events), or across every stream (or some), and the stream's recent questions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sse_starlette import ServerSentEvent

from lucy.query.events import QuestionAnswer, QuestionStep
from lucy.service import memory_pages, sse
from lucy.service.errors import in_band_error
from lucy.service.schemas import AnswerOut, QuestionIn, QuestionsIn
from lucy.service.state import Service, service

router = APIRouter(tags=["questions"])


def wants_sse(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "").lower()


@router.post("/v1/streams/{name}/questions", response_model=AnswerOut, summary="Ask about everything ingested so far",
             description="Returns the answer object of `lucy ask --json`. With `Accept: text/event-stream` the "
                         "trace streams as `step` events while the question runs, then one `answer` event (or an "
                         "`error` event); a `: ping` comment keeps the stream open every service.sse_ping_seconds.",
             responses={200: {"content": {"application/json": {}, "text/event-stream": {}}}})
async def ask(name: str, body: QuestionIn, request: Request) -> Any:
    svc = service(request)
    if wants_sse(request):
        text, options = svc.questions.check(body.question, body.options)
        await asyncio.to_thread(svc.manager.require, name)
        return sse.event_stream(_sse_answer(svc, name, text, options), svc.settings.service.sse_ping_seconds)
    result = await svc.questions.ask(name, body.question, body.options, client_gone=request.is_disconnected)
    return result.to_json()


@router.post("/v1/questions", response_model=AnswerOut, summary="Ask across every stream (or some)",
             description="A question about everything every stream of the data directory has ingested so far "
                         "(`streams`: only those), answered as one: coarse memory of all of them is searched "
                         "together and the closer looks go wherever the best spans are. The same answer object and "
                         "`text/event-stream` form as the per-stream route; `streams` lists the streams asked, and "
                         "each evidence span and each trace step with a span names its `stream`.",
             responses={200: {"content": {"application/json": {}, "text/event-stream": {}}}})
async def ask_across(body: QuestionsIn, request: Request) -> Any:
    svc = service(request)
    names = await svc.questions.streams_across(body.streams)
    if wants_sse(request):
        text, options = svc.questions.check(body.question, body.options)
        return sse.event_stream(_sse_answer(svc, names, text, options), svc.settings.service.sse_ping_seconds)
    result = await svc.questions.ask(names, body.question, body.options, client_gone=request.is_disconnected)
    return result.to_json()


@router.get("/v1/streams/{name}/questions", summary="Recent questions and their answers")
async def recent_questions(name: str, request: Request,
                           limit: Annotated[int, Query(ge=1, le=500)] = 20) -> dict[str, Any]:
    svc = service(request)
    await asyncio.to_thread(svc.manager.require, name)
    rows = await asyncio.to_thread(_with_frame_urls, svc, name, limit)
    return {"stream": name, "questions": rows}


def _with_frame_urls(svc: Service, name: str, limit: int) -> list[dict[str, Any]]:
    """The stream's recent questions, each evidence span with the URL of its frame at its middle time (None when
    no frame is kept there), as search hits have: the dashboard shows the frames without guessing at 404s."""
    rows = svc.memory.questions(name, limit)
    frame_at = memory_pages.frame_urls(svc, name)
    for row in rows:
        answer = row.get("answer")
        if not isinstance(answer, dict):  # still running, or it failed
            continue
        for ev in answer.get("evidence") or []:
            ev["frame_url"] = frame_at((ev["start"] + ev["end"]) / 2)
    return rows


async def _sse_answer(svc: Service, name: str | list[str], question: str,
                      options: tuple[str, ...]) -> AsyncIterator[ServerSentEvent]:
    try:
        async for event in svc.questions.events(name, question, options):
            match event:
                case QuestionStep(step=step):
                    yield sse.event(step.to_json(), "step")
                case QuestionAnswer(result=result):
                    yield sse.event(result.to_json(), "answer")
    except Exception as err:  # noqa: BLE001  (the stream has started: the error can only go in-band)
        status, body = in_band_error(err, f"question about {name if isinstance(name, str) else ', '.join(name)}")
        yield sse.event({**body, "status": status}, "error")
