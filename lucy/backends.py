"""The question-time backends of one process, made once per configuration and shared by every question.

A captioner or reasoner holds what is costly to make again: an HTTP connection pool (``openai``), a model on the
GPU (``vllm``), a Tesseract instance (``pixels``). The server asks many questions about streams whose captioner
settings differ (a stream may name its own backend), so backends are kept per configuration: two streams with
the same captioner settings share one captioner, and with it one cap on captions in flight.

Async clients belong to the event loop they were made on: make and use a :class:`Backends` on one loop (the
question loop of :mod:`lucy.service.questions`), and close it there.
"""

from __future__ import annotations

from lucy.config import LucySettings
from lucy.memory.captioners import make_captioner
from lucy.memory.captioners.base import Captioner
from lucy.memory.captioners.guard import GuardedCaptioner
from lucy.query.reasoners import Reasoner, make_reasoner


class Backends:
    """Captioners (guarded: see :mod:`lucy.memory.captioners.guard`) and reasoners, one per configuration."""

    def __init__(self) -> None:
        self._captioners: dict[str, GuardedCaptioner | None] = {}
        self._reasoners: dict[str, Reasoner] = {}

    def captioner(self, settings: LucySettings) -> GuardedCaptioner | None:
        """The shared captioner of ``settings.captioner`` (None for backend ``none``)."""
        key = settings.captioner.model_dump_json() + settings.query.model_dump_json()
        if key not in self._captioners:
            inner = make_captioner(settings)
            self._captioners[key] = None if inner is None else GuardedCaptioner(
                inner, max_in_flight=settings.captioner.max_in_flight,
                deadline_seconds=settings.query.caption_timeout_seconds,
                failures_to_open=settings.query.captioner_failures_to_pause,
                open_seconds=settings.query.captioner_pause_seconds)
        return self._captioners[key]

    def reasoner(self, settings: LucySettings) -> Reasoner:
        """The shared reasoner of ``settings.reasoner``."""
        key = settings.reasoner.model_dump_json()
        if key not in self._reasoners:
            self._reasoners[key] = make_reasoner(settings)
        return self._reasoners[key]

    def __len__(self) -> int:
        return sum(1 for c in self._captioners.values() if c is not None) + len(self._reasoners)

    async def aclose(self) -> None:
        """Close every backend made (their clients and connections)."""
        made: list[Captioner | Reasoner] = [c for c in self._captioners.values() if c is not None]
        made += self._reasoners.values()
        self._captioners, self._reasoners = {}, {}
        for backend in made:
            await backend.aclose()
