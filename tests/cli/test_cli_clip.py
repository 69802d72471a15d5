"""``lucy clip``: an MP4 of a stored stream written from the data directory, with no server; bad input is one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lucy.cli.clip import media_time
from lucy.config import load_settings
from lucy.errors import LucyError
from lucy.ingest import Ingestor
from lucy.synth import PALETTE, Scene, write_video
from lucy.wiring import open_frames


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stream ``cam``: 90 s at 4 fps (a keyframe a second), ingested from a file (it stays: clips are cut from it)."""
    root = tmp_path_factory.mktemp("clipcli")
    video = write_video(root / "cam.mp4", duration=90, fps=4, width=320, height=180, gop=4,
                        scenes=[Scene(0, 45, PALETTE["red"]), Scene(45, 90, PALETTE["blue"])])
    settings = load_settings(data=root / "data")
    assert Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run().complete
    return settings.data


def test_clip_between_m_ss_times_is_written(tmp_path, data, run_lucy):
    out = tmp_path / "out.mp4"
    done = run_lucy("clip", "--stream", "cam", "--from", "1:00", "--to", "1:20", "-o", str(out), "--data", str(data),
                    "--json")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["origin"] == "source" and said["file"] == str(out) and said["bytes"] == out.stat().st_size
    assert said["from"] == pytest.approx(60.0, abs=1.0) and said["to"] == pytest.approx(80.0, abs=0.5)
    duration = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0",
                               str(out)], capture_output=True, text=True, check=True).stdout
    assert float(duration) == pytest.approx(20.0, abs=1.5)
    assert not list(tmp_path.glob(".*.part"))


@pytest.mark.parametrize(("args", "says"), [
    (["--from", "20", "--to", "10"], "to (10 s) must be after from (20 s)"),
    (["--from", "0", "--to", "10:00"], "a clip is at most 300 s long"),
    (["--from", "200", "--to", "210"], "nothing stored from 200 to 210 s"),
    (["--stream", "nope", "--from", "0", "--to", "5"], "nope"),
])
def test_bad_input_is_one_line(tmp_path, data, run_lucy, args, says):
    stream = [] if "--stream" in args else ["--stream", "cam"]
    done = run_lucy("clip", *stream, *args, "-o", str(tmp_path / "x.mp4"), "--data", str(data))
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("lucy: error: ") and says in line, line
    assert not (tmp_path / "x.mp4").exists()


def test_media_times_parse_like_a_clock():
    assert media_time("65", "--from") == 65.0
    assert media_time("1:05.5", "--from") == 65.5
    assert media_time("1:02:03", "--to") == 3723.0
    with pytest.raises(LucyError, match="must be below 60"):
        media_time("1:60", "--to")
    with pytest.raises(LucyError, match="'soon' is not a media time"):
        media_time("soon", "--from")
    with pytest.raises(LucyError, match="is not a media time"):
        media_time("inf", "--from")
