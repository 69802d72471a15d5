"""The one per-stream progress record, filled by each stage: the detect stage's and the watch checker's figures reach
the Prometheus exporter and the API's status beside ingest, captioning and speech; a recorder fills them."""

from __future__ import annotations

from contextlib import closing

from lucy.config import load_settings
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.metrics import CaptionCallStats, MetricsExporter, QuestionStats, StreamProgress
from lucy.metrics.progress import DetectProgress, WatchProgress
from lucy.metrics.stats import StreamSample
from lucy.recorder import StreamRecorder
from lucy.runtime.status import stream_status
from lucy.service.schemas import StreamStatus
from lucy.synth import write_video
from lucy.wiring import open_frames


def sample(progress: StreamProgress) -> StreamSample:
    return StreamSample("cam", "recording", progress, CaptionCallStats(), QuestionStats())


def test_detect_and_watch_figures_are_exported_and_in_the_status():
    detect = DetectProgress(frames_detected=40, frames_dropped=3, seconds_per_frame=0.036, observed_until=20.0,
                            lag=1.5, tracks=7)
    watch = WatchProgress(checks=6, yes=1, no=4, maybe=1, confirmations=2, alerts=1, errors=0, llm_calls=8)
    exporter = MetricsExporter()
    exporter.update([sample(StreamProgress(detect=detect, watch=watch))])
    text = exporter.render().decode()
    for line in ('lucy_detect_frames_total{stream="cam"} 40.0', 'lucy_detect_frames_dropped_total{stream="cam"} 3.0',
                 'lucy_detect_seconds_per_frame{stream="cam"} 0.036', 'lucy_detect_lag_seconds{stream="cam"} 1.5',
                 'lucy_detect_observed_until_seconds{stream="cam"} 20.0', 'lucy_watch_checks_total{stream="cam"} 6.0',
                 'lucy_watch_verdicts_total{stream="cam",verdict="yes"} 1.0',
                 'lucy_watch_verdicts_total{stream="cam",verdict="no"} 4.0',
                 'lucy_watch_confirmations_total{stream="cam"} 2.0', 'lucy_watch_llm_calls_total{stream="cam"} 8.0'):
        assert line in text
    exporter.update([sample(StreamProgress(watch=WatchProgress(checks=2, no=2)))])  # a new run counts from 0 again
    text = exporter.render().decode()
    assert 'lucy_watch_checks_total{stream="cam"} 8.0' in text
    assert 'lucy_watch_verdicts_total{stream="cam",verdict="no"} 6.0' in text
    exporter.update([])  # the stream is gone: so are its series, labelled by verdict too
    assert 'stream="cam"' not in exporter.render().decode()
    status = StreamStatus(**stream_status("cam", "/v.mp4", StreamProgress(detect=detect, watch=watch),
                                          QuestionStats()))
    assert status.detect is not None and status.detect.frames == 40 and status.detect.observed_until == 20.0
    assert status.watch is not None and status.watch.checks == 6 and status.watch.yes == 1


def test_a_recorder_fills_the_watch_figures_of_its_checker(tmp_path):
    settings = load_settings(data=tmp_path / "data")
    video = write_video(tmp_path / "v.mp4", duration=70, fps=5, width=160, height=90)
    with closing(SQLiteMemoryStore.for_data(settings)) as memory:
        memory.add_watch("cam", "Tell me when a red van stops at the door")
        recorder = StreamRecorder(settings, str(video), "cam", memory, PixelsCaptioner(settings.captioner.pixels),
                                  frames=open_frames(settings))
        assert recorder.progress().watch == WatchProgress()  # a checker runs: its figures are there from the start
        recorder.run()
        watch = recorder.progress().watch
        assert watch is not None and watch.checks >= 1 and watch.yes + watch.no + watch.maybe >= 1
        assert recorder.progress().detect is None  # the suite's default: no detect stage
