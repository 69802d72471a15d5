"""A captioner that a question can rely on: bounded in flight, bounded in time, and quick to say it is down.

A question that needs a deeper caption waits for it. Without a guard, a captioner whose server never replies
holds every question that asks it for minutes (the client's own timeout, times its retries, times each span the
loop tries), and those questions hold their slots. The guard, shared by every question of a process that uses
the same captioner configuration, gives three promises:

- at most ``max_in_flight`` captions run at once across all those questions;
- a caption that takes longer than ``deadline_seconds`` fails (and is not waited for again);
- after ``failures_to_open`` failures in a row the captioner counts as unavailable for ``open_seconds`` (a
  circuit breaker): calls then fail at once with :class:`CaptionerUnavailable` instead of each waiting out a
  timeout. After the pause one call is let through; its success closes the breaker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from lucy.config import Level
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import Captioner, CaptionerError, WrappingCaptioner
from lucy.memory.nodes import Caption


class CaptionerUnavailable(CaptionerError):
    """The captioner failed repeatedly just now; nothing was sent (the breaker is open)."""


class GuardedCaptioner(WrappingCaptioner):
    """Wraps a captioner shared by many questions: in-flight cap, per-call deadline, circuit breaker.

    ``inner`` may be a function that makes it: then it is made when first needed (most questions are answered
    from memory, and a backend's libraries and models take seconds to load, as ``lucy ask`` would pay each time).
    """

    def __init__(self, inner: Captioner | Callable[[], Captioner], *, max_in_flight: int, deadline_seconds: float,
                 failures_to_open: int = 2, open_seconds: float = 30.0) -> None:
        self._inner, self._make = (inner, None) if isinstance(inner, Captioner) else (None, inner)
        self.deadline_seconds = deadline_seconds
        self.failures_to_open = failures_to_open
        self.open_seconds = open_seconds
        self._max_in_flight = max_in_flight
        self._slots: asyncio.Semaphore | None = None
        self._failures = 0
        self._last_error = ""
        self._open_until = 0.0
        self._probing = False

    @property  # type: ignore[override]
    def inner(self) -> Captioner:
        """The captioner guarded (made now if it was given as a function)."""
        if self._inner is None:
            assert self._make is not None
            self._inner = self._make()
        return self._inner

    @property
    def available(self) -> bool:
        """False while the breaker is open."""
        return time.monotonic() >= self._open_until

    def _refuse_if_open(self) -> None:
        now = time.monotonic()
        if now < self._open_until or self._probing:
            wait = max(0.0, self._open_until - now)
            raise CaptionerUnavailable(
                f"captioner {self.name} unavailable ({self._failures} failures in a row; last: {self._last_error}); "
                f"next try in {wait:.0f} s")

    async def describe(self, clip: Clip, instruction: str, *, level: Level, **heard: object) -> Caption:
        """As the inner captioner's; ``heard`` (``transcript=``, ``observed=``) is passed on to one that
        :attr:`hears` (:attr:`sees`)."""
        self._refuse_if_open()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_in_flight)
        probe = self._failures >= self.failures_to_open  # the breaker's pause is over: this call tests it
        if probe:
            self._probing = True
        try:
            async with self._slots:
                if not probe:
                    self._refuse_if_open()  # it may have opened while this call waited for a slot
                try:
                    async with asyncio.timeout(self.deadline_seconds):
                        caption = await self.inner.describe(clip, instruction, level=level, **heard)
                except TimeoutError:
                    self._failed(f"no caption within {self.deadline_seconds:g} s")
                    raise CaptionerError(f"no caption within {self.deadline_seconds:g} s "
                                         f"(query.caption_timeout_seconds)") from None
                except CaptionerError as err:
                    self._failed(str(err))
                    raise
        finally:
            if probe:
                self._probing = False
        self._failures = 0
        self._open_until = 0.0
        return caption

    def _failed(self, error: str) -> None:
        self._failures += 1
        self._last_error = error[:200]
        if self._failures >= self.failures_to_open:
            self._open_until = time.monotonic() + self.open_seconds

    async def aclose(self) -> None:
        if self._inner is not None:  # one never made has nothing to close
            await self._inner.aclose()
