"""Recordings and clips without a live source: segments re-muxed from a real file's packets, clips cut from them,
from a stream's source file and from its stored frames (each decoded back with PyAV and checked against ffprobe),
the bad inputs, and recordings under retention."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest

from lucy.config import LucySettings, load_settings
from lucy.errors import InputError, StreamNotFound
from lucy.ingest import Ingestor, clips, retention
from lucy.ingest.clips import ClipCache, ClipRangeError, clip_url, make_clip
from lucy.ingest.recording import SegmentWriter, file_span, repair
from lucy.ingest.retention import RetentionMaintainer
from lucy.ingest.segments import list_segments, recordings_dir
from lucy.metrics.exporter import MetricsExporter
from lucy.metrics.stats import RetentionStats
from lucy.synth import PALETTE, Scene, write_video
from lucy.wiring import open_frames

FPS = 15
GOP = 15  # one keyframe a second
SECONDS = 20.0


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 s, 15 fps, a keyframe a second, with an AAC sound track (a 440 Hz tone)."""
    t = np.arange(int(SECONDS * 44_100)) / 44_100
    tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    scenes = [Scene(i * 4.0, (i + 1) * 4.0, PALETTE[c]) for i, c in enumerate(("red", "green", "blue", "yellow",
                                                                               "purple"))]
    return write_video(tmp_path_factory.mktemp("clips") / "cam.mp4", duration=SECONDS, fps=FPS, width=320,
                       height=240, scenes=scenes, gop=GOP, audio=tone)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory, video: Path) -> LucySettings:
    """The video ingested as stream ``cam`` (frames at 2 fps)."""
    settings = load_settings(data=tmp_path_factory.mktemp("data"))
    result = Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run()
    assert result.complete and result.frames >= 38
    return settings


def record(video: Path, folder: Path, segment_seconds: float, *, offset: float = 0.0,
           reconnect_at: float | None = None) -> SegmentWriter:
    """Feed a file's packets to a SegmentWriter as a live source does: connect, packets once decoded, the clock's
    offset once the first picture is decoded; with ``reconnect_at``, a new connection from that file time on."""
    writer = SegmentWriter(folder, segment_seconds, "cam")
    with av.open(str(video)) as container:
        v, a = container.streams.video[0], container.streams.audio[0]
        writer.connect(v, a)
        anchored = reconnected = False
        for packet in container.demux(v, a):
            if packet.pts is None:
                continue
            frames = packet.decode()
            if frames and not anchored and packet.stream.type == "video":
                writer.anchor(offset)
                anchored = True
            if (reconnect_at is not None and not reconnected and packet.stream.type == "video"
                    and packet.is_keyframe and float(packet.pts * packet.time_base) >= reconnect_at):
                writer.disconnect()
                writer.connect(v, a)
                writer.anchor(offset)
                reconnected = True
            writer.packet(packet)
    writer.close()
    return writer


def probe(path: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_type,codec_name,"
                          "pix_fmt", "-of", "json", str(path)], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def decoded(path: Path) -> tuple[list[float], int]:
    """Presentation times of every decoded picture, and the number of sound frames decoded (errors raise)."""
    times, sound = [], 0
    with av.open(str(path)) as container:
        for frame in container.decode(*container.streams):
            if isinstance(frame, av.VideoFrame):
                times.append(float(frame.pts * frame.time_base))
            else:
                sound += 1
    return sorted(times), sound


# ------------------------------------------------------------------------------------------------ recording


def test_segments_add_up_join_without_gaps_and_keep_the_sound(tmp_path, video):
    folder = recordings_dir(tmp_path, "cam")
    writer = record(video, folder, 4.0, offset=100.0, reconnect_at=10.0)
    assert list_segments(tmp_path, "missing") == []
    segments = _segments(folder)
    assert writer.stats.errors == 0 and len(segments) == writer.stats.segments == 6  # 0-4-8-10 | 10-14-18-20
    # Named by media time: the first picture at 100 s (the clock's offset), the last one ends at 120 s.
    assert segments[0].start == pytest.approx(100.0, abs=1e-3)
    assert segments[-1].end == pytest.approx(100.0 + SECONDS, abs=1.5 / FPS)
    for before, after in zip(segments, segments[1:], strict=False):
        assert abs(after.start - before.end) <= 1.0 / FPS + 1e-3, (before, after)  # no gap beyond a frame
    assert any(s.start == pytest.approx(110.0, abs=1e-3) for s in segments)  # the reconnect began one
    total = 0.0
    for i, segment in enumerate(segments):
        length = segment.end - segment.start
        if i in (0, len(segments) - 1):  # ffprobe (a process each) for two; PyAV reads the same libavformat duration
            info = probe(segment.path)
            kinds = {s["codec_type"]: s["codec_name"] for s in info["streams"]}
            assert kinds == {"video": "h264", "audio": "aac"}
            assert float(info["format"]["duration"]) == pytest.approx(length, abs=3.0 / FPS)
        with av.open(str(segment.path)) as container:
            assert container.duration / 1e6 == pytest.approx(length, abs=3.0 / FPS)
        times, sound = decoded(segment.path)
        assert len(times) == round(length * FPS) and sound > 0  # every picture decodes, sound too
        total += length
    assert total == pytest.approx(SECONDS, abs=1.5 / FPS)


