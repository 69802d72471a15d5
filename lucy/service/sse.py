"""Server-sent events, through sse-starlette: every ``text/event-stream`` answer of the API (chat completions,
question traces, alerts) is an :func:`event_stream`.

The wire format stays what clients parse: ``event: <kind>`` (when named) and one ``data:`` line of compact JSON per
event, lines ending in ``\\n`` and events in a blank line. Besides, a ``: ping`` comment goes out every
``service.sse_ping_seconds``, so that proxies and clients do not close a stream that waits on a long step (a
caption, a reasoner call); SSE clients skip comments. When the client disconnects, the generator behind the stream is
cancelled where it waits, so the work it drives (a question) is cancelled with it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

SEP = "\n"  # not the library's default "\r\n": the dashboard's parser splits events on "\n\n"
HEADERS = {"Cache-Control": "no-cache"}  # sse-starlette adds X-Accel-Buffering: no and Connection: keep-alive


def event(data: Any, kind: str | None = None) -> ServerSentEvent:
    """One event: ``data`` as one JSON line (a string as it is), named ``kind`` when given."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return ServerSentEvent(data=text, event=kind, sep=SEP)


def comment(text: str) -> ServerSentEvent:
    """A comment line (``: text``): SSE clients skip it; it tells them the stream is open."""
    return ServerSentEvent(comment=text, sep=SEP)


def _ping() -> ServerSentEvent:
    return comment("ping")


def event_stream(events: AsyncIterator[ServerSentEvent], ping_seconds: float) -> EventSourceResponse:
    """A ``text/event-stream`` response of ``events``, with a keep-alive ping every ``ping_seconds``."""
    return EventSourceResponse(events, headers=HEADERS, ping=ping_seconds, sep=SEP, ping_message_factory=_ping)
