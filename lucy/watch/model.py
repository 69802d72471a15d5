"""Standing questions on a stream ("tell me when someone is at the door") and the alerts they raise.

A :class:`Watch` is stored in the memory store beside the stream's nodes; the ingesting process checks every newly
closed coarse span against each active watch of its stream (:mod:`lucy.watch.checker`) and stores an :class:`Alert`
for a yes. Whoever delivers alerts (the CLI, the HTTP API, MQTT, webhooks) follows the store by alert id, so the
process that checks and the processes that deliver need not be the same. Both records are plain frozen dataclasses:
they cross threads and processes as values and are turned into JSON at the edges.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal

AlertLevel = Literal["coarse", "fine"]
Verdict = Literal["yes", "no", "maybe"]
VERDICTS: tuple[Verdict, ...] = ("yes", "no", "maybe")


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


@dataclass
class WatchStats:
    """Counters of one stream's watch checker, written by the builder's loop and read from any thread through
    :meth:`snapshot` (the exporter, the API). They only grow."""

    stream: str
    checks: int = 0  # (watch, coarse span) pairs checked, errors included
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))  # final verdicts
    confirmations: int = 0  # "maybe" verdicts confirmed by captioning the span's fine sub-spans
    confirmations_skipped: int = 0  # "maybe" verdicts left unconfirmed (the hourly budget was spent)
    alerts: int = 0  # alerts stored
    merged: int = 0  # yeses within a watch's cooldown, taken as the same event as its open alert
    errors: int = 0  # checks that failed (logged; the span counts as checked)
    llm_calls: int = 0
    caption_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, verdict: Verdict | None = None, **counts: int) -> None:
        """Add to counters by name; ``verdict`` counts one final verdict of that kind."""
        with self._lock:
            if verdict is not None:
                self.verdicts[verdict] += 1
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def snapshot(self) -> dict[str, object]:
        """The counters, copied under the lock."""
        with self._lock:
            return {"stream": self.stream, "checks": self.checks, "verdicts": dict(self.verdicts),
                    "confirmations": self.confirmations, "confirmations_skipped": self.confirmations_skipped,
                    "alerts": self.alerts, "merged": self.merged, "errors": self.errors,
                    "llm_calls": self.llm_calls, "caption_calls": self.caption_calls}
