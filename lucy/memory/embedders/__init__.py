"""Embedders, what makes memory searchable by meaning: one interface (:class:`Embedder`), the backend chosen here.

:func:`make_embedder` is called by :mod:`lucy.backends` alone. Backends are imported only when chosen. Semantic
search is an improvement, never a requirement: where the default local embedder cannot run on this machine, one
warning says so and memory is searched by its words, as with backend ``none``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lucy.config import LucySettings
from lucy.memory.embedders.base import Embedder, EmbedderError, EmbedderUnavailable, normalise
from lucy.memory.embedders.local import CPUINFO

__all__ = ["Embedder", "EmbedderError", "EmbedderUnavailable", "make_embedder", "normalise"]

log = logging.getLogger(__name__)
_told: set[str] = set()  # notices already logged: one per process, however many streams make an embedder


def make_embedder(settings: LucySettings, *, cpuinfo: Path = CPUINFO) -> Embedder | None:
    """The embedder ``settings.embedder.backend`` names; None for ``none``, and for ``local`` where it cannot run
    here (``cpuinfo``: where the CPU's flags are read)."""
    e = settings.embedder
    if e.backend == "none":
        return None
    if e.backend == "local":
        from lucy.memory.embedders.local import LocalEmbedder

        try:
            return LocalEmbedder(e.local, cpuinfo=cpuinfo)
        except EmbedderUnavailable as err:
            if str(err) not in _told:
                _told.add(str(err))
                log.warning("semantic search is off: %s; memory is searched by words only", err)
            return None
    if e.backend == "openai":
        from lucy.memory.embedders.openai import OpenAIEmbedder

        return OpenAIEmbedder(e.openai)
    raise ValueError(f"unknown embedder backend {e.backend!r}")  # config validation makes this unreachable
