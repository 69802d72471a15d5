"""One OpenAI-compatible server as Lucy's backends use it: the captioner, the transcriber, the reasoner and the
embedder each talk to one (vLLM, a hosted API), and each needs the same handling of it, kept here once.

- **A client per event loop.** An ``AsyncOpenAI`` client's HTTP connections, and an ``asyncio.Semaphore``, belong
  to the loop they were first used on; one backend is used from several (``asyncio.run`` per command, a builder
  thread, the question thread), so each running loop gets its own client and its own in-flight limit, made on
  first use. Those of a loop that has ended go with it (the map is weak).
- **One policy for timeouts and retries**: the client is built with the backend's timeout and its number of retries
  (0 where the backend retries itself, as the captioner does to count and log each retry).
- **Closing**: :meth:`aclose` closes the running loop's client, :meth:`close` the synchronous one (the embedder's,
  used from threads). A client handed in (tests, tools) is its giver's to close.
- **No secret in a message**: :attr:`where` is the server's URL with its credentials hidden, and :meth:`scrub`
  takes the API key (a server may echo it) and URL credentials out of any text before it reaches a log or an error.

It imports nothing of Lucy above :mod:`lucy.redaction`, so that backends of every layer may use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import openai

from lucy.redaction import redact_url

_MIN_KEY_CHARS = 4  # shorter keys ("EMPTY" is five) would blank out ordinary words of a message


@dataclass(slots=True)
class _LoopClient:
    client: Any  # openai.AsyncOpenAI, or whatever a test handed in
    slots: asyncio.Semaphore | None


class OpenAIEndpoint:
    """A server at ``base_url``, reached with ``api_key``; at most ``max_in_flight`` requests at once per event loop
    (None: no limit). Safe to use from several loops and threads."""

    def __init__(self, base_url: str, api_key: str, *, timeout_seconds: float, max_retries: int,
                 max_in_flight: int | None = None, client: Any = None) -> None:
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        self.base_url = base_url
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.max_in_flight = max_in_flight
        self.where = redact_url(base_url)
        self._key = api_key
        self._given = client
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient] = weakref.WeakKeyDictionary()
        self._sync: openai.OpenAI | None = None
        self._lock = threading.Lock()  # loops of several threads may make their clients at once

    def __repr__(self) -> str:
        return f"OpenAIEndpoint({self.where!r})"

    def _of_loop(self) -> _LoopClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            here = self._per_loop.get(loop)
            if here is None:
                client = self._given or openai.AsyncOpenAI(base_url=self.base_url, api_key=self._key,
                                                           timeout=self.timeout_seconds, max_retries=self.max_retries)
                slots = None if self.max_in_flight is None else asyncio.Semaphore(self.max_in_flight)
                here = self._per_loop[loop] = _LoopClient(client, slots)
            return here

    def client(self) -> Any:
        """The async client of the running event loop."""
        return self._of_loop().client

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Any]:
        """``async with endpoint.slot() as client``: hold one of the running loop's in-flight places (waiting for
        one) and use its client."""
        here = self._of_loop()
        if here.slots is None:
            yield here.client
            return
        async with here.slots:
            yield here.client

    def sync_client(self) -> openai.OpenAI:
        """The synchronous client (one, pooled; for backends called from threads rather than a loop)."""
        with self._lock:
            if self._sync is None:
                self._sync = self._given or openai.OpenAI(base_url=self.base_url, api_key=self._key,
                                                          timeout=self.timeout_seconds, max_retries=self.max_retries)
            return self._sync

    def scrub(self, text: str) -> str:
        """``text`` without the API key (a server may echo it) and without URL credentials."""
        if self._key and len(self._key) >= _MIN_KEY_CHARS:
            text = text.replace(self._key, "***")
        return redact_url(text)

    async def aclose(self) -> None:
        """Close the running loop's client (those of finished loops went with their loops)."""
        with self._lock:
            here = self._per_loop.pop(asyncio.get_running_loop(), None)
        if here is not None and self._given is None:
            await here.client.close()

    def close(self) -> None:
        """Close the synchronous client."""
        with self._lock:
            sync, self._sync = self._sync, None
        if sync is not None and self._given is None:
            sync.close()


def error_message(err: openai.APIStatusError, limit: int = 300) -> str:
    """What a server said about a refused request: the ``error.message`` of OpenAI's error body where it sent one,
    else the client's message; at most ``limit`` characters (scrub it before showing it)."""
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:limit]
    return str(err.message)[:limit]
