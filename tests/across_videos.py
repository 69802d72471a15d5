"""Three short generated camera videos ingested as separate streams of one data directory, for questions across
streams (tests/query/test_across.py, tests/service/test_across_api.py).

* ``back`` shows the sign "PLATFORM 7" at 5-14 s;
* ``front`` shows it later, at 22-32 s;
* ``side`` never shows it; its sign "STORE CLOSES AT 9 PM" (10-20 s) is on no other stream.
"""

from __future__ import annotations

from pathlib import Path

from lucy.synth import PALETTE, Overlay, Scene, write_video

SECONDS = 36.0
ENV = {"LUCY_INGEST__FRAME_WIDTH": "320", "LUCY_INGEST__FRAME_HEIGHT": "180",
       "LUCY_CAPTIONER__PIXELS__COARSE_MAX_FRAMES": "8", "LUCY_CAPTIONER__MAX_IN_FLIGHT": "2",
       "LUCY_DETECT__BACKEND": "none"}
PLATFORM = "PLATFORM 7"
STORE = "STORE CLOSES AT 9 PM"
STREAMS = {
    "back": ("teal", [Overlay(5, 14, PLATFORM, size=0.12, x=0.05, y=0.1)]),
    "front": ("red", [Overlay(22, 32, PLATFORM, size=0.12, x=0.05, y=0.1)]),
    "side": ("blue", [Overlay(10, 20, STORE, size=0.09, x=0.05, y=0.1)]),
}


def ingest_cameras(root: Path, names: tuple[str, ...] = ("back", "front", "side")) -> Path:
    """The data directory ``root / "data"`` with the streams ``names`` ingested by the real CLI (embedded
    captioner, OCR, no detector), each from its own video file."""
    from tests.conftest import _run_lucy

    data = root / "data"
    for name in names:
        colour, overlays = STREAMS[name]
        video = write_video(root / f"{name}.mp4", duration=SECONDS, fps=4, width=320, height=180,
                            scenes=[Scene(0, SECONDS, PALETTE[colour])], overlays=overlays)
        done = _run_lucy("ingest", str(video), "--stream", name, "--captioner", "pixels", "--preset", "live",
                         "--data", str(data), env=ENV, timeout=240)
        assert done.returncode == 0, done.stderr
    return data