def test_a_segment_that_starts_just_before_media_time_0_is_listed(tmp_path, video):
    # A live stream's first keyframe can come a frame before the first picture decoded (media time 0).
    folder = recordings_dir(tmp_path, "cam")
    record(video, folder, 10.0, offset=-0.033)
    segments = _segments(folder)
    assert [s.start for s in segments] == [-0.033, 9.967]  # each at its keyframe; the sound may run a little past
    assert segments[0].end == pytest.approx(9.967, abs=0.03) and segments[1].end == pytest.approx(19.967, abs=0.03)


def test_a_disk_that_refuses_segments_never_stops_the_stream_and_is_said_once(tmp_path, video, caplog):
    folder = recordings_dir(tmp_path, "cam")
    writer = SegmentWriter(folder, 2.0, "cam")
    shutil.rmtree(folder)
    folder.write_text("not a folder")  # every segment fails to open, as on a full or read-only disk
    with av.open(str(video)) as container, caplog.at_level("INFO", logger="lucy.ingest.recording"):
        stream = container.streams.video[0]
        writer.connect(stream, None)
        writer.anchor(0.0)
        for packet in container.demux(stream):
            if packet.pts is not None and float(packet.pts * packet.time_base) >= 10.0 and folder.is_file():
                folder.unlink()
                folder.mkdir()  # space again
            writer.packet(packet)
        writer.close()
    said = [r.getMessage() for r in caplog.records]
    assert writer.stats.errors == 10  # a segment tried at each keyframe of 0-9 s (one a second)
    assert sum("trying again at each keyframe" in m for m in said) == 1, said  # said once, not at every keyframe
    assert sum("recording again" in m for m in said) == 1, said
    assert [s.start for s in _segments(folder)] == [10.0, 12.0, 14.0, 16.0, 18.0]


def _segments(folder: Path) -> list:
    """The segments of a recording folder (``<data>/recordings/<stream>``)."""
    return list_segments(folder.parents[1], folder.name)


