"""Transcribers, the "ear" of the memory: one interface (:class:`Transcriber`), the backend chosen here from config.

:func:`make_transcriber` is called by :mod:`lucy.backends` alone. Backends are imported only when chosen, so
``none`` imports nothing and ``openai`` never loads a model.
"""

from __future__ import annotations

from lucy.config import LucySettings
from lucy.memory.transcribers.base import (
    SPEECH_LEVEL,
    SURE,
    Transcriber,
    TranscriberError,
    TranscriptLine,
    format_transcript,
    parse_transcript,
    sure_of,
    sure_words,
)

__all__ = ["SPEECH_LEVEL", "SURE", "Transcriber", "TranscriberError", "TranscriptLine", "format_transcript",
           "make_transcriber", "parse_transcript", "sure_of", "sure_words"]


def make_transcriber(settings: LucySettings) -> Transcriber | None:
    """The transcriber ``settings.transcriber.backend`` names (None for ``none``: audio is not transcribed).

    Raises :class:`lucy.errors.LucyError` naming what to install when a backend cannot start.
    """
    t = settings.transcriber
    if t.backend == "none":
        return None
    if t.backend == "whisper":
        from lucy.memory.transcribers.whisper import WhisperTranscriber

        return WhisperTranscriber(t.whisper)
    if t.backend == "openai":
        from lucy.memory.transcribers.openai import OpenAITranscriber

        return OpenAITranscriber(t.openai, max_in_flight=t.max_in_flight)
    raise ValueError(f"unknown transcriber backend {t.backend!r}")  # config validation makes this unreachable
