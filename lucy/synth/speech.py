"""Generated speech: sentences spoken by espeak-ng (Debian's ``espeak-ng``) at known times, as a sound track
for :func:`lucy.synth.video.write_video` or as a file of sound alone (:func:`write_audio`).

The tests and benchmarks know exactly what was said and when, so what Lucy stores and transcribes can be
checked against it.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import av
import numpy as np

TRACK_RATE = 44_100  # sample rate of generated tracks (ingest resamples it to 16 kHz, as it would a camera's)
_FRAME = 1024  # samples per encoded audio frame (AAC's frame size)


@dataclass(frozen=True)
class Speech:
    """``text`` spoken from media time ``start`` on (it lasts as long as espeak-ng takes to say it)."""

    start: float
    text: str
    voice: str = "en-us"
    words_per_minute: int = 160
    volume: float = 0.6  # peak amplitude in [0, 1]


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


@lru_cache(maxsize=256)
def _spoken(text: str, voice: str, words_per_minute: int) -> tuple[np.ndarray, int]:
    if not espeak_available():
        raise RuntimeError("espeak-ng is not installed (Debian: apt-get install espeak-ng)")
    out = subprocess.run(["espeak-ng", "--stdout", "-v", voice, "-s", str(words_per_minute), text],
                         capture_output=True, check=True, timeout=60).stdout
    # espeak-ng writes a WAV header with unknown (0x7fffffff) sizes to a pipe: read the samples after it.
    with wave.open(io.BytesIO(out)) as w:
        rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
        header = len(out) - len(out[out.find(b"data") + 8:])
    if width != 2 or channels != 1:
        raise RuntimeError(f"espeak-ng wrote {channels}-channel {8 * width}-bit sound; expected mono 16-bit")
    pcm = np.frombuffer(out[header:header + (len(out) - header) // 2 * 2], dtype="<i2")
    return pcm.astype(np.float32) / 32768.0, rate


def speak(text: str, *, voice: str = "en-us", words_per_minute: int = 160,
          rate: int = TRACK_RATE) -> np.ndarray:
    """``text`` spoken by espeak-ng: mono float32 at ``rate``, peak-normalised to 1."""
    samples, native = _spoken(text, voice, words_per_minute)
    if native != rate and len(samples):
        n = round(len(samples) * rate / native)
        samples = np.interp(np.arange(n) * native / rate, np.arange(len(samples)), samples).astype(np.float32)
    peak = float(np.abs(samples).max()) if len(samples) else 0.0
    return samples / peak if peak > 0 else samples


def speech_track(lines: Sequence[Speech], duration: float, *, rate: int = TRACK_RATE,
                 noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """A mono track of ``duration`` seconds: each line spoken at its start, silence (or faint noise of
    amplitude ``noise``) elsewhere. A line running past the end is cut."""
    track = np.zeros(round(duration * rate), dtype=np.float32)
    if noise:
        track += np.random.default_rng(seed).normal(0, noise, len(track)).astype(np.float32)
    for line in lines:
        said = speak(line.text, voice=line.voice, words_per_minute=line.words_per_minute, rate=rate)
        at = round(line.start * rate)
        part = said[:max(0, len(track) - at)] * line.volume
        track[at:at + len(part)] += part
    return np.clip(track, -1.0, 1.0)


def spoken_spans(lines: Sequence[Speech], duration: float | None = None) -> list[tuple[float, float]]:
    """``(start, end)`` media times during which each line is heard (ends cut at ``duration``)."""
    spans = []
    for line in lines:
        samples, native = _spoken(line.text, line.voice, line.words_per_minute)
        end = line.start + len(samples) / native
        spans.append((line.start, end if duration is None else min(end, duration)))
    return spans


class AudioEncoder:
    """Encodes a mono float32 track into an open container, in step with the pictures (``until(t)`` encodes the
    sound heard before media time ``t``), so that the file interleaves sound and pictures as a camera's would."""

    def __init__(self, container: av.container.OutputContainer, track: np.ndarray, rate: int,
                 codec: str = "aac") -> None:
        self.container = container
        self.track = np.asarray(track, dtype=np.float32)
        self.rate = rate
        self.stream = container.add_stream(codec, rate=rate)
        self.stream.layout = "mono"
        self.stream.time_base = Fraction(1, rate)
        self._fmt = "s16" if codec.startswith("pcm_s16") else "fltp"
        self._done = 0

    def until(self, t: float) -> None:
        stop = min(len(self.track), round(t * self.rate))
        while self._done + _FRAME <= stop or (stop == len(self.track) and self._done < stop):
            part = self.track[self._done:self._done + _FRAME]
            if self._fmt == "s16":
                data = np.round(np.clip(part, -1, 1) * 32767).astype(np.int16)[None, :]
            else:
                data = part[None, :]
            frame = av.AudioFrame.from_ndarray(data, format=self._fmt, layout="mono")
            frame.sample_rate = self.rate
            frame.pts = self._done
            frame.time_base = self.stream.time_base
            for packet in self.stream.encode(frame):
                self.container.mux(packet)
            self._done += len(part)

    def close(self) -> None:
        self.until(len(self.track) / self.rate)
        for packet in self.stream.encode():
            self.container.mux(packet)


def write_audio(path: str | Path, track: np.ndarray, *, rate: int = TRACK_RATE, codec: str | None = None) -> Path:
    """A file of sound alone (no pictures): AAC in ``.m4a``/``.mp4``/``.aac``, 16-bit PCM in ``.wav``, or
    ``codec`` as given."""
    path = Path(path)
    if codec is None:
        codec = "pcm_s16le" if path.suffix.lower() == ".wav" else "aac"
    with av.open(str(path), mode="w") as container:
        encoder = AudioEncoder(container, track, rate, codec)
        encoder.close()
    return path