def test_a_part_left_by_a_killed_writer_is_repaired_or_dropped(tmp_path, video):
    folder = recordings_dir(tmp_path, "cam")
    record(video, folder, 4.0)
    closed = _segments(folder)
    # What kill -9 leaves: a fragmented MP4 cut in the middle of a fragment, and one with nothing whole in it.
    last = closed[-1]
    data = last.path.read_bytes()
    cut = folder / f"{last.start:012.3f}.mp4.part"
    cut.write_bytes(data[: len(data) * 2 // 3])
    last.path.unlink()
    empty = folder / "00000099.000.mp4.part"
    empty.write_bytes(data[:100])
    assert [s.open for s in list_segments(tmp_path, "cam", include_open=True)].count(True) == 2
    made = repair(folder)
    assert len(made) == 1 and not empty.exists() and not cut.exists()
    repaired = _segments(folder)[-1]
    assert repaired.path == made[0] and repaired.start == last.start and repaired.end is not None
    assert last.start < repaired.end < last.end
    span = file_span(repaired.path)
    assert span is not None and decoded(repaired.path)[0]  # playable up to its last whole fragment


# ------------------------------------------------------------------------------------------------ clips


def test_clip_from_the_recording_is_remuxed_across_segments(tmp_path, stored, video):
    folder = recordings_dir(stored.data, "cam")
    shutil.rmtree(folder, ignore_errors=True)
    record(video, folder, 3.0)
    try:
        made = make_clip(open_frames(stored), stored.data, "cam", 4.5, 11.0, tmp_path / "c.mp4", max_seconds=300)
    finally:
        shutil.rmtree(folder)
    assert made.origin == "recording" and made.filename == "cam_4.5-11s.mp4"
    # It begins at 4.5 s, not at the keyframe before it (4.0 s): the pictures from that keyframe on are in the file,
    # for the decoder, and an edit list keeps them out of view.
    assert made.start == pytest.approx(4.5, abs=0.01)
    times, sound = decoded(made.path)
    assert sound > 0 and np.all(np.diff(times) <= 1.0 / FPS + 1e-3)  # no hole where segments join
    assert times[0] == pytest.approx(0.0, abs=1.0 / FPS)  # the first picture shown is the one at 4.5 s
    length = times[-1] - times[0] + 1.0 / FPS
    assert length == pytest.approx(6.5, abs=1.0 / FPS + 1e-3)  # what was asked
    info = probe(made.path)
    assert float(info["format"]["duration"]) == pytest.approx(6.5, abs=0.15)


def test_clip_from_the_source_file_then_from_stored_frames(tmp_path, stored, video):
    frames = open_frames(stored)
    made = make_clip(frames, stored.data, "cam", 8.0, 14.0, tmp_path / "s.mp4", max_seconds=300)
    assert made.origin == "source" and made.start == pytest.approx(8.0, abs=0.01)
    times, sound = decoded(made.path)
    assert sound > 0 and times[-1] - times[0] + 1.0 / FPS == pytest.approx(6.0, abs=1.0 / FPS + 1e-3)

    moved = video.with_name("moved.mp4")
    video.rename(moved)  # the source is gone: the stored frames are what is left
    try:
        made = make_clip(frames, stored.data, "cam", 8.0, 14.0, tmp_path / "f.mp4", max_seconds=300)
    finally:
        moved.rename(video)
    assert made.origin == "frames"
    info = probe(made.path)
    assert info["streams"][0]["codec_name"] in ("h264", "mpeg4") and info["streams"][0]["pix_fmt"] == "yuv420p"
    times, _ = decoded(made.path)
    assert len(times) == 12  # 2 fps for 6 s
    assert float(info["format"]["duration"]) == pytest.approx(6.0, abs=0.05)
    with av.open(str(made.path)) as container:  # the pictures are the stored ones: the blue scene (8-12 s)
        first = next(container.decode(video=0)).to_ndarray(format="rgb24").reshape(-1, 3).mean(axis=0)
    assert first[2] > first[0] + 50, first


def test_a_clip_served_before_is_served_again_until_its_footage_changes(tmp_path, stored, video, monkeypatch):
    cache = ClipCache(tmp_path / "clips")
    frames = open_frames(stored)
    cuts: list[float] = []
    remux = clips._remux
    monkeypatch.setattr(clips, "_remux", lambda *args: cuts.append(args[1]) or remux(*args))

    def serve(start: float, end: float):
        scratch = tmp_path / f"scratch-{len(cuts)}.mp4"
        return cache.clip(frames, stored.data, "cam", start, end, max_seconds=300, scratch=scratch)

    first, kept = serve(8.0, 14.0)
    assert kept and first.origin == "source" and first.path.parent == tmp_path / "clips" / "cam" and len(cuts) == 1
    again, kept = serve(8.0, 14.0)  # a browser's second request (a range of it): no new cut
    assert kept and again.path == first.path and (again.start, again.end) == (first.start, first.end)
    assert len(cuts) == 1 and decoded(again.path)[0]
    assert serve(8.0, 15.0)[0].path != first.path and len(cuts) == 2  # another period: another clip

    folder = recordings_dir(stored.data, "cam")  # new footage of the period: recorded segments
    shutil.rmtree(folder, ignore_errors=True)
    record(video, folder, 3.0)
    try:
        recorded, kept = serve(8.0, 14.0)
    finally:
        shutil.rmtree(folder)
    assert kept and recorded.origin == "recording" and recorded.path != first.path and len(cuts) == 3

    writer = SegmentWriter(folder, 3.0, "cam")  # a recording still being written: that clip is not kept
    try:
        with av.open(str(video)) as container:
            v = container.streams.video[0]
            writer.connect(v, None)
            writer.anchor(0.0)
            for packet in container.demux(v):
                if packet.pts is not None and float(packet.pts * packet.time_base) < 12.0:
                    packet.decode()
                    writer.packet(packet)
        assert any(s.open for s in list_segments(stored.data, "cam", include_open=True))
        _, kept = serve(8.0, 14.0)
    finally:
        writer.close()
        shutil.rmtree(folder)
    assert not kept and len(cuts) == 4

    small = ClipCache(tmp_path / "small", max_bytes=first.size + 1)  # room for one clip: the least recent goes
    for start in (2.0, 4.0):
        small.clip(frames, stored.data, "cam", start, start + 6.0, max_seconds=300, scratch=tmp_path / "s.mp4")
    assert len(list((tmp_path / "small" / "cam").glob("*.mp4"))) == 1
    small.forget("cam")  # the stream was purged
    assert not (tmp_path / "small" / "cam").exists()
    off = ClipCache(tmp_path / "off", max_bytes=0)  # nothing kept: the clip is made into the scratch file
    made, kept = off.clip(frames, stored.data, "cam", 8.0, 14.0, max_seconds=300, scratch=tmp_path / "o.mp4")
    assert not kept and made.path == tmp_path / "o.mp4" and not (tmp_path / "off").exists()


def test_bad_clip_requests_say_why(tmp_path, stored):
    frames = open_frames(stored)

    def clip(start: float, end: float, stream: str = "cam") -> None:
        make_clip(frames, stored.data, stream, start, end, tmp_path / "x.mp4", max_seconds=60)

    for start, end, says in ((5, 5, "must be after"), (9, 3, "must be after"), (-1, 3, "must not be negative"),
                             (0, 61, "at most 60 s"), (float("nan"), 3, "numbers")):
        with pytest.raises(ClipRangeError, match=says):
            clip(start, end)
    with pytest.raises(StreamNotFound, match="no stream 'nope'"):
        clip(0, 5, "nope")
    with pytest.raises(InputError, match="bad stream name"):
        clip(0, 5, "../etc")
    with pytest.raises(StreamNotFound, match=r"nothing stored from 30 to 40 s \(it covers 0.0-20.0 s\)"):
        clip(30, 40)
    assert not (tmp_path / "x.mp4").exists()
    assert clip_url("cam", 4.5, 11.0) == "/v1/streams/cam/clip?from=4.5&to=11"


# ------------------------------------------------------------------------------------------------ retention


@contextlib.contextmanager
def _recorded(stored: LucySettings, video: Path, **recording: float) -> Iterator[tuple[LucySettings, Path]]:
    """``stored``'s settings with ``recording`` changes and no free-space floor, and the recordings folder of "cam"
    holding ``video`` recorded afresh in 2-s segments (removed afterwards)."""
    settings = stored.model_copy(update={
        "recording": stored.recording.model_copy(update=recording),
        "retention": stored.retention.model_copy(update={"min_free_bytes": 0})})
    folder = recordings_dir(settings.data, "cam")
    shutil.rmtree(folder, ignore_errors=True)
    record(video, folder, 2.0)
    try:
        yield settings, folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _press(monkeypatch: pytest.MonkeyPatch, folder: Path, floor: int, need: int) -> None:
    """A disk whose free space is ``need`` bytes short of ``floor`` and grows as the folder's segments go."""
    recorded = sum(s.size for s in _segments(folder))

    def usage(_path: object) -> shutil._ntuple_diskusage:
        free = floor - need + (recorded - sum(s.size for s in _segments(folder)))
        return shutil._ntuple_diskusage(100 * floor, 100 * floor - free, free)

    monkeypatch.setattr(retention.shutil, "disk_usage", usage)


def test_retention_deletes_old_segments_and_the_oldest_first_under_disk_pressure(tmp_path, stored, video,
                                                                               monkeypatch):
    with _recorded(stored, video, retention_days=1e-4) as (settings, folder):
        before = _segments(folder)
        frames = open_frames(settings)
        # Age: 1e-4 days is 8.64 s behind the newest segment's end (20 s): segments ending by 11.36 s go.
        report = RetentionMaintainer(settings, frames=frames).run_once()
        kept = _segments(folder)
        assert [s.start for s in kept] == [s.start for s in before if s.end > SECONDS - 8.64]
        assert report.freed[("cam", "recording_expired")] == sum(s.size for s in before if s.end <= SECONDS - 8.64)

        # Disk pressure: free space grows as segments go; the floor needs two of them gone, and no frame.
        floor = 10_000_000
        need = sum(s.size for s in kept[:2])
        _press(monkeypatch, folder, floor, need)
        settings = settings.model_copy(update={"retention": settings.retention.model_copy(
            update={"min_free_bytes": floor}), "recording": stored.recording})
        report = RetentionMaintainer(settings, frames=frames).run_once()
        assert [s.start for s in _segments(folder)] == [s.start for s in kept[2:]]
        assert report.freed == {("cam", "recording_min_free"): need}
        assert frames.open("cam").available_from() == 0.0  # every frame is still there


class _Shown:
    """The memory retention asks: everything captioned, and the spans alerts and answers showed."""

    def __init__(self, spans: list[tuple[float, float]]) -> None:
        self.spans = spans

    def captioned_until(self, stream: str) -> float:
        return math.inf

    def event_spans(self, stream: str) -> list[tuple[float, float]]:
        return sorted(self.spans)


def test_segments_people_were_shown_are_kept_longer_and_go_last(tmp_path, stored, video, monkeypatch):
    with _recorded(stored, video, retention_days=1e-4, event_retention_days=1.0) as (settings, folder):
        before = _segments(folder)
        frames = open_frames(settings)
        old = [s for s in before if s.end <= SECONDS - 8.64]  # past retention_days (8.64 s behind the newest end)
        shown = old[1]
        memory = _Shown([(shown.start + 0.5, shown.start + 0.6)])  # an alert inside one old segment
        RetentionMaintainer(settings, frames=frames, memory=memory).run_once()
        assert [s.start for s in _segments(folder)] == [shown.start] + [s.start for s in before if s not in old]
        # Past event_retention_days too, it goes.
        short = settings.model_copy(update={"recording": settings.recording.model_copy(
            update={"event_retention_days": 1e-4})})  # as long as retention_days: kept no longer
        RetentionMaintainer(short, frames=frames, memory=memory).run_once()
        assert shown.start not in [s.start for s in _segments(folder)]

        # Under disk pressure the shown segment is deleted after the others, though it is the oldest.
        shutil.rmtree(folder)
        record(video, folder, 2.0)
        segments = _segments(folder)
        memory = _Shown([(segments[0].start, segments[0].end)])
        floor = 10_000_000
        need = sum(s.size for s in segments[:3])  # three segments' worth
        _press(monkeypatch, folder, floor, need)
        pressed = stored.model_copy(update={"retention": stored.retention.model_copy(
            update={"min_free_bytes": floor})})
        stats = RetentionStats()
        report = RetentionMaintainer(pressed, frames=frames, memory=memory, stats=stats).run_once()
        left = [s.start for s in _segments(folder)]
        assert segments[0].start in left
        assert sum(s.size for s in segments if s.start not in left) >= need
        assert report.freed[("cam", "recording_min_free")] == sum(s.size for s in segments if s.start not in left)
        recorded_now, freed = stats.recording_snapshot()
        assert recorded_now["cam"] == sum(s.size for s in _segments(folder))
        assert freed == {("cam", "min_free"): report.freed[("cam", "recording_min_free")]}
        exporter = MetricsExporter()
        exporter.retention = stats
        exporter.update([])
        text = exporter.render().decode()
        assert f'lucy_recording_stored_bytes{{stream="cam"}} {float(recorded_now["cam"])}' in text
        assert (f'lucy_recording_freed_bytes_total{{reason="min_free",stream="cam"}} '
                f'{float(freed[("cam", "min_free")])}') in text


def test_a_streams_own_recording_choice_overrides_the_servers(tmp_path):
    from lucy.runtime.registry import StreamRegistry, StreamSpec
    from lucy.runtime.streams import stream_settings

    server = load_settings(data=tmp_path, **{"recording.segment_seconds": 4.0})
    assert not server.recording.enabled  # off by default
    spec = StreamSpec(name="door", source="rtsp://cam/1", preset="live", captioner="none", recording=True)
    own = stream_settings(server, spec)
    assert own.recording.enabled and own.recording.segment_seconds == 4.0
    off = stream_settings(server.model_copy(update={"recording": own.recording}),
                          StreamSpec(name="yard", source="rtsp://cam/2", preset="live", captioner="none",
                                     recording=False))
    assert not off.recording.enabled
    registry = StreamRegistry(tmp_path)  # the choice survives a restart of the server
    registry.put(spec)
    assert registry.load()[0].recording is True
