"""`lucy ingest` of a file as users run it (a child process): progress lines when stderr is not a terminal, and
Ctrl-C, which stops cleanly, keeps what was stored and exits 130."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from lucy.errors import StoreError
from lucy.ingest import ZarrFrameStore
from lucy.synth import PALETTE, Scene, write_video
from lucy.testing import child_env

ENV = {"LUCY_INGEST__FRAME_WIDTH": "160", "LUCY_INGEST__FRAME_HEIGHT": "90"}


def popen_ingest(video: Path, data: Path, *args: str, realtime: bool = True) -> subprocess.Popen[str]:
    env = child_env()
    env.update(ENV)
    pace = ["--realtime"] if realtime else []
    return subprocess.Popen([sys.executable, "-m", "lucy", "ingest", str(video), "--stream", "cam", "--data", str(data),
                             "--captioner", "none", *pace, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def committed(data: Path) -> int:
    try:
        return ZarrFrameStore.open(data, "cam").committed()
    except StoreError:  # not created yet
        return 0


def test_a_file_ingest_prints_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    video = write_video(tmp_path / "v.mp4", duration=16, fps=4, width=160, height=90,
                        scenes=[Scene(0, 16, PALETTE["teal"])])
    proc = popen_ingest(video, tmp_path / "data")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.startswith("cam: finished; ")  # the summary, on stdout as before, with the state lucy streams says
    lines = [line for line in err.splitlines() if line.startswith("cam: ingest ")]
    # paced in real time: one line per 10 % of the file, at most one per 5 s -> about 3 lines over 16 s
    assert 2 <= len(lines) <= 4, err
    found = [re.search(r"ingest +(\d+)% \(([\d.]+) of 16\.0 s, eta (\d+):(\d\d):(\d\d)\)", line) for line in lines]
    assert all(found), lines
    percents = [int(m.group(1)) for m in found if m]
    assert percents == sorted(percents) and len(set(percents)) == len(percents) and 0 < percents[0] < 100
    for m in found:
        assert m is not None
        done, eta = float(m.group(2)), int(m.group(3)) * 3600 + int(m.group(4)) * 60 + int(m.group(5))
        assert abs(eta - (16 - done)) <= 3  # real time: the media left is the time left
    assert "x real time" in lines[0] and "frames stored" in lines[0]
    assert all(line.endswith(" | recording") for line in lines), lines  # paced: as a live stream records


def test_progress_lines_say_the_state_in_the_api_s_words(capsys) -> None:
    """A file read as fast as it decodes is catching up, a live stream or a paced file recording (as the API, lucy
    streams and the dashboard say); while the backlog is captioned the stream itself is finished."""
    from lucy.cli.progress import PLAIN_MAX_SECONDS, PlainProgress
    from lucy.metrics import CaptionProgress, IngestProgress, StreamProgress

    at = IngestProgress(committed=40, media_start=0.0, ingested_until=10.0, decode_fps=40.0, realtime_factor=8.0)
    cases = ((False, False, "catching_up"), (False, True, "recording"), (True, False, "recording"))
    for live, realtime, state in cases:
        shown = PlainProgress("cam", None if live else 60.0, realtime=realtime)
        shown._last_line -= PLAIN_MAX_SECONDS  # due now: a line is printed at most every few seconds
        shown.on_commit(StreamProgress(live=live, ingest=at))
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith("cam: ingest ") and line.endswith(f" | {state}"), line
    shown._last_line -= PLAIN_MAX_SECONDS
    shown.on_drain(StreamProgress(live=False, ingest=at, caption=CaptionProgress(captioned_until=4.0, pending=1)))
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("cam: captioning the backlog: 1 spans left") and line.endswith(" | finished"), line


def test_ctrl_c_during_a_file_ingest_keeps_what_was_stored_and_exits_130(tmp_path):
    video = write_video(tmp_path / "v.mp4", duration=60, fps=4, width=160, height=90,
                        scenes=[Scene(0, 60, PALETTE["teal"])])
    data = tmp_path / "data"
    proc = popen_ingest(video, data, "--json")
    try:
        deadline = time.monotonic() + 60
        while committed(data) < 8:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        seen = committed(data)
        proc.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert time.monotonic() - signalled < 10
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted; everything committed so far is kept" in err
    summary = json.loads(out)  # a clean stop: the summary is printed
    assert seen <= summary["frames"] and summary["media_seconds"] < 30 and not summary["complete"]
    assert summary["state"] == "stopped"  # as lucy streams and the API read it now: nobody writes it, not finished
    assert committed(data) == summary["frames"]
    resumed = popen_ingest(video, data, "--json", realtime=False)  # and the next run goes on from there
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    again = json.loads(out)
    assert again["complete"] and again["media_seconds"] > 59 and again["state"] == "finished"
    assert again["new_frames"] == again["frames"] - summary["frames"]


def test_on_a_terminal_the_ingest_shows_bars_with_percent_and_eta(tmp_path):
    video = write_video(tmp_path / "v.mp4", duration=8, fps=4, width=160, height=90,
                        scenes=[Scene(0, 8, PALETTE["teal"])])
    terminal, stderr = pty.openpty()  # stderr is a terminal; stdout stays a pipe (the summary)
    env = child_env()
    env.update(ENV, TERM="xterm", COLUMNS="100")
    proc = subprocess.Popen([sys.executable, "-m", "lucy", "ingest", str(video), "--stream", "cam", "--data",
                             str(tmp_path / "data"), "--captioner", "none", "--realtime"], stdout=subprocess.PIPE,
                            stderr=stderr, text=True, env=env)
    os.close(stderr)
    shown = b""
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    out, _ = proc.communicate(timeout=60)
    os.close(terminal)
    assert proc.returncode == 0
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode())  # without colours and cursor moves
    assert "━" in screen and "100%" in screen and "8.0/8.0 s" in screen  # the bar, filled
    assert re.search(r"cam +[━╸╺]+ +\d{1,2}% +[\d.]+/8\.0 s \d\d:\d\d", screen)  # % and time left, while it ran
    assert "recording, " in screen and "finished" in screen  # the state, in the words of the API
    assert out.startswith("cam: finished; ") and "8.0 s of media" in out
