"""`lucy ingest` on live RTSP streams as users run it: a child process, real servers, real signals."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from lucy.errors import StoreError
from lucy.ingest import ZarrFrameStore, list_streams

SECRET = "s3cret-Pa55word"


def assert_one_line_error(code: int, stderr: str, *fragments: str) -> str:
    assert code != 0
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("lucy: error: ") and "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def files_text(folder: Path) -> bytes:
    """Every byte stored under ``folder`` (zarr metadata with the stream's attributes, chunks, databases)."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def committed(data: Path, stream: str) -> int:
    try:
        return ZarrFrameStore.open(data, stream).committed()
    except StoreError:  # not created yet
        return 0


@pytest.mark.parametrize("auth", ["", f"user:{SECRET}@", f"user:{SECRET[:4]}@{SECRET[4:]}@"],
                         ids=["no-credentials", "password", "password-with-at-sign"])
def test_unreachable_rtsp_url_fails_fast_with_one_line(tmp_path, live, auth):
    port = live.free_port()  # nothing listens there
    data = tmp_path / "data"
    run = live.lucy(["ingest", f"rtsp://{auth}127.0.0.1:{port}/x", "--stream", "s", "--data", str(data)],
                    tmp_path / "run")
    code = run.finish(timeout=60)
    line = assert_one_line_error(code, run.stderr, f"127.0.0.1:{port}/x", "cannot connect", "refused")
    assert time.monotonic() - run.started < 20  # fails fast: no retry loop on a stream that never came up
    assert SECRET not in run.stdout + run.stderr and SECRET.encode() not in files_text(tmp_path)
    assert SECRET[4:] not in run.stdout + run.stderr
    if auth:
        assert "user:***@" in line
    assert list_streams(data) == []


def test_bad_credentials_and_unknown_path_on_a_real_server(tmp_path, live, rtsp_server_factory):
    server = rtsp_server_factory(user="user", password="right-password")
    data = tmp_path / "data"
    run = live.lucy(["ingest", server.url(password=SECRET), "--stream", "s", "--data", str(data)], tmp_path / "a")
    assert_one_line_error(run.finish(), run.stderr, "cannot connect to rtsp://user:***@127.0.0.1", "401")
    assert SECRET not in run.stdout + run.stderr and SECRET.encode() not in files_text(tmp_path)
    wrong_path = server.url().replace("/stream", "/nope")
    run = live.lucy(["ingest", wrong_path, "--stream", "s", "--data", str(data)], tmp_path / "b")
    assert_one_line_error(run.finish(), run.stderr, "404")
    assert "right-password" not in run.stdout + run.stderr
    assert list_streams(data) == []


@pytest.mark.parametrize("url", [f"rtmp://user:{SECRET}@127.0.0.1/live", "udp://127.0.0.1:5000"],
                         ids=["rtmp-with-password", "udp"])
def test_unknown_scheme_gives_one_line(tmp_path, live, url):
    run = live.lucy(["ingest", url, "--stream", "s", "--data", str(tmp_path / "data")], tmp_path / "run")
    assert_one_line_error(run.finish(), run.stderr, "unsupported source scheme")
    assert SECRET not in run.stdout + run.stderr


def stream_state(live, data: Path, workdir: Path) -> str:
    """The state ``lucy streams`` (another process) says for the one stream of ``data``."""
    streams = live.lucy(["streams", "--data", str(data), "--json"], workdir / f"streams-{time.monotonic_ns()}")
    assert streams.finish() == 0, streams.stderr
    return json.loads(streams.stdout)[0]["state"]


def test_authenticated_stream_never_shows_the_password(tmp_path, live, rtsp_server_factory):
    server = rtsp_server_factory(user="user", password=SECRET)
    data = tmp_path / "data"
    run = live.lucy(["ingest", server.url(), "--stream", "cam", "--data", str(data), "--json"], tmp_path / "run")
    live.wait_for(lambda: committed(data, "cam") >= 4, 60, "frames from the authenticated stream")
    # A drop and a reconnect make Lucy log the stream's URL: those lines must be redacted too.
    server.stop()
    live.wait_for(lambda: "reconnecting to" in run.stderr, 30, "a reconnect warning")
    # The state while it is down, in the ingest's own progress and as another process reads it (the lock's record)
    live.wait_for(lambda: stream_state(live, data, tmp_path) == "reconnecting", 30, "lucy streams: reconnecting")
    assert re.search(r"^cam: ingest .* \| reconnecting$", run.stderr, re.MULTILINE), run.stderr
    server.start()
    live.wait_for(lambda: ZarrFrameStore.open(data, "cam").info().gaps, 60, "the reconnect")
    live.wait_for(lambda: stream_state(live, data, tmp_path) == "recording", 30, "lucy streams: recording again")
    n = committed(data, "cam")
    live.wait_for(lambda: committed(data, "cam") >= n + 2, 60, "frames after the reconnect")
    run.send(signal.SIGTERM)
    code = run.finish()
    summary = json.loads(run.stdout)
    assert code == 0 and summary["reconnects"] >= 1 and summary["frames"] >= n + 2
    assert "rtsp://user:***@127.0.0.1" in run.stderr  # the URL was shown, redacted
    streams = live.lucy(["streams", "--data", str(data), "--json"], tmp_path / "streams")
    assert streams.finish() == 0
    [row] = json.loads(streams.stdout)
    assert row["source"] == server.url().replace(SECRET, "***") and row["gaps"] == 1
    everything = run.stdout + run.stderr + streams.stdout + streams.stderr
    assert SECRET not in everything and SECRET.encode() not in files_text(tmp_path)
    store = ZarrFrameStore.open(data, "cam")
    assert SECRET not in json.dumps(store.attrs)


def test_signals_stop_cleanly_and_a_second_run_resumes(tmp_path, live, rtsp_server):
    data = tmp_path / "data"
    args = ["ingest", rtsp_server.url(), "--stream", "cam", "--data", str(data), "--json"]

    # Run 1, ended with Ctrl-C (exit 130, as for any command): what was committed stays.
    first = live.lucy(args, tmp_path / "run1")
    seen = live.wait_for(lambda: committed(data, "cam") >= 4 and committed(data, "cam"), 60, "frames of run 1")
    first.send(signal.SIGINT)
    signalled = time.monotonic()
    code = first.finish()
    ended = time.time()
    assert time.monotonic() - signalled < 10  # promptly, not after some internal timeout
    assert code == 130 and "Traceback" not in first.stderr, first.stderr
    summary = json.loads(first.stdout)
    assert summary["frames"] >= seen  # a clean stop: the summary is printed
    assert "interrupted; everything committed so far is kept" in first.stderr
    # stopped, in the summary and in lucy streams (never "live" or "recording" once nobody writes it)
    streams = live.lucy(["streams", "--data", str(data), "--json"], tmp_path / "streams1")
    assert streams.finish() == 0
    assert summary["state"] == "stopped" and [r["state"] for r in json.loads(streams.stdout)] == ["stopped"]
    store = ZarrFrameStore.open(data, "cam")
    times1, info1 = store.times().copy(), store.info()
    assert len(times1) >= seen and np.all(np.diff(times1) > 0)
    assert info1.wall_start is not None and abs(info1.wall_start + times1[-1] - ended) < 5

    # Run 2, while the camera is down: one line, and nothing stored is touched.
    rtsp_server.stop()
    down = live.lucy(args, tmp_path / "run2")
    assert_one_line_error(down.finish(), down.stderr, "cannot connect", "refused")
    np.testing.assert_array_equal(ZarrFrameStore.open(data, "cam").times(), times1)

    # Run 3, ended with SIGTERM: resumes after the last frame, with the time away recorded as a gap.
    rtsp_server.start()
    third = live.lucy(args, tmp_path / "run3")
    resumed_at = time.time()
    live.wait_for(lambda: committed(data, "cam") >= len(times1) + 4, 60, "frames of run 3")
    third.send(signal.SIGTERM)
    signalled = time.monotonic()
    code = third.finish()
    assert time.monotonic() - signalled < 10
    assert code == 0 and "Traceback" not in third.stderr, third.stderr
    summary = json.loads(third.stdout)
    store = ZarrFrameStore.open(data, "cam")
    times, info = store.times(), store.info()
    assert summary["frames"] == info.frames == len(times) and summary["new_frames"] == len(times) - len(times1)
    np.testing.assert_array_equal(times[:len(times1)], times1)  # run 1's frames kept, no duplicates
    assert np.all(np.diff(times) > 0)
    assert info.wall_start == info1.wall_start  # one media clock across runs
    [gap] = info.gaps
    assert gap.reason == "ingest restarted" and gap.start == times1[-1] and gap.end == times[len(times1)]
    # The gap covers the time nothing was ingested: from run 1's last frame to run 3's first one.
    assert resumed_at - ended - 1.0 < gap.end - gap.start < resumed_at - ended + 15
