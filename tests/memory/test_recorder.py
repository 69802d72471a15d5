"""The stream recorder that `lucy ingest`, `lucy demo` and the service's stream workers share: one set of rules
for the drain, stop, outcome and progress of a recording, on a real ingest of a generated file."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lucy.config import load_settings
from lucy.memory.embedders import Embedder
from lucy.memory.retrieval import IndexWriter
from lucy.metrics import StreamProgress
from lucy.recorder import Backlog, Outcome, RecorderObserver, StreamRecorder
from lucy.wiring import open_frames, open_memory

SPANS = [(0.0, 60.0), (60.0, 120.0), (120.0, 180.0), (180.0, 240.0), (240.0, 270.0)]


def make_settings(tmp_path: Path):
    return load_settings(data=tmp_path / "data", **{"memory.retry_initial_seconds": 0.05,
                                                    "memory.retry_max_seconds": 0.2, "captioner.max_in_flight": 2})


class Seen(RecorderObserver):
    """What an observer is told, hook by hook."""

    def __init__(self) -> None:
        self.started: list[StreamProgress] = []
        self.commits: list[StreamProgress] = []
        self.ended: list[StreamProgress] = []
        self.drains = 0

    def on_started(self, progress: StreamProgress) -> None:
        self.started.append(progress)

    def on_commit(self, progress: StreamProgress) -> None:
        self.commits.append(progress)

    def on_ingest_end(self, progress: StreamProgress) -> None:
        self.ended.append(progress)

    def on_drain(self, progress: StreamProgress) -> None:
        self.drains += 1


def test_a_file_is_recorded_and_its_captions_drained(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    captioner, seen = clip_captioner(delay=0.02), Seen()
    recorder = StreamRecorder(settings, str(five_span_video), "cam", memory, captioner, observer=seen,
                              frames=open_frames(settings))
    ended = recorder.run()
    assert ended.outcome is Outcome.FINISHED and ended.backlog is Backlog.CAUGHT_UP and ended.uncaptioned == 0
    assert ended.ingest.complete and ended.ingest.frames == 540
    assert [(n.start, n.end) for n in memory.nodes("cam", level="coarse")] == SPANS
    assert captioner.closed  # the recorder owns the captioner it was given
    assert len(seen.started) == 1 and seen.started[0].live is False and seen.started[0].ingest.started
    assert len(seen.commits) >= 2 and seen.commits[-1].ingest.committed == 540
    [end] = seen.ended
    assert end.ingest.ingested_until == 270.0 and end.caption is not None
    final = recorder.progress()
    assert final.caption is not None and final.caption.coarse_nodes == 5 and final.caption.captioned_until == 270.0
    memory.close()


def test_the_end_of_a_file_is_told_with_every_span_counted(tmp_path, five_span_video, clip_captioner):
    """Whoever hears that a file has ended (the API's ``finished`` state) hears figures that count its last,
    partial span too: the builder has looked at the ended stream first (issue 9, bug 2)."""
    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    seen = Seen()
    recorder = StreamRecorder(settings, str(five_span_video), "cam", memory, clip_captioner(fail=lambda _: True),
                              observer=seen, give_up_seconds=0.5, frames=open_frames(settings))
    ended = recorder.run()
    [end] = seen.ended
    assert end.caption is not None and end.caption.pending == 5 and end.caption.captioned_until == 0.0
    assert ended.outcome is Outcome.FINISHED and ended.backlog is Backlog.CAPTIONER_DOWN
    assert ended.uncaptioned == 5 and "scripted failure" in (ended.last_caption_error or "")
    assert seen.drains > 0
    memory.close()


def test_a_stop_during_the_drain_ends_the_recording_as_stopped(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    never = threading.Event()  # the captioner never answers

    class StopWhileDraining(RecorderObserver):
        def on_drain(self, progress: StreamProgress) -> None:
            recorder.stop()

    recorder = StreamRecorder(settings, str(five_span_video), "cam", memory, clip_captioner(gate=never),
                              observer=StopWhileDraining(), frames=open_frames(settings))
    began = time.monotonic()
    ended = recorder.run()
    assert time.monotonic() - began < 60
    assert ended.outcome is Outcome.STOPPED and ended.backlog is Backlog.INTERRUPTED
    assert ended.ingest.complete and ended.uncaptioned == 5  # every frame kept; the spans wait for the next run
    memory.close()


def test_a_recording_stopped_before_it_runs_stores_nothing(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    captioner = clip_captioner()
    recorder = StreamRecorder(settings, str(five_span_video), "cam", memory, captioner, frames=open_frames(settings))
    recorder.stop()
    ended = recorder.run()
    assert ended.outcome is Outcome.STOPPED and ended.backlog is None and ended.ingest.new_frames == 0
    assert captioner.calls == 0 and captioner.closed
    memory.close()


def test_without_a_captioner_only_frames_are_recorded(tmp_path, five_span_video):
    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    recorder = StreamRecorder(settings, str(five_span_video), "cam", memory, None, frames=open_frames(settings))
    ended = recorder.run()
    assert ended.outcome is Outcome.FINISHED and ended.backlog is None and ended.uncaptioned is None
    assert ended.ingest.frames == 540 and recorder.progress().caption is None
    assert memory.count("cam") == 0
    memory.close()


class HashEmbedder(Embedder):
    """A vector per text from its hash: no model, any text."""

    name, model, dim = "hash", "hash-1", 8

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        vector = np.random.default_rng(abs(hash(text))).normal(size=self.dim).astype(np.float32)
        return vector / np.linalg.norm(vector)


def test_the_recorders_index_writer_stores_vectors_and_keeps_none(tmp_path, five_span_video, clip_captioner):
    """What a stream's builder embeds goes to the store; the writer never reads a vector back, so its index caches none
    (a cache there would grow with the stream for as long as the worker runs)."""
    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    recorder = StreamRecorder(settings, str(five_span_video), "cam", memory, clip_captioner(),
                              frames=open_frames(settings), embedder=HashEmbedder())
    assert recorder.builder is not None
    [writer] = [listener for listener in recorder.builder.listeners if isinstance(listener, IndexWriter)]
    assert recorder.run().outcome is Outcome.FINISHED
    ids = [n.id for n in memory.nodes("cam", level="coarse")]
    assert len(ids) == 5 and len(memory.vectors("hash-1", ids)) == 5
    assert writer.index.embedded == 5 and len(writer.index._cache) == 0
    memory.close()
