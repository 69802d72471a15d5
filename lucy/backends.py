"""The one place where a process makes its captioners, transcribers, embedders and reasoners.

A captioner or reasoner holds what is costly to make again: an HTTP connection pool (``openai``), a model on the
GPU (``vllm``), a Tesseract instance (``pixels``). Every caller gets its backends here, and nowhere else:

- questions (``lucy serve``'s question loop, ``lucy ask``, ``lucy demo``): a :class:`Backends`, which makes one
  *guarded* captioner (:mod:`lucy.memory.captioners.guard`: captions in flight bounded across every question, a
  per-caption deadline, a breaker that pauses a failing captioner) and one reasoner per configuration, shares them
  among every question asked through it, and closes them in :meth:`Backends.aclose`. A server asks about
  streams whose captioner settings differ (a stream may name its own backend): two streams with the same settings
  share one captioner, and with it one cap on captions in flight.
- a stream's background coarse builder (``lucy ingest``, a ``lucy serve`` stream worker, ``lucy demo``):
  :func:`builder_captioner` and :func:`builder_transcriber`, *unguarded*, because the builder has its own rules for a
  failing captioner (it retries each span with backoff until the captioner answers; a question's deadline and breaker
  would only make it give up). The builder owns it and closes it on its own event loop. :func:`builder_embedder`
  likewise: the builder embeds what it stores, off its write path, and closes the embedder when it stops.
  :func:`builder_reasoner` likewise: the reasoner of the stream's watch checker, closed on the builder's loop.

Async clients belong to the event loop they were made on: make and use a :class:`Backends` on one loop, and close
it there.
"""

from __future__ import annotations

from lucy.config import LucySettings
from lucy.memory.captioners import make_captioner
from lucy.memory.captioners.base import Captioner
from lucy.memory.captioners.guard import GuardedCaptioner
from lucy.memory.embedders import Embedder, make_embedder
from lucy.memory.retrieval import MemoryIndex
from lucy.memory.store import MemoryStore
from lucy.memory.transcribers import Transcriber, make_transcriber
from lucy.query.reasoners import Reasoner, make_reasoner


def builder_captioner(settings: LucySettings) -> Captioner | None:
    """A new, unguarded captioner for one stream's coarse builder, which owns it (None for backend ``none``)."""
    return make_captioner(settings)


def builder_transcriber(settings: LucySettings) -> Transcriber | None:
    """A new transcriber for one stream's coarse builder, which owns it (None for backend ``none``). Questions need
    none: they read the transcripts the builder stored. The embedded model loads on the first clip with audio, so a
    stream without audio costs nothing."""
    return make_transcriber(settings)


def builder_embedder(settings: LucySettings) -> Embedder | None:
    """A new embedder for one stream's coarse builder, which owns it (None for backend ``none``, or where the local
    model cannot run). The local model loads on first use."""
    return make_embedder(settings)


def builder_reasoner(settings: LucySettings) -> Reasoner:
    """A new reasoner for one stream's watch checker (:mod:`lucy.watch.checker`), which the builder owns."""
    return make_reasoner(settings)


def _made(captioner: Captioner | None) -> Captioner:
    assert captioner is not None, "make_captioner returns None for backend 'none' alone"
    return captioner


class Backends:
    """Question-time captioners (guarded), embedders and reasoners, one per configuration, closed together."""

    def __init__(self) -> None:
        self._captioners: dict[str, GuardedCaptioner | None] = {}
        self._embedders: dict[str, Embedder | None] = {}
        self._indexes: dict[tuple[str, MemoryStore], MemoryIndex] = {}
        self._reasoners: dict[str, Reasoner] = {}

    def captioner(self, settings: LucySettings) -> GuardedCaptioner | None:
        """The shared captioner of ``settings.captioner`` (None for backend ``none``)."""
        q = settings.query  # the guard's own settings; other query settings do not change the captioner
        key = settings.captioner.model_dump_json() + repr(
            (q.caption_timeout_seconds, q.captioner_failures_to_pause, q.captioner_pause_seconds))
        if key not in self._captioners:
            # made on the first caption a question needs: most are answered from memory, and a backend's libraries
            # take seconds to load (None is known from the name alone: only backend "none" makes no captioner)
            self._captioners[key] = None if settings.captioner.backend == "none" else GuardedCaptioner(
                lambda: _made(make_captioner(settings)), max_in_flight=settings.captioner.max_in_flight,
                deadline_seconds=settings.query.caption_timeout_seconds,
                failures_to_open=settings.query.captioner_failures_to_pause,
                open_seconds=settings.query.captioner_pause_seconds)
        return self._captioners[key]

    def embedder(self, settings: LucySettings) -> Embedder | None:
        """The shared embedder of ``settings.embedder`` (None for backend ``none``, or where it cannot run)."""
        key = settings.embedder.model_dump_json()
        if key not in self._embedders:
            self._embedders[key] = make_embedder(settings)
        return self._embedders[key]

    def index(self, settings: LucySettings, memory: MemoryStore) -> MemoryIndex | None:
        """The shared search index of ``memory`` (a store that lives as long as these backends) with the embedder
        of ``settings.embedder`` (None without one): its per-stream vector matrices serve every question and search
        made through these backends."""
        embedder = self.embedder(settings)
        if embedder is None:
            return None
        key = (settings.embedder.model_dump_json(), memory)  # the store itself: an id could be reused once closed
        if key not in self._indexes:
            self._indexes[key] = MemoryIndex(memory, embedder, cache_vectors=settings.embedder.cache_vectors)
        return self._indexes[key]

    def reasoner(self, settings: LucySettings) -> Reasoner:
        """The shared reasoner of ``settings.reasoner``."""
        key = settings.reasoner.model_dump_json()
        if key not in self._reasoners:
            self._reasoners[key] = make_reasoner(settings)
        return self._reasoners[key]

    def __len__(self) -> int:
        made = [*self._captioners.values(), *self._embedders.values()]
        return sum(1 for b in made if b is not None) + len(self._reasoners)

    async def aclose(self) -> None:
        """Close every backend made (their clients and connections)."""
        made: list[Captioner | Reasoner] = [c for c in self._captioners.values() if c is not None]
        made += self._reasoners.values()
        embedders = [e for e in self._embedders.values() if e is not None]
        self._captioners, self._embedders, self._reasoners, self._indexes = {}, {}, {}, {}
        for backend in made:
            await backend.aclose()
        for embedder in embedders:
            embedder.close()
