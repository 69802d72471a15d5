"""Live RTSP ingest in-process, against a real RTSP server: rate, clocks, concurrent readers, reconnects."""

from __future__ import annotations

import itertools
import logging
import threading
import time

import numpy as np
import pytest

from lucy.errors import SourceError, StoreError
from lucy.ingest import Ingestor, ZarrFrameStore, open_source
from lucy.ingest.frames import Gap
from lucy.ingest.source import Frame, LiveSource
from lucy.synth import write_video
from lucy.synth.video import PALETTE, Scene
from lucy.wiring import open_frames


def _store_when_created(live, data, name, timeout=60.0) -> ZarrFrameStore:
    def opened():
        try:
            return ZarrFrameStore.open(data, name)
        except StoreError:  # not created yet
            return None
    return live.wait_for(opened, timeout, f"stream {name!r} to appear")


def test_rtsp_ingest_rate_clock_and_concurrent_reader(tmp_path, rtsp_server, live):
    settings = live.settings(tmp_path / "data")
    ingestor = Ingestor(settings, rtsp_server.url(), "cam", frames=open_frames(settings))
    before_run = time.time()
    run = live.background(ingestor.run, "ingest")

    reader = _store_when_created(live, settings.data, "cam")
    seen: list[int] = []
    timer: threading.Timer | None = None
    deadline = time.monotonic() + 90
    while run.is_alive() and time.monotonic() < deadline:
        n = reader.committed()
        assert not seen or n >= seen[-1], "committed count went backwards"
        seen.append(n)
        if n:
            clip = reader.read(0.0, 1e9)
            # Everything a reader is shown is fully written: all committed frames, each with real pixels
            # (an unwritten chunk would read back as the all-zero fill value).
            assert len(clip) >= n and np.all(np.diff(clip.times) > 0)
            assert clip.frames.reshape(len(clip), -1).max(axis=1).min() > 100
        if n >= 2 and timer is None:
            timer = threading.Timer(5.0, ingestor.stop)  # about 5 s more of the stream, then stop
            timer.start()
        time.sleep(0.1)
    result = run.result(timeout=30)

    info = ZarrFrameStore.open(settings.data, "cam").info()
    times = ZarrFrameStore.open(settings.data, "cam").times()
    assert result.frames == info.frames == len(times) >= 8
    assert info.live and info.stored_fps == settings.levels.finest_fps == 2.0
    assert info.width == 320 and info.height == 240
    assert np.all(np.diff(times) > 0)
    steps = np.diff(times)
    assert 0.3 < np.median(steps) < 0.7 and steps.max() < 1.2, steps  # 2 fps kept out of 15 fps
    rate = (len(times) - 1) / (times[-1] - times[0])
    assert 1.6 < rate < 2.4
    assert info.gaps == [] and result.reconnects == 0
    # Media time is seconds since the recorded wall-clock start: the last frame was shown moments ago.
    assert info.wall_start is not None and before_run <= info.wall_start <= before_run + 30
    assert abs(info.wall_start + times[-1] - time.time()) < 5
    assert max(seen) <= info.frames


def test_rtsp_server_restart_reconnects_and_records_the_gap(tmp_path, rtsp_server, live):
    settings = live.settings(tmp_path / "data")
    ingestor = Ingestor(settings, rtsp_server.url(), "cam", frames=open_frames(settings))
    run = live.background(ingestor.run, "ingest")
    live.wait_for(lambda: ingestor.stats.committed >= 6, 60, "6 frames before the outage")

    rtsp_server.stop()
    down = time.time()
    time.sleep(3.0)  # the outage itself
    rtsp_server.start()
    up = time.time()
    outage = up - down
    live.wait_for(lambda: ingestor.stats.reconnects >= 1, 60, "the ingestor to reconnect")
    after_gap = ingestor.stats.committed
    live.wait_for(lambda: ingestor.stats.committed >= after_gap + 4, 60, "frames after the reconnect")
    ingestor.stop()
    result = run.result(timeout=30)

    store = ZarrFrameStore.open(settings.data, "cam")
    info, times = store.info(), store.times()
    assert result.reconnects >= 1 and ingestor.stats.reconnects >= 1
    assert len(info.gaps) == 1, info.gaps
    gap = info.gaps[0]
    assert "stream" in gap.reason
    # About the outage: never shorter than the time the server was really down (minus the frames in flight),
    # at most the outage plus one backoff step and a slow reconnect.
    assert outage - 1.0 <= gap.end - gap.start <= outage + settings.ingest.reconnect_max_seconds + 5.0, gap
    assert abs(info.wall_start + gap.start - down) < 3.0
    assert np.all(np.diff(times) > 0)  # media time stays monotonic across the drop
    before = times[times <= gap.start]
    after = times[times >= gap.end]
    assert len(before) >= 6 and len(after) >= 4 and len(before) + len(after) == len(times)
    # The gap runs from the last frame decoded before the drop (stored frames are a 2 fps sample of those)
    # to the first one after it, which opens a new sampling slot and so is stored.
    assert before[-1] <= gap.start < before[-1] + 1 / info.stored_fps + 0.1
    assert after[0] == pytest.approx(gap.end)
    clip = store.read(0.0, gap.start + 1e-6)
    assert len(clip) == len(before) and clip.frames.reshape(len(clip), -1).max(axis=1).min() > 100


