"""Transcription through any OpenAI-compatible ``/v1/audio/transcriptions`` endpoint (vLLM serving Whisper,
speaches, a hosted API).

A clip goes as a 16-bit mono WAV file. With ``timestamps = "verbose_json"`` the server's timed segments become
lines (media times: the clip's start added); a server that sends no segments (or ``"json"``) gives one line for
the whole clip. Segments the server marks as no speech are dropped. The API key never reaches a log or an error.
"""

from __future__ import annotations

import asyncio
import io
import math
import wave
from typing import Any

import numpy as np
import openai

from lucy.config.settings import OpenAITranscriberSettings
from lucy.ingest.frames import AudioClip
from lucy.memory.transcribers.base import Transcriber, TranscriberError, TranscriptLine
from lucy.openai_endpoint import OpenAIEndpoint

_NO_SPEECH = 0.6  # a segment the server thinks is no speech with more probability than this is dropped


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """``samples`` (float in [-1, 1]) as a 16-bit mono WAV file."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return out.getvalue()


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a reply object or of a plain dict (servers differ in what the client can type)."""
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


class OpenAITranscriber(Transcriber):
    """One HTTP client per event loop; at most ``max_in_flight`` requests at once per loop."""

    name = "openai"

    def __init__(self, settings: OpenAITranscriberSettings, *, max_in_flight: int = 1,
                 client: openai.AsyncOpenAI | None = None) -> None:
        self.settings = settings
        self.model = settings.model
        self.max_in_flight = max_in_flight
        self.endpoint = OpenAIEndpoint(settings.base_url, settings.api_key.get_secret_value(),
                                       timeout_seconds=settings.timeout_seconds, max_retries=settings.max_retries,
                                       max_in_flight=max_in_flight, client=client)
        self._where = self.endpoint.where

    def __repr__(self) -> str:
        return f"OpenAITranscriber(base_url={self._where!r}, model={self.model!r})"

    async def transcribe(self, clip: AudioClip) -> list[TranscriptLine]:
        if len(clip) == 0:
            return []
        body = await asyncio.to_thread(wav_bytes, clip.samples, clip.sample_rate)
        kwargs: dict[str, Any] = {"model": self.model, "file": ("clip.wav", body, "audio/wav"),
                                  "response_format": self.settings.timestamps}
        if self.settings.language:
            kwargs["language"] = self.settings.language
        if self.settings.timestamps == "verbose_json":
            kwargs["timestamp_granularities"] = ["segment"]
        async with self.endpoint.slot() as client:
            try:
                reply = await client.audio.transcriptions.create(**kwargs)
            except openai.APIStatusError as err:
                raise TranscriberError(f"{self._where} refused the transcription: HTTP {err.status_code}") from err
            except openai.APITimeoutError as err:
                raise TranscriberError(f"transcription request to {self._where} timed out") from err
            except openai.APIConnectionError as err:
                raise TranscriberError(f"cannot reach {self._where}") from err
            except (openai.OpenAIError, ValueError) as err:
                raise TranscriberError(f"transcription request to {self._where} failed: {type(err).__name__}") \
                    from err
        return self._lines(reply, clip)

    def _lines(self, reply: Any, clip: AudioClip) -> list[TranscriptLine]:
        if isinstance(reply, str):  # a server answering plain text
            reply = {"text": reply}
        segments = _field(reply, "segments") or []
        lines = []
        for seg in segments:
            text = str(_field(seg, "text", "") or "").strip()
            if not text or float(_field(seg, "no_speech_prob", 0.0) or 0.0) > _NO_SPEECH:
                continue
            logprob = _field(seg, "avg_logprob")
            confidence = 1.0 if logprob is None else math.exp(min(0.0, float(logprob)))
            start = clip.start + float(_field(seg, "start", 0.0))
            end = clip.start + float(_field(seg, "end", len(clip) / clip.sample_rate))
            lines.append(TranscriptLine(start, max(start, end), text, round(confidence, 3)))
        if not segments:
            text = str(_field(reply, "text", "") or "").strip()
            if text:
                lines.append(TranscriptLine(clip.start, clip.start + len(clip) / clip.sample_rate, text))
        return lines

    async def aclose(self) -> None:
        """Close the HTTP client of the running loop (those of finished loops went with their loops)."""
        await self.endpoint.aclose()
