"""The transcriber boundary: ``transcribe(clip) -> [TranscriptLine]``, speech in a stretch of a stream's audio.

Backends are chosen from config (:func:`lucy.memory.transcribers.make_transcriber`). A transcript is memory like a
caption: the coarse builder stores the lines of each closed coarse span as one node of level :data:`SPEECH_LEVEL`
(see :func:`format_transcript`), which full-text search finds and questions show beside the captions of the same
span at every depth.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

from lucy.ingest.frames import AudioClip

SPEECH_LEVEL = "speech"
"""The level of transcript nodes: one per coarse span that holds audio, its lines in the text (maybe none)."""

SURE = 0.8
"""A transcript line the transcriber is less sure of than this carries how sure it was, in memory and in prompts
("[12.3-15.1 s, 45% sure] words"): an answer that rests on it is not confident (Whisper: the mean probability of its
tokens; lines below ``transcriber.whisper.min_confidence`` are left out)."""

_LINE = re.compile(r"^\[(?P<start>\d+(?:\.\d+)?)-(?P<end>\d+(?:\.\d+)?) s(?:, (?P<sure>\d{1,3})% sure)?\] "
                   r"(?P<text>.*)$")


class TranscriberError(Exception):
    """The transcriber could not transcribe (server down, timed out, refused...). Transient: the span is retried."""


@dataclass(frozen=True, slots=True)
class TranscriptLine:
    """What was said from ``start`` to ``end`` (media seconds), and how sure the transcriber is (0-1)."""

    start: float
    end: float
    text: str
    confidence: float = 1.0


class Transcriber(ABC):
    """The "ear": turns a clip of audio into timed lines. Implementations must be safe to call concurrently."""

    name: str  # backend name, e.g. "whisper", "openai"
    model: str  # model name recorded on the nodes it makes

    @abstractmethod
    async def transcribe(self, clip: AudioClip) -> list[TranscriptLine]:
        """The speech in ``clip``, in time order, with media times (``clip.start`` added). Silence makes no lines.

        Raises :class:`TranscriberError` on failure.
        """

    async def aclose(self) -> None:
        """Release clients, connections and models."""


def sure_words(confidence: float, form: str = "{}% sure") -> str:
    """``form`` with how sure (in %) a transcript line below :data:`SURE` is ("45% sure"); "" for a sure one."""
    return form.format(min(99, round(confidence * 100))) if confidence < SURE else ""


def sure_of(percent: str | None) -> float:
    """How sure (0-1) a line is whose text says "<percent>% sure" (:func:`sure_words`); 1.0 when it says nothing."""
    return 1.0 if percent is None else int(percent) / 100


def format_transcript(lines: Iterable[TranscriptLine]) -> str:
    """The text of a speech node: one ``[12.3-15.1 s] words`` line per transcript line ("" for silence), with how
    sure the transcriber was of a line below :data:`SURE` (``[12.3-15.1 s, 45% sure] words``)."""
    return "\n".join(f"[{line.start:.1f}-{line.end:.1f} s{sure_words(line.confidence, ', {}% sure')}] "
                     f"{' '.join(line.text.split())}" for line in lines if line.text.strip())


def parse_transcript(text: str) -> list[TranscriptLine]:
    """The lines of a speech node's text (:func:`format_transcript` reversed; other lines are skipped)."""
    lines = []
    for raw in text.splitlines():
        match = _LINE.match(raw.strip())
        if match:
            lines.append(TranscriptLine(float(match["start"]), float(match["end"]), match["text"],
                                        sure_of(match["sure"])))
    return lines
