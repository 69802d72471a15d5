"""Transcription figures beside captioning: the progress record, the Prometheus exporter and the API's status."""

from __future__ import annotations

from lucy.metrics import CaptionCallStats, MetricsExporter, QuestionStats, StreamProgress
from lucy.metrics.progress import SpeechProgress
from lucy.metrics.stats import StreamSample
from lucy.runtime.status import stream_status
from lucy.service.schemas import StreamStatus


def sample(progress: StreamProgress) -> StreamSample:
    return StreamSample("cam", "recording", progress, CaptionCallStats(), QuestionStats())


def test_exporter_shows_transcription_next_to_captioning():
    exporter = MetricsExporter()
    heard = SpeechProgress(has_audio=True, transcribed=3, lines=2, transcribed_until=120.0, realtime_factor=40.0,
                           pending=1, failures=1, lag=30.5)
    exporter.update([sample(StreamProgress(speech=heard))])
    text = exporter.render().decode()
    for line in ('lucy_speech_spans_total{stream="cam"} 3.0', 'lucy_speech_lines_total{stream="cam"} 2.0',
                 'lucy_speech_failures_total{stream="cam"} 1.0', 'lucy_speech_lag_seconds{stream="cam"} 30.5',
                 'lucy_speech_queue_depth_spans{stream="cam"} 1.0',
                 'lucy_speech_transcribed_until_seconds{stream="cam"} 120.0',
                 'lucy_speech_realtime_factor_ratio{stream="cam"} 40.0'):
        assert line in text
    # A new run counts from zero again: the counters keep going up.
    exporter.update([sample(StreamProgress(speech=SpeechProgress(has_audio=True, transcribed=1)))])
    assert 'lucy_speech_spans_total{stream="cam"} 4.0' in exporter.render().decode()


def test_a_stream_without_a_transcriber_shows_zeros_and_no_speech_status():
    exporter = MetricsExporter()
    exporter.update([sample(StreamProgress())])
    assert 'lucy_speech_lag_seconds{stream="cam"} 0.0' in exporter.render().decode()
    status = StreamStatus(**stream_status("cam", "/v.mp4", StreamProgress(), QuestionStats()))
    assert status.speech is None


def test_status_carries_the_speech_figures():
    progress = StreamProgress(speech=SpeechProgress(has_audio=True, lines=4, transcribed_until=60.0, lag=2.0))
    status = StreamStatus(**stream_status("cam", "/v.mp4", progress, QuestionStats()))
    assert status.speech is not None and status.speech.lines == 4 and status.speech.transcribed_until == 60.0
    assert status.speech.lag_seconds == 2.0