def _iterate(source: LiveSource, items: list) -> None:
    for item in source.frames():
        items.append((time.monotonic(), item))


def test_stalled_stream_is_detected_by_the_read_timeout(tmp_path, rtsp_server, live, caplog):
    """A frozen server keeps the TCP connection open but sends nothing: only the read timeout can notice."""
    caplog.set_level(logging.WARNING, logger="lucy.ingest.source")
    settings = live.settings(tmp_path / "data", read_timeout_seconds=2.0, connect_timeout_seconds=2.0).ingest
    source = open_source(rtsp_server.url(), settings)
    assert isinstance(source, LiveSource)
    items: list = []
    run = live.background(lambda: _iterate(source, items), "source")
    live.wait_for(lambda: sum(isinstance(i, Frame) for _, i in items) >= 20, 60, "frames before the stall")

    rtsp_server.freeze()
    frozen, frozen_wall = time.monotonic(), time.time()
    dropped = live.wait_for(lambda: [r for r in caplog.records if "no data for 2 s" in r.getMessage()], 30,
                            "the stall to be detected")
    detected_after = dropped[0].created - frozen_wall
    # After read_timeout_seconds (2 s) of silence; not never, and not twice that (see LiveSource._open).
    assert 0.9 <= detected_after <= 3.5, detected_after
    time.sleep(3.5)  # reconnecting to a frozen server must give up after the connect timeout and retry
    rtsp_server.thaw()
    thawed = time.monotonic()
    live.wait_for(lambda: source.reconnects >= 1, 60, "the reconnect")
    n = len(items)
    live.wait_for(lambda: len(items) >= n + 10, 60, "frames after the reconnect")
    source.stop()
    run.result(timeout=30)

    assert any("no answer within 2 s" in r.getMessage() for r in caplog.records), [r.getMessage()
                                                                                   for r in caplog.records]
    gaps = [i for _, i in items if isinstance(i, Gap)]
    assert len(gaps) == 1 and gaps[0].reason == "stream dropped: no data for 2 s"
    # The gap ends where the successful connection attempt began: it may have waited up to the connect timeout
    # for the frozen server to answer.
    outage = thawed - frozen
    assert outage - settings.connect_timeout_seconds - 0.5 <= gaps[0].end - gaps[0].start <= outage + 5.0
    times = [i.time for _, i in items if isinstance(i, Frame)]
    assert all(b > a for a, b in itertools.pairwise(times))


def test_backoff_grows_to_the_cap_and_stop_is_prompt(tmp_path, rtsp_server, live):
    settings = live.settings(tmp_path / "data", reconnect_initial_seconds=0.2, reconnect_max_seconds=0.8).ingest
    source = open_source(rtsp_server.url(), settings)
    items: list = []
    run = live.background(lambda: _iterate(source, items), "source")
    live.wait_for(lambda: len(items) >= 10, 60, "first frames")

    rtsp_server.stop()  # connection refused from now on
    live.wait_for(lambda: len(source.retry_delays) >= 7, 30, "seven reconnect attempts")
    assert source.retry_delays[:4] == pytest.approx([0.2, 0.4, 0.8, 0.8])
    assert max(source.retry_delays) == pytest.approx(0.8)
    rtsp_server.start()
    live.wait_for(lambda: source.reconnects == 1, 60, "the reconnect")
    n = len(source.retry_delays)
    live.wait_for(lambda: len(items) >= 20, 60, "frames after the reconnect")
    rtsp_server.stop()
    live.wait_for(lambda: len(source.retry_delays) >= n + 2, 30, "new attempts after the second drop")
    # After a good connection the backoff starts again from the initial delay.
    assert source.retry_delays[n:n + 2] == pytest.approx([0.2, 0.4])
    live.wait_for(lambda: len(source.retry_delays) >= n + 4, 30, "the backoff to reach its cap")
    stopping = time.monotonic()
    source.stop()
    run.result(timeout=30)
    assert time.monotonic() - stopping < 1.5  # stop() cuts a backoff wait short
    assert source.reconnects == 1


