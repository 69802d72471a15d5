"""A real OpenAI-compatible HTTP server with scripted replies, for tests and benchmarks.

It speaks the chat-completions API (``POST /v1/chat/completions``, plain JSON or ``stream: true`` SSE), the
embeddings API (``POST /v1/embeddings``: deterministic hashed bag-of-words vectors, so texts sharing words are
near) and ``GET /v1/models`` on ``127.0.0.1`` from a background thread, so clients under test use their real HTTP stack
(connection pools, timeouts, retries) exactly as against vLLM.

Why FastAPI + uvicorn: the Lucy service is built on them too, so tests exercise the same stack; uvicorn runs a
single asyncio loop in a thread (no subprocess to manage), accepts a pre-bound socket (free port, no race),
and thousands of concurrent connections cost it nothing, which makes the simulated capacity accurate:
requests wait on an ``asyncio.Semaphore(capacity)`` and hold a slot for ``latency + reply.delay`` seconds, like
a GPU server whose batch is full. A benchmark can therefore expect ``capacity / latency`` requests per second.

Example::

    with ScriptedOpenAIServer([Reply(status=500), Reply("a red car")]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x")
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

__all__ = ["Reply", "ScriptedOpenAIServer", "hashed_embedding"]

_STARTUP_TIMEOUT_SECONDS = 15.0


@dataclass
class Reply:
    """One scripted reply.

    ``status`` other than 200 sends an OpenAI-style error object (``content`` is its message). ``raw_body`` is
    sent verbatim instead (broken JSON, an HTML error page...), as ``content_type`` or, when that is None, as
    text/html when it starts with ``<`` and application/json otherwise. ``content=None`` sends a message whose
    content is null. ``delay`` is added to the server's ``latency`` for this reply.
    """

    content: str | None = "ok"
    status: int = 200
    delay: float = 0.0
    raw_body: str | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 5
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"retry-after": "0"} on a 429
    content_type: str | None = None
    finish_reason: str = "stop"
    vectors: int | None = None  # embeddings: how many vectors to send (None: one per input, as a server should)


ReplyScript = list[Reply] | Callable[[dict[str, Any]], Reply] | None


class ScriptedOpenAIServer:
    """An OpenAI-compatible chat server on ``127.0.0.1:<free port>``, serving from a background thread.

    ``replies``: a list consumed in order (the last one then repeats), or a callable given each request body,
    or None (always ``Reply()``). ``latency`` is added to every request; ``capacity`` bounds the requests
    processed at once (others queue). ``requests`` holds the JSON bodies received, in arrival order;
    ``headers`` their HTTP headers (lower-case names); ``peak_in_flight`` the most requests processed at once;
    ``holds`` when each request held a processing slot (``time.monotonic()`` start and end).
    """

    def __init__(self, replies: ReplyScript = None, *, latency: float = 0.0, capacity: int | None = None,
                 model: str = "scripted-vlm", embedding_dim: int = 64) -> None:
        if latency < 0:
            raise ValueError("latency must be >= 0")
        if capacity is not None and capacity < 1:
            raise ValueError("capacity must be >= 1 (or None for unbounded)")
        if isinstance(replies, list) and not replies:
            raise ValueError("give at least one reply (or None for the default reply)")
        self.replies = replies
        self.latency = latency
        self.capacity = capacity
        self.model = model
        self.embedding_dim = embedding_dim
        self.base_url = ""
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.errors: list[str] = []  # failures of a reply callable (reported to the client as HTTP 500)
        self.in_flight = 0
        self.peak_in_flight = 0
        self.completed = 0
        self.holds: list[tuple[float, float]] = []  # (start, end) time.monotonic() of each processing slot held
        self._lock = threading.Lock()
        self._script_index = 0
        self._ids = itertools.count(1)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._closing: asyncio.Event | None = None

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> ScriptedOpenAIServer:
        """Bind a free port, serve in a daemon thread, and return once the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without it
        # Nagle + delayed ACK add ~40 ms to every response (which would wreck throughput measurements).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="warning", access_log=False, lifespan="on",
                                backlog=4096, timeout_keep_alive=30, timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name=f"scripted-openai-{port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _STARTUP_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise RuntimeError("scripted OpenAI server did not start")
            time.sleep(0.005)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def stop(self) -> None:
        """Stop serving; requests still waiting are answered 503 at once so that stopping is quick."""
        server, thread, loop = self._server, self._thread, self._loop
        if server is None or thread is None:
            return
        if loop is not None and self._closing is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._closing.set)
            except RuntimeError:  # the loop has just closed
                pass
        server.should_exit = True
        thread.join(timeout=10)
        self._server = self._thread = self._loop = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --------------------------------------------------------------------------------------------- script

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        script = self.replies
        if script is None:
            return Reply()
        if callable(script):
            return script(body)
        with self._lock:
            reply = script[min(self._script_index, len(script) - 1)]
            self._script_index += 1
        return reply

    async def _take(self, request: Request, body: dict[str, Any]) -> Reply | Response:
        """Record a request and wait out its scripted reply's delay: the reply, or the error response to send
        instead (a broken test script, a server stopping)."""
        with self._lock:
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in request.headers.items()})
        try:
            reply = self._next_reply(body)
        except Exception as err:  # noqa: BLE001  (a broken test script: say so instead of hanging the client)
            self.errors.append(f"{type(err).__name__}: {err}")
            return _error(500, f"scripted reply failed: {err}", "server_error")
        if not await self._process(self.latency + reply.delay):
            return _error(503, "server is stopping", "server_error")
        return reply

    # ------------------------------------------------------------------------------------------------ app

    def _app(self) -> FastAPI:
        @asynccontextmanager
        async def lifespan(_: FastAPI) -> AsyncIterator[None]:
            # Loop-bound primitives are made in the server's own loop.
            self._loop = asyncio.get_running_loop()
            self._slots = asyncio.Semaphore(self.capacity) if self.capacity else None
            self._closing = asyncio.Event()
            yield

        app = FastAPI(title="Scripted OpenAI-compatible server", lifespan=lifespan, docs_url=None,
                      redoc_url=None, openapi_url=None)

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return {"object": "list", "data": [
                {"id": self.model, "object": "model", "created": 0, "owned_by": "lucy-scripted"}]}

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> Response:
            raw = await request.body()
            try:
                body = json.loads(raw)
            except ValueError:
                return _error(400, "request body is not valid JSON", "invalid_request_error")
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return _error(400, "'messages' must be a list", "invalid_request_error")
            reply = await self._take(request, body)
            return reply if isinstance(reply, Response) else self._respond(body, reply)

        @app.post("/v1/embeddings")
        async def embeddings(request: Request) -> Response:
            try:
                body = json.loads(await request.body())
            except ValueError:
                return _error(400, "request body is not valid JSON", "invalid_request_error")
            texts = body.get("input") if isinstance(body, dict) else None
            if isinstance(texts, str):
                texts = [texts]
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                return _error(400, "'input' must be a string or a list of strings", "invalid_request_error")
            reply = await self._take(request, body)
            if isinstance(reply, Response):
                return reply
            if reply.raw_body is not None or reply.status != 200:
                return self._respond(body, reply)
            count = len(texts) if reply.vectors is None else reply.vectors
            data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(texts[i % len(texts)],
                                                                                     self.embedding_dim)}
                    for i in range(count)] if texts else []
            tokens = sum(len(t.split()) for t in texts)
            return JSONResponse({"object": "list", "data": data, "model": str(body.get("model") or self.model),
                                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}},
                                headers=dict(reply.headers))

        return app

    async def _process(self, seconds: float) -> bool:
        """Hold a capacity slot for ``seconds``; False when the server stops meanwhile."""
        assert self._closing is not None
        if self._slots is not None:
            await self._slots.acquire()
        try:
            with self._lock:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            began = time.monotonic()
            if seconds > 0:
                try:
                    async with asyncio.timeout(seconds):
                        await self._closing.wait()
                    return False
                except TimeoutError:
                    pass
            return not self._closing.is_set()
        finally:
            with self._lock:
                self.in_flight -= 1
                self.completed += 1
                self.holds.append((began, time.monotonic()))
            if self._slots is not None:
                self._slots.release()

    def _respond(self, body: dict[str, Any], reply: Reply) -> Response:
        headers = dict(reply.headers)
        if reply.raw_body is not None:
            media = reply.content_type or ("text/html" if reply.raw_body.lstrip().startswith("<")
                                           else "application/json")
            return Response(reply.raw_body, status_code=reply.status, media_type=media, headers=headers)
        if reply.status != 200:
            kind = "rate_limit_exceeded" if reply.status == 429 else (
                "server_error" if reply.status >= 500 else "invalid_request_error")
            # Reply(status=503) keeps the default content "ok": send the standard reason phrase instead.
            message = reply.content if reply.content and reply.content != Reply.content else _reason(reply.status)
            return _error(reply.status, message, kind, headers)
        model = str(body.get("model") or self.model)
        ident = f"chatcmpl-scripted-{next(self._ids)}"
        usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                 "total_tokens": reply.prompt_tokens + reply.completion_tokens}
        if body.get("stream"):
            options = body.get("stream_options") or {}
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            return StreamingResponse(_sse(ident, model, reply, usage if include_usage else None),
                                     media_type="text/event-stream", headers=headers)
        completion = {
            "id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content},
                         "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": usage,
        }
        return JSONResponse(completion, headers=headers)


def hashed_embedding(text: str, dim: int) -> list[float]:
    """A deterministic, unnormalised bag-of-words vector: each lower-cased word adds +-1 at a hashed place."""
    vector = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += 1.0 if digest[4] & 1 else -1.0
    return vector


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": status}},
                        status_code=status, headers=headers)


async def _sse(ident: str, model: str, reply: Reply, usage: dict[str, int] | None) -> AsyncIterator[bytes]:
    """The reply as chat.completion.chunk events: role, content word by word, finish, usage, [DONE]."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        event = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
        return f"data: {json.dumps(event)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    for piece in re.findall(r"\s*\S+\s*|\s+", reply.content or ""):
        yield chunk({"content": piece})
        await asyncio.sleep(0)  # let other connections in between chunks, as a real server does
    yield chunk({}, reply.finish_reason)
    if usage is not None:
        event = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [], "usage": usage}
        yield f"data: {json.dumps(event)}\n\n".encode()
    yield b"data: [DONE]\n\n"
