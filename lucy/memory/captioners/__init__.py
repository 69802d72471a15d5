"""Captioners, the "eye" of the memory: one interface (:class:`Captioner`), the backend chosen here from config.

:func:`make_captioner` is called by :mod:`lucy.backends` alone, which decides how many a process makes and who
owns them. Backends are imported only when chosen, so a CPU-only install never imports vLLM, and ``none`` imports
nothing.
"""

from __future__ import annotations

from lucy.config import LucySettings
from lucy.memory.captioners.base import Captioner, CaptionerError

__all__ = ["Captioner", "CaptionerError", "make_captioner"]


def make_captioner(settings: LucySettings) -> Captioner | None:
    """The captioner ``settings.captioner.backend`` names (None for ``none``).

    Raises :class:`lucy.errors.LucyError` with what to install when a backend cannot start (no Tesseract
    language data, no vLLM...).
    """
    c = settings.captioner
    if c.backend == "none":
        return None
    if c.backend == "pixels":
        from lucy.memory.captioners.pixels import PixelsCaptioner

        return PixelsCaptioner(c.pixels, max_in_flight=c.max_in_flight)
    if c.backend == "openai":
        from lucy.memory.captioners.openai import OpenAICaptioner

        return OpenAICaptioner(c.openai, max_in_flight=c.max_in_flight)
    if c.backend == "vllm":
        from lucy.memory.captioners.vllm import VllmCaptioner

        return VllmCaptioner(c.vllm)
    raise ValueError(f"unknown captioner backend {c.backend!r}")  # config validation makes this unreachable
