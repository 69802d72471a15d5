"""Standing questions on a stream ("tell me when someone is at the door") and the alerts they raise.

A :class:`Watch` is stored in the memory store beside the stream's nodes; the ingesting process checks every newly
closed coarse span against each active watch of its stream (:mod:`lucy.watch.checker`) and stores an :class:`Alert`
for a yes. Whoever delivers alerts (the CLI, the HTTP API, MQTT, webhooks) follows the store by alert id, so the
process that checks and the processes that deliver need not be the same. Both records are plain frozen dataclasses:
they cross threads and processes as values and are turned into JSON at the edges. They live beside the memory
stores that persist them, below the checker and the deliverers; the checker's counters are in
:mod:`lucy.metrics.stats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AlertLevel = Literal["coarse", "fine"]


@dataclass(frozen=True)
class Watch:
    """A standing question on one stream. ``created`` is wall-clock seconds; a deleted watch is kept, inactive,
    so that its alerts still name it."""

    id: int
    stream: str
    question: str
    cooldown_seconds: float = 300.0  # media seconds after a yes during which further yeses extend the same event
    webhook_url: str | None = None
    created: float = 0.0
    active: bool = True


@dataclass(frozen=True)
class Alert:
    """One event a watch saw. ``start``/``end`` are the media seconds of the evidence span, ``frame_time`` the media
    second of a frame that shows it (the evidence's middle); ``event_end`` is the end of the coarse span whose
    closing raised it (wall ``created`` minus the wall time of ``event_end`` is the alert's latency). ``llm_calls``
    and ``caption_calls`` are what the check that raised it cost."""

    id: int | None
    watch_id: int
    stream: str
    question: str
    start: float
    end: float
    reason: str
    frame_time: float
    level: AlertLevel
    created: float
    event_end: float
    llm_calls: int = 0
    caption_calls: int = 0
