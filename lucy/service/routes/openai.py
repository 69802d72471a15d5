"""OpenAI-compatible endpoints: streams listed as models, and chat completions that ask a stream."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request

from lucy.service import chat
from lucy.service.schemas import ChatRequest, ModelList
from lucy.service.state import service

router = APIRouter(tags=["openai"])


@router.get("/v1/models", response_model=ModelList, summary="Streams, as OpenAI models")
async def models(request: Request) -> dict[str, Any]:
    rows = await asyncio.to_thread(service(request).manager.statuses)
    return {"object": "list", "data": [
        {"id": r["name"], "object": "model", "created": int(r["created"] or r["started_at"] or 0), "owned_by": "lucy"}
        for r in rows]}


@router.post("/v1/chat/completions", summary="OpenAI-compatible chat; `model` names a stream",
             responses={200: {"content": {"application/json": {}, "text/event-stream": {}}}})
async def chat_completions(body: ChatRequest, request: Request) -> Any:
    return await chat.complete(service(request), body, request.is_disconnected)
