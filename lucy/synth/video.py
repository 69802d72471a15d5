"""Generated test videos: coloured scenes, a moving square and text overlays, encoded with PyAV.

The demo, the tests and the benchmarks make their own videos with this module, so every detail a question
can ask about (a caption, a colour, a count) is known exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont

PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (200, 30, 30), "green": (30, 160, 60), "blue": (30, 60, 200), "yellow": (230, 210, 40),
    "orange": (235, 130, 30), "purple": (130, 50, 170), "gray": (128, 128, 128), "white": (240, 240, 240),
    "black": (15, 15, 15), "teal": (20, 140, 140), "pink": (235, 120, 170), "brown": (120, 75, 35),
}


@dataclass(frozen=True)
class Scene:
    """A stretch of video with one background colour (cuts between scenes are real scene changes)."""

    start: float
    end: float
    color: tuple[int, int, int]


@dataclass(frozen=True)
class Overlay:
    """Text drawn over the video from ``start`` to ``end`` seconds; geometry in fractions of the frame."""

    start: float
    end: float
    text: str
    x: float = 0.06
    y: float = 0.08
    size: float = 0.07  # text height as a fraction of the frame height
    color: tuple[int, int, int] = (255, 255, 255)
    box: tuple[int, int, int] | None = (0, 0, 0)


@dataclass(frozen=True)
class Shape:
    """Filled squares (``count`` of them, in a row) shown from ``start`` to ``end``."""

    start: float
    end: float
    color: tuple[int, int, int]
    count: int = 1
    x: float = 0.55
    y: float = 0.55
    size: float = 0.12


@lru_cache(maxsize=64)
def _text_image(text: str, height_px: int, color: tuple[int, int, int],
                box: tuple[int, int, int] | None) -> tuple[np.ndarray, np.ndarray]:
    font = ImageFont.load_default(size=max(8, height_px))
    left, top, right, bottom = font.getbbox(text)
    pad = max(2, height_px // 5)
    w, h = right - left + 2 * pad, bottom - top + 2 * pad
    image = Image.new("RGB", (w, h), box or (0, 0, 0))
    mask = Image.new("L", (w, h), 255 if box else 0)
    ImageDraw.Draw(image).text((pad - left, pad - top), text, font=font, fill=color)
    ImageDraw.Draw(mask).text((pad - left, pad - top), text, font=font, fill=255)
    return np.asarray(image), np.asarray(mask) > 0


def _paste(frame: np.ndarray, patch: np.ndarray, mask: np.ndarray, x: int, y: int) -> None:
    h = min(patch.shape[0], frame.shape[0] - y)
    w = min(patch.shape[1], frame.shape[1] - x)
    if h <= 0 or w <= 0:
        return
    region = frame[y:y + h, x:x + w]
    region[mask[:h, :w]] = patch[:h, :w][mask[:h, :w]]


def cut_scenes(scenes: list[Scene], start: float, end: float) -> list[Scene]:
    """``scenes`` with ``[start, end)`` cut out of them (to put a scene of its own there)."""
    out = []
    for s in scenes:
        if s.end <= start or s.start >= end:
            out.append(s)
            continue
        if s.start < start:
            out.append(Scene(s.start, start, s.color))
        if s.end > end:
            out.append(Scene(end, s.end, s.color))
    return out


def default_scenes(duration: float, every: float = 10.0) -> list[Scene]:
    colours = list(PALETTE.values())
    return [Scene(t, min(t + every, duration), colours[i % len(colours)])
            for i, t in enumerate(np.arange(0.0, duration, every))]


class FramePainter:
    """Draws the frame shown at media time ``t``."""

    def __init__(self, width: int, height: int, scenes: Sequence[Scene], overlays: Sequence[Overlay],
                 shapes: Sequence[Shape], *, texture: bool = False, seed: int = 0) -> None:
        self.width, self.height = width, height
        self.scenes, self.overlays, self.shapes = list(scenes), list(overlays), list(shapes)
        # A soft vertical gradient, so frames are not flat colour.
        self._shade = np.linspace(0.75, 1.15, height, dtype=np.float32)[:, None, None]
        self._background: dict[tuple[int, int, int], np.ndarray] = {}
        self._detail: np.ndarray | float = 0.0
        self._noise: list[np.ndarray] = []
        if texture:
            # Scene detail and sensor noise, so that codecs and compressors face something like camera footage.
            rng = np.random.default_rng(seed)
            blocks = rng.normal(0, 18, (height // 8 + 1, width // 8 + 1, 3)).astype(np.float32)
            self._detail = np.repeat(np.repeat(blocks, 8, 0), 8, 1)[:height, :width] + rng.normal(
                0, 6, (height, width, 3)).astype(np.float32)
            self._noise = [rng.integers(-3, 4, (height, width, 3), dtype=np.int16) for _ in range(4)]

    def _scene_colour(self, t: float) -> tuple[int, int, int]:
        for scene in self.scenes:
            if scene.start <= t < scene.end:
                return scene.color
        return PALETTE["gray"]

    def __call__(self, t: float) -> np.ndarray:
        colour = self._scene_colour(t)
        if colour not in self._background:
            base = np.broadcast_to(np.asarray(colour, np.float32), (self.height, self.width, 3)) * self._shade
            self._background[colour] = np.clip(base + self._detail, 0, 255).astype(np.uint8)
        frame = self._background[colour].copy()
        if self._noise:
            noisy = frame.astype(np.int16) + self._noise[int(t * 100) % len(self._noise)]
            frame = np.clip(noisy, 0, 255).astype(np.uint8)
        side = max(4, self.height // 10)  # a moving square: steady motion
        x = int((t * self.width / 8) % max(1, self.width - side))
        y = self.height - side - self.height // 20
        frame[y:y + side, x:x + side] = (250, 250, 250)
        for shape in self.shapes:
            if shape.start <= t < shape.end:
                s = max(4, int(shape.size * self.height))
                for i in range(shape.count):
                    x0, y0 = int(shape.x * self.width) + i * (s + s // 2), int(shape.y * self.height)
                    frame[y0:y0 + s, x0:x0 + s] = shape.color
        for o in self.overlays:
            if o.start <= t < o.end:
                patch, mask = _text_image(o.text, max(8, int(o.size * self.height)), o.color, o.box)
                _paste(frame, patch, mask, int(o.x * self.width), int(o.y * self.height))
        return frame


def write_video(
    path: str | Path,
    *,
    duration: float,
    fps: float = 30.0,
    width: int = 640,
    height: int = 360,
    scenes: Sequence[Scene] | None = None,
    overlays: Sequence[Overlay] = (),
    shapes: Sequence[Shape] = (),
    vfr: bool = False,
    codec: str = "libx264",
    preset: str = "ultrafast",
    gop: int | None = None,
    codec_options: dict[str, str] | None = None,
    texture: bool = False,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    audio: np.ndarray | None = None,
    audio_rate: int = 44_100,
    audio_codec: str = "aac",
) -> Path:
    """Encode a synthetic video and return its path.

    ``vfr`` makes frame intervals vary from 0.3x to 3x; ``texture`` adds scene detail and sensor noise (for
    benchmarks: flat synthetic frames compress unrealistically well). ``audio``: a mono float32 sound track at
    ``audio_rate`` (e.g. :func:`lucy.synth.speech.speech_track`), muxed as ``audio_codec`` from media time 0 (a
    track shorter than the video stops early, as a microphone that drops out would).
    """
    path = Path(path)
    painter = FramePainter(width, height, default_scenes(duration) if scenes is None else scenes, overlays, shapes,
                           texture=texture, seed=seed)
    rng = random.Random(seed)
    time_base = Fraction(1, 90_000)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p"
        stream.time_base = time_base
        stream.codec_context.time_base = time_base
        stream.options = ({"preset": preset, **(codec_options or {})} if codec == "libx264"
                          else dict(codec_options or {}))
        if gop is not None:
            stream.codec_context.gop_size = gop
        sound = None
        if audio is not None:
            from lucy.synth.speech import AudioEncoder

            sound = AudioEncoder(container, audio, audio_rate, audio_codec)
        t, index = 0.0, 0
        while t < duration - 1e-9:
            if sound is not None:
                sound.until(t)
            frame = av.VideoFrame.from_ndarray(painter(t), format="rgb24")
            frame.pts = round(t / time_base)
            frame.time_base = time_base
            for packet in stream.encode(frame):
                container.mux(packet)
            index += 1
            # Constant rate: exact times from the frame index (no drift); variable: random steps.
            t = t + rng.choice((0.3, 0.5, 1.0, 1.0, 2.0, 3.0)) / fps if vfr else index / fps
            if progress is not None:
                progress(t)
        for packet in stream.encode():
            container.mux(packet)
        if sound is not None:
            sound.close()
    return path


def cached_video(path: str | Path, **kwargs: object) -> Path:
    """``write_video(path, **kwargs)`` unless ``path`` exists already (benchmarks reuse their slow-to-make
    videos). Written under a temporary name first, so an interrupted run never leaves a half video behind."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {path.name} (cached for later runs)...", flush=True)
        tmp = path.with_suffix(".partial" + path.suffix)
        write_video(tmp, **kwargs)  # type: ignore[arg-type]
        tmp.rename(path)
    return path
