"""OpenAI-compatible endpoints: streams listed as models (and, once there are two, ``_all``: every stream), and chat
completions that ask a stream, or across every stream."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request

from lucy.config import ALL_STREAMS
from lucy.service import chat
from lucy.service.schemas import ChatRequest, ModelList
from lucy.service.state import service

router = APIRouter(tags=["openai"])


@router.get("/v1/models", response_model=ModelList, summary="Streams, as OpenAI models")
async def models(request: Request) -> dict[str, Any]:
    rows = await asyncio.to_thread(service(request).manager.statuses)
    data = [{"id": r["name"], "object": "model", "created": int(r["created"] or r["started_at"] or 0),
             "owned_by": "lucy"} for r in rows]
    if len(rows) > 1:  # with one stream, that stream is all of them
        data.append({"id": ALL_STREAMS, "object": "model", "owned_by": "lucy",
                     "created": min(int(r["created"] or r["started_at"] or 0) for r in rows)})
    return {"object": "list", "data": data}


@router.post("/v1/chat/completions", summary="OpenAI-compatible chat; `model` names a stream, or `_all`",
             description="The last user message is asked of the stream's memory (`_all`: of every stream's, "
                         "answered across them) (with the earlier turns a follow-up "
                         "leans on). A chat front-end's own tasks (title, tags, follow-up suggestions) and small talk "
                         "are answered at once, without captions. `stream: true` sends server-sent events: a line as "
                         "each step begins ('looking closer at 0:40–0:50 …') as `reasoning_content` (or as content, "
                         "or none: service.chat_progress), then the answer, then `data: [DONE]`, with `: ping` "
                         "comments every service.sse_ping_seconds. `usage` holds the tokens the reasoner's model "
                         "counted, else an estimate from the text (`usage.estimated`); with "
                         "`stream_options.include_usage` it comes in a last chunk of its own. Errors come as OpenAI "
                         "error objects.",
             responses={200: {"content": {"application/json": {}, "text/event-stream": {}}}})
async def chat_completions(body: ChatRequest, request: Request) -> Any:
    return await chat.complete(service(request), body, request.is_disconnected)
