"""Bad input through the real CLI: one clear line, a non-zero exit, no traceback, nothing stored lost."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lucy.ingest import ZarrFrameStore
from lucy.synth import write_video

PROGRESS = re.compile(r"[\w.-]+: (ingest |captioning the backlog: )")  # lucy.cli.progress.PlainProgress's lines


def assert_one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode != 0
    # Progress lines ("<stream>: ingest 40% ...") come before it when an ingest runs long enough, as on a busy machine
    lines = [line for line in proc.stderr.strip().splitlines() if not PROGRESS.match(line)]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("lucy: error: ")
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_missing_file(tmp_path, run_lucy):
    proc = run_lucy("ingest", str(tmp_path / "nope.mp4"), "--stream", "x", "--data", str(tmp_path / "d"))
    assert_one_line_error(proc, "no such file", "nope.mp4")


def test_file_that_is_not_video(tmp_path, run_lucy):
    text = tmp_path / "notes.mp4"
    text.write_text("these are not the frames you are looking for\n" * 50)
    proc = run_lucy("ingest", str(text), "--stream", "x", "--data", str(tmp_path / "d"))
    assert_one_line_error(proc, "notes.mp4")


def test_unknown_scheme(tmp_path, run_lucy):
    proc = run_lucy("ingest", "ftp://user:hunter2@example.invalid/cam", "--stream", "x", "--data", str(tmp_path / "d"))
    assert_one_line_error(proc, "unsupported source scheme 'ftp'")
    assert "hunter2" not in proc.stderr + proc.stdout


def test_truncated_file_keeps_what_decodes(tmp_path, run_lucy):
    video = write_video(tmp_path / "v.mkv", duration=20, fps=25, width=320, height=240, gop=25)
    data = video.read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(data[: len(data) * 55 // 100])
    proc = run_lucy("ingest", str(cut), "--stream", "t", "--data", str(tmp_path / "d"), "--json")
    assert_one_line_error(proc, "lost")
    summary = json.loads(proc.stdout)
    assert 12 <= summary["frames"] <= 26  # about half of the 40 frames of 20 s at 2 fps
    store = ZarrFrameStore.open(tmp_path / "d", "t")
    info = store.info()
    assert not info.complete and "lost" in info.lost and info.frames == summary["frames"]
    assert len(store.read(0, 1e9)) == summary["frames"]


def test_bad_input_does_not_touch_stored_streams(tmp_path, run_lucy):
    video = write_video(tmp_path / "ok.mp4", duration=4, fps=25, width=320, height=240)
    data = str(tmp_path / "d")
    assert run_lucy("ingest", str(video), "--stream", "ok", "--data", data).returncode == 0
    before = json.loads(run_lucy("streams", "--json", "--data", data).stdout)
    assert_one_line_error(run_lucy("ingest", str(tmp_path / "missing.mp4"), "--stream", "ok", "--data", data))
    assert_one_line_error(run_lucy("ingest", str(video), "--stream", "../../etc", "--data", data), "bad stream name")
    assert_one_line_error(run_lucy("ingest", str(video), "--stream", "zarr.json", "--data", data),
                          "bad stream name 'zarr.json'", "keeps a file of that name")
    assert json.loads(run_lucy("streams", "--json", "--data", data).stdout) == before


@pytest.mark.parametrize("toml, message", [
    ("[ingest]\nframe_width = 10\n", "ingest.frame_width"),
    ("[ingest]\nno_such_key = 1\n", "no_such_key"),
    ("preset = 'nope'\n", "unknown preset"),
])
def test_bad_configuration_is_refused_at_start(tmp_path, run_lucy, toml, message):
    config = tmp_path / "lucy.toml"
    config.write_text(toml)
    proc = run_lucy("config", "show", "--config", str(config))
    assert_one_line_error(proc, message)


def test_configuration_precedence_file_env_flags(tmp_path: Path, run_lucy):
    config = tmp_path / "lucy.toml"
    config.write_text("preset = 'egomem'\n[ingest]\ncodec = 'zstd'\njpeg_quality = 70\n")
    shown = json.loads(run_lucy("config", "show", "--json", "--config", str(config)).stdout)
    assert shown["preset"] == "egomem" and shown["ingest"]["codec"] == "zstd"
    assert shown["levels"]["coarse"] == {"span_seconds": 800.0, "fps": 0.25}
    env = {"LUCY_INGEST__CODEC": "jpeg", "LUCY_PRESET": "mlvu-long"}
    shown = json.loads(run_lucy("config", "show", "--json", "--config", str(config), env=env).stdout)
    assert shown["ingest"]["codec"] == "jpeg" and shown["preset"] == "mlvu-long"
    assert shown["ingest"]["jpeg_quality"] == 70  # untouched keys still come from the file
    shown = json.loads(run_lucy("config", "show", "--json", "--config", str(config), "--preset", "live",
                                env=env).stdout)
    assert shown["preset"] == "live"
    # lucy.toml in the working directory is read by default
    shown = json.loads(run_lucy("config", "show", "--json", cwd=tmp_path).stdout)
    assert shown["preset"] == "egomem"
