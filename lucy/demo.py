"""``lucy demo``: generate a sample video with details worth asking about, ingest it, show what was stored."""

from __future__ import annotations

import tempfile
from pathlib import Path

from lucy.config import LucySettings
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.synth import PALETTE, Overlay, Scene, Shape, write_video

DEMO_SECONDS = 90.0


def demo_video(path: Path) -> Path:
    """A 90 s video: three scenes, a delivery van's plate, a departure board, and three orange boxes."""
    scenes = [Scene(0, 30, PALETTE["blue"]), Scene(30, 60, PALETTE["green"]), Scene(60, DEMO_SECONDS, PALETTE["purple"])]
    overlays = [
        Overlay(5, 15, "DELIVERY VAN PLATE KX-4821", size=0.06),
        Overlay(35, 48, "PLATFORM 7 DEPARTS 14:05", size=0.06),
        Overlay(66, 80, "STORE CLOSES AT 9 PM", size=0.06),
    ]
    shapes = [Shape(62, 75, PALETTE["orange"], count=3, x=0.1, y=0.5)]
    return write_video(path, duration=DEMO_SECONDS, fps=25, scenes=scenes, overlays=overlays, shapes=shapes)


def run_demo(settings: LucySettings, workdir: Path | None = None) -> int:
    workdir = Path(workdir or tempfile.mkdtemp(prefix="lucy-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    settings = settings.model_copy(update={"data": workdir / "data"})
    video = demo_video(workdir / "demo.mp4")
    print(f"generated {video} ({DEMO_SECONDS:.0f} s, 640x360, 25 fps, H.264)")
    result = Ingestor(settings, str(video), "demo").run()
    print(f"ingested {result.media_seconds:.1f} s of video in {result.wall_seconds:.2f} s "
          f"({result.media_seconds / max(result.wall_seconds, 1e-9):.0f}x real time)")
    store = ZarrFrameStore.open(settings.data, "demo")
    info = store.info()
    print(f"frame store {store.path}: {info.frames} frames at {info.stored_fps:g} fps, {info.width}x{info.height}, "
          f"{info.codec}, {store.stored_bytes() / max(info.frames, 1) / 1024:.1f} KiB per frame")
    clip = store.read(35.0, 48.0, fps=0.5)
    print(f"read back 35-48 s at 0.5 fps: {len(clip)} frames at {', '.join(f'{t:.1f}' for t in clip.times)} s")
    return 0
