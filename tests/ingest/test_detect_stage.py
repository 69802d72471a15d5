"""The detect stage of ingest: full-resolution frames at detect.fps, tracked, stored as observations; resume, errors,
a live source that never waits, and the builder waiting for the observed mark."""

from __future__ import annotations

import threading
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.ingest import Ingestor
from lucy.ingest.detect import DetectStage
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.perception.objects import Detection
from lucy.synth import Shape, write_video
from lucy.wiring import open_frames

MAGENTA = (255, 0, 255)


class MagentaDetector:
    """Finds magenta squares by their colour: a small real detector on pixels, so the stage's frames are checked
    (their size too: it records the resolution it was given)."""

    name = "magenta"
    labels = frozenset({"person"})

    def __init__(self, fail_after: int | None = None, delay: float = 0.0) -> None:
        self.sizes: list[tuple[int, int]] = []
        self.fail_after = fail_after
        self.delay = delay

    def detect(self, frame: np.ndarray) -> list[Detection]:
        if self.fail_after is not None and len(self.sizes) >= self.fail_after:
            raise RuntimeError("the detector broke")
        time.sleep(self.delay)
        self.sizes.append((frame.shape[1], frame.shape[0]))
        mask = (frame[..., 0] > 200) & (frame[..., 1] < 60) & (frame[..., 2] > 200)
        if mask.sum() < 20:
            return []
        ys, xs = np.nonzero(mask)
        h, w = mask.shape
        return [Detection("person", (xs.min() / w, ys.min() / h, (xs.max() + 1) / w, (ys.max() + 1) / h), 0.9)]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("detect")
    return write_video(d / "two.mp4", duration=20, fps=10, width=1280, height=720,
                       shapes=[Shape(2, 8, MAGENTA, x=0.6, y=0.5), Shape(12, 18, MAGENTA, x=0.2, y=0.3)])


def record(settings, source: Path, detector, stream: str = "s", **kwargs):
    memory = SQLiteMemoryStore.for_data(settings)
    try:
        ingestor = Ingestor(settings, str(source), stream, frames=open_frames(settings), detector=detector,
                            observations=memory, **kwargs)
        return ingestor, ingestor.run(), memory
    except BaseException:
        memory.close()
        raise


def test_a_file_is_observed_at_detect_fps_on_full_resolution_frames(tmp_path, clip):
    settings = load_settings(data=tmp_path / "data")
    detector = MagentaDetector()
    ingestor, result, memory = record(settings, clip, detector)
    with closing(memory):
        assert result.complete
        assert detector.sizes and set(detector.sizes) == {(1280, 720)}  # not the stored 640 x 360
        assert len(detector.sizes) == pytest.approx(20 * settings.detect.fps, abs=1)
        assert memory.observed_until("s") == pytest.approx(result.media_seconds, abs=0.11)
        tracks = memory.object_tracks("s")
        assert len(tracks) == 2  # one object per square, not one per frame
        first, second = tracks
        assert first.first_seen == pytest.approx(2, abs=0.6) and first.last_seen == pytest.approx(7.5, abs=0.6)
        assert second.first_seen == pytest.approx(12, abs=0.6)
        assert not first.moving and not first.active and first.track_id < second.track_id
        counts = memory.object_counts("s", 0, 20)
        assert len(counts) == len(detector.sizes)
        assert {c.counts.get("person", 0) for c in counts if 3 <= c.time < 7} == {1}
        assert {c.counts.get("person", 0) for c in counts if 9 <= c.time < 11} == {0}
        # counted from the first frame it was seen in, not from the one that confirmed it (settled counts)
        for track in tracks:
            assert {c.counts.get("person", 0) for c in counts if track.first_seen <= c.time <= track.last_seen} == {1}
        assert memory.object_track("s", first.track_id).snapshot[:2] == b"\xff\xd8"  # a JPEG
        progress = ingestor.stats  # the stage's figures reach the progress record
        assert ingestor.detect is not None and ingestor.detect.stats.snapshot().frames_detected == len(counts)
        assert progress.frames_stored == result.new_frames


def test_a_resumed_stream_goes_on_with_new_ids_after_the_stored_ones(tmp_path, clip):
    settings = load_settings(data=tmp_path / "data")
    _, first_run, memory = record(settings, clip, MagentaDetector())
    with closing(memory):
        ids = [t.track_id for t in memory.object_tracks("s")]
        store = open_frames(settings).open_writer("s")
        store.mark_finished(complete=False, lost=None)  # as if the run had been cut short: ingest resumes it
    # a source that holds the same picture is resumed after its last stored frame: nothing is observed twice
    _, second_run, memory = record(settings, clip, MagentaDetector())
    with closing(memory):
        assert second_run.new_frames == 0
        assert [t.track_id for t in memory.object_tracks("s")] == ids
        assert memory.next_track_id("s") == max(ids) + 1
        assert memory.observed_until("s") >= first_run.media_seconds - 0.11


