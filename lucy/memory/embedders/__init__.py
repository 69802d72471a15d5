"""Embedders, what makes memory searchable by meaning: one interface (:class:`Embedder`), the backend chosen here.

:func:`make_embedder` is called by :mod:`lucy.backends` alone. Backends are imported only when chosen. Semantic
search is an improvement, never a requirement: where the default local embedder cannot run on this machine, one
warning says so and memory is searched by its words, as with backend ``none`` (where only one of its two models
cannot, the other serves alone, also with one warning).
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
            local = LocalEmbedder(e.local, cpuinfo=cpuinfo)
        except EmbedderUnavailable as err:
            _tell(f"semantic search is off: {err}; memory is searched by words only")
            return None
        for reason in local.missing:
            _tell(f"{reason}; memory is searched by meaning with {local.model} only")
        return local
    if e.backend == "openai":
        from lucy.memory.embedders.openai import OpenAIEmbedder

        return OpenAIEmbedder(e.openai)
    raise ValueError(f"unknown embedder backend {e.backend!r}")  # config validation makes this unreachable


def _tell(notice: str) -> None:
    if notice not in _told:
        _told.add(notice)
        log.warning("%s", notice)