def test_rtsp_stream_of_a_file_arrives_intact_and_replays_after_it_ends(tmp_path, rtsp_server_factory, live):
    """The server streams a generated file (red for 2 s, then blue); at its end the server closes the session,
    and the ingestor reconnects and gets the file again: content, order and timing survive the trip."""
    red, blue = PALETTE["red"], PALETTE["blue"]
    video = write_video(tmp_path / "rb.mp4", duration=4.0, fps=15, width=320, height=240, gop=15,
                        scenes=[Scene(0, 2, red), Scene(2, 4, blue)])
    server = rtsp_server_factory(file=video)
    settings = live.settings(tmp_path / "data")
    ingestor = Ingestor(settings, server.url(), "replay", frames=open_frames(settings))
    run = live.background(ingestor.run, "ingest")
    live.wait_for(lambda: ingestor.stats.reconnects >= 1 and ingestor.stats.committed >= 12, 90,
                  "the file to end, a reconnect and frames of the replay")
    ingestor.stop()
    run.result(timeout=30)

    store = ZarrFrameStore.open(settings.data, "replay")
    info = store.info()
    clip = store.read(0, 1e9)
    assert np.all(np.diff(clip.times) > 0) and info.gaps and info.gaps[0].reason == "stream ended"
    first_end = info.gaps[0].start
    means = clip.frames[:, :120].reshape(len(clip), -1, 3).mean(axis=1)
    colour = ["red" if r > 2 * b else "blue" if b > 2 * r else "?" for r, _, b in means]
    first = [c for c, t in zip(colour, clip.times, strict=True) if t <= first_end]
    # The whole file, in order: red, then blue from its 2 s mark on (media time follows the file's timestamps).
    assert "?" not in colour and len(first) >= 6
    switch = first.index("blue")
    assert first[:switch] == ["red"] * switch and first[switch:] == ["blue"] * (len(first) - switch)
    assert abs(clip.times[switch] - clip.times[0] - 2.0) <= 0.6
    assert 3.0 <= first_end - clip.times[0] <= 4.5  # the 4 s file, streamed in real time
    assert colour[len(first)] == "red"  # the replay starts from the beginning


def test_a_server_that_accepts_but_never_answers_times_out(tmp_path, rtsp_server, live):
    rtsp_server.freeze()  # the kernel still accepts the TCP connection; nothing answers the RTSP request
    settings = live.settings(tmp_path / "data", connect_timeout_seconds=2.0).ingest
    source = open_source(rtsp_server.url(), settings)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"cannot connect to rtsp://127\.0\.0\.1:\d+/stream: no answer within 2 s"):
        next(source.frames())
    assert 1.8 <= time.monotonic() - started <= 6.0


def test_giving_up_on_a_dead_stream_keeps_what_was_stored(tmp_path, rtsp_server, live):
    settings = live.settings(tmp_path / "data", reconnect_give_up_seconds=2.0)
    ingestor = Ingestor(settings, rtsp_server.url(), "cam", frames=open_frames(settings))
    run = live.background(ingestor.run, "ingest")
    live.wait_for(lambda: ingestor.stats.committed >= 4, 60, "frames before the stream dies")
    rtsp_server.stop()
    died = time.monotonic()
    result = run.result(timeout=30)
    assert 2.0 <= time.monotonic() - died <= 10.0
    assert result.lost is not None and result.lost.startswith("stream down for over 2 s: ")
    assert "refused" in result.lost.lower()
    assert result.frames == ZarrFrameStore.open(settings.data, "cam").committed() >= 4