def test_a_failing_detector_fails_the_run_and_keeps_the_frames(tmp_path, clip):
    settings = load_settings(data=tmp_path / "data")
    with pytest.raises(RuntimeError, match="the detector broke"):
        record(settings, clip, MagentaDetector(fail_after=5))
    info = open_frames(settings).open("s").info()
    assert info.frames > 0  # what was stored is kept


def test_a_live_stage_drops_the_oldest_frame_instead_of_waiting(tmp_path):
    settings = load_settings(data=tmp_path / "data", **{"detect.queue_frames": 2})
    with closing(SQLiteMemoryStore.for_data(settings)) as memory:
        detector = MagentaDetector(delay=0.2)
        stage = DetectStage(settings.detect, "live", detector, memory, live=True).start(None)
        frame = np.zeros((90, 160, 3), np.uint8)
        started = time.monotonic()
        for k in range(20):
            stage.offer(k * 0.5, frame)
        offered_in = time.monotonic() - started
        stage.close(None)
        stats = stage.stats.snapshot()
        assert stats.frames_dropped > 0 and stats.frames_detected + stats.frames_dropped == 20
        assert offered_in < 20 * 0.2  # it never waited for every frame to be detected
        assert memory.observed_until("live") == pytest.approx(max(c.time for c in memory.object_counts("live", 0, 99))
                                                              + 0.5)


def test_the_builder_captions_a_span_only_once_it_is_observed(tmp_path, clip):
    from lucy.memory.builder import CoarseBuilder
    from lucy.memory.captioners.pixels import PixelsCaptioner

    settings = load_settings(data=tmp_path / "data")
    frames = open_frames(settings)
    with closing(SQLiteMemoryStore.for_data(settings)) as memory:
        Ingestor(settings, str(clip), "s", frames=frames).run()  # frames stored, nothing observed yet
        mark = {"until": 0.0}
        builder = CoarseBuilder(settings, "s", memory, PixelsCaptioner(settings.captioner.pixels), frames=frames,
                                poll_seconds=0.05, observed_until=lambda: mark["until"])
        with builder:
            assert builder.sync(10) and builder.sync(10)  # it has looked at the closed spans twice ...
            stats = builder.stats.snapshot()  # ... and queued none of them: they wait for the mark
            assert stats.pending > 0 and stats.queued == 0 and stats.in_flight == 0 and stats.captioned == 0
            mark["until"] = 1e9
            builder.on_commit()
            assert builder.drain(timeout=60)
        assert memory.count("s", level="coarse") > 0


def test_stop_during_detection_ends_the_run(tmp_path, clip):
    settings = load_settings(data=tmp_path / "data")
    memory = SQLiteMemoryStore.for_data(settings)
    with closing(memory):
        ingestor = Ingestor(settings, str(clip), "s", frames=open_frames(settings), detector=MagentaDetector(delay=0.1),
                            observations=memory)
        threading.Timer(0.5, ingestor.stop).start()
        result = ingestor.run()
        assert not result.complete
        assert memory.observed_until("s") == pytest.approx(result.media_seconds, abs=0.6)


def test_frames_kept_for_both_samplers_are_converted_without_a_hang(tmp_path):
    # Frames kept by both samplers were converted by the detect stage and the writer at the same time, and two
    # conversions of one decoded frame at once deadlocked or crashed in FFmpeg (seen with small frames, as the
    # demo's, and under load on live 1080p cameras); now the writer converts both. Several runs, as it did not
    # happen every time.
    clip = write_video(tmp_path / "small.mp4", duration=30, fps=30, width=320, height=180)
    for run in range(3):
        settings = load_settings(data=tmp_path / f"data{run}")
        with closing(SQLiteMemoryStore.for_data(settings)) as memory:
            ingestor = Ingestor(settings, str(clip), "s", frames=open_frames(settings), detector=MagentaDetector(),
                                observations=memory)
            worker = threading.Thread(target=ingestor.run, daemon=True)
            worker.start()
            worker.join(90)
            assert not worker.is_alive(), f"run {run} hung"
            assert memory.observed_until("s") == pytest.approx(30, abs=0.6)
