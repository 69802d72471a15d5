"""What the span stages that call a model server share: retrying with backoff through an outage, and how far their
spans are done.

The coarse builder (captions) and the speech worker (transcripts) each keep a span pending while their server
fails, retry it with exponential backoff, warn once when an outage begins and say when it ends; both report the
media time up to which their spans are done without a gap.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lucy.config.settings import MemorySettings

log = logging.getLogger(__name__)

_EPS = 1e-6


class OutageStats(Protocol):
    """The figures of a stage that :class:`Retries` keeps (``BuilderStats``, ``SpeechStats``)."""

    failures: int
    last_error: str | None
    down_since: float | None

    @property
    def down_seconds(self) -> float: ...


class Retries:
    """One span's attempts at a model server (``who``: "captioner", "transcriber") of ``stream``: after each failure
    :meth:`failed` counts it, warns once per outage and waits, twice as long each time up to
    ``memory.retry_max_seconds``; :meth:`answered` ends the outage."""

    def __init__(self, stats: OutageStats, who: str, stream: str, memory: MemorySettings) -> None:
        self.stats = stats
        self.who = who
        self.stream = stream
        self.delay = memory.retry_initial_seconds
        self.most = memory.retry_max_seconds

    def answered(self, then: str = "") -> None:
        """The server answered: the outage (if any) is over (``then``: what happens now, for the log line)."""
        if self.stats.down_since is not None:
            log.info("%s of %s answers again after %.0f s%s", self.who, self.stream, self.stats.down_seconds, then)
            self.stats.down_since = None

    async def failed(self, error: str, what: str, start: float, end: float) -> None:
        """An attempt at ``what`` ("caption", "transcript") of ``[start, end)`` failed with ``error``: count it, log
        it and wait before the next."""
        self.stats.failures += 1
        self.stats.last_error = error
        if self.stats.down_since is None:  # one warning per outage; each retry at debug level
            self.stats.down_since = time.monotonic()
            log.warning("%s of %s failing (%s); spans stay pending and are retried with backoff",
                        self.who, self.stream, error)
        log.debug("%s of %s [%.1f, %.1f) failed (%s); retrying in %.1f s",
                  what, self.stream, start, end, error, self.delay)
        await asyncio.sleep(self.delay)
        self.delay = min(self.delay * 2, self.most)


def done_until(done: dict[int, float], span_seconds: float, k: int = 0) -> tuple[int, float]:
    """How far spans are done without a gap, given ``done`` (span index -> media time its result reaches) and that
    every span below ``k`` is done whole: the first span not done whole, and the media time reached. A partial
    last span counts as far as it reaches; the last whole span may reach a little past its nominal end (a
    stream's media end)."""
    while k in done and done[k] >= (k + 1) * span_seconds - _EPS:
        k += 1
    until = k * span_seconds
    if k in done:
        until = done[k]
    elif k > 0:
        until = max(until, done[k - 1])
    return k, until
