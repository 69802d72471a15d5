"""Pieces of the service that need no server: metrics mapping, the stream list, events, config, validation."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from lucy.config import load_settings
from lucy.errors import InvalidStream
from lucy.memory.nodes import MemoryNode
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.metrics import (
    CaptionCallStats,
    CaptionProgress,
    IngestProgress,
    MetricsExporter,
    QuestionRecord,
    QuestionStats,
    StreamProgress,
    StreamSample,
)
from lucy.runtime.events import EventBus, NodeAnnouncer
from lucy.runtime.messages import RunEnd, StateChange, StreamState, WorkerExit
from lucy.runtime.registry import StreamRegistry, StreamSpec
from lucy.runtime.streams import ManagedStream, StreamManager
from lucy.service.chat import answer_text, read_request
from lucy.service.errors import InvalidRequest
from lucy.service.schemas import ChatRequest
from lucy.wiring import open_frames, open_worker_stores


def _samples(exporter: MetricsExporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(exporter.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_exporter_maps_figures_and_survives_restarts() -> None:
    exporter = MetricsExporter()
    calls, questions = CaptionCallStats(), QuestionStats()
    calls.record(0.3, ok=True, prompt_tokens=100, completion_tokens=20)
    calls.record(12.0, ok=False)
    questions.started()
    questions.finished(QuestionRecord(latency_seconds=1.5, iterations=2, llm_calls=5, caption_calls=7,
                                      confident=True))
    questions.started()
    questions.finished(QuestionRecord(latency_seconds=0.2, iterations=0, llm_calls=1, caption_calls=0,
                                      confident=False))
    progress = StreamProgress(
        live=False, ingest=IngestProgress(frames_decoded=100, frames_stored=10, media_start=0.0, ingested_until=5.0,
                                          decode_fps=50.0, realtime_factor=2.5, reconnects=1),
        caption=CaptionProgress(captioned=3, pending=4, captioned_until=3.0, lag=2.0))
    exporter.update([StreamSample("cam", "recording", progress, calls, questions)])
    # The stream restarted: its run counters start again from 0; the exported counters keep growing.
    again = StreamProgress(ingest=IngestProgress(frames_decoded=30, frames_stored=4, media_start=0.0,
                                                 ingested_until=2.0))
    exporter.update([StreamSample("cam", "recording", again, calls, questions)])
    s = _samples(exporter)
    cam = (("stream", "cam"),)
    assert s[("lucy_ingest_frames_decoded_total", cam)] == 130
    assert s[("lucy_ingest_frames_stored_total", cam)] == 14
    assert s[("lucy_ingest_media_seconds_total", cam)] == 7.0
    assert s[("lucy_ingest_reconnects_total", cam)] == 1
    assert s[("lucy_caption_requests_total", cam)] == 2
    assert s[("lucy_caption_failures_total", cam)] == 1
    assert s[("lucy_caption_prompt_tokens_total", cam)] == 100
    assert s[("lucy_questions_total", cam)] == 2
    assert s[("lucy_questions_confident_total", cam)] == 1
    assert s[("lucy_question_confident_ratio", cam)] == 0.5
    # Each event was observed once, into explicit buckets.
    assert s[("lucy_caption_latency_seconds_count", cam)] == 2
    assert s[("lucy_caption_latency_seconds_bucket", (("le", "0.5"), ("stream", "cam")))] == 1
    assert s[("lucy_caption_latency_seconds_bucket", (("le", "20.0"), ("stream", "cam")))] == 2
    assert s[("lucy_question_latency_seconds_count", cam)] == 2
    assert s[("lucy_question_caption_calls_sum", cam)] == 7
    assert s[("lucy_stream_state", cam)] == 2
    assert s[("lucy_streams", ())] == 1
    # Every series of Lucy's own carries the lucy_ prefix and is labelled by the stream only (build info aside; a
    # histogram's buckets by "le", the watch checks' verdicts by "verdict"); process_* and python_* come from
    # prometheus_client's process and platform collectors.
    assert all(name.startswith(("lucy_", "process_", "python_")) for name, _ in s)
    assert {k for name, labels in s if name.startswith("lucy_") and name != "lucy_build_info"
            for k, _ in labels} <= {"stream", "le", "verdict"}
    assert {k for name, labels in s if name == "lucy_watch_verdicts_total" for k, _ in labels} == {"stream",
                                                                                                   "verdict"}
    # A stream that disappears (purged) loses its series (what is not per stream, like the buckets of the alert
    # latency histogram, stays).
    exporter.update([])
    assert not any(("stream", "cam") in labels for _, labels in _samples(exporter))


def test_registry_is_private_and_atomic(tmp_path: Path) -> None:
    registry = StreamRegistry(tmp_path)
    assert registry.load() == []
    secret = "rtsp://user:hunter2@127.0.0.1:554/cam"
    registry.put(StreamSpec(name="door", source=secret, preset="live", captioner="pixels"))
    registry.put(StreamSpec(name="yard", source="/v/yard.mp4", preset="live", captioner="none"))
    registry.put(StreamSpec(name="door", source=secret, preset="egomem", captioner="pixels"))
    specs = registry.load()
    assert [(s.name, s.preset) for s in specs] == [("yard", "live"), ("door", "egomem")]
    mode = stat.S_IMODE(os.stat(registry.path).st_mode)
    assert mode == 0o600, oct(mode)  # it holds camera credentials
    registry.remove("yard")
    assert [s.name for s in registry.load()] == ["door"]
    assert not list(registry.path.parent.glob("*.tmp"))
    # A world-readable .tmp left by a crash does not make the list world-readable.
    registry.path.with_suffix(".tmp").write_text("")
    registry.path.with_suffix(".tmp").chmod(0o644)
    registry.remove("door")
    assert stat.S_IMODE(os.stat(registry.path).st_mode) == 0o600


def test_observed_store_announces_nodes(tmp_path: Path) -> None:
    async def main() -> list[dict]:
        bus = EventBus()
        store = SQLiteMemoryStore(tmp_path / "m.sqlite")
        store.add_observer(NodeAnnouncer(bus))
        async with bus.subscribe() as sub:
            # Written from another thread, as the caption builder does.
            await asyncio.to_thread(store.add, MemoryNode("cam", "coarse", 0.0, 60.0, "a red van"))
            await asyncio.to_thread(store.add_many, [MemoryNode("cam", "fine", 0.0, 10.0, "plate KX-4821")])
            events = [await asyncio.wait_for(sub.get(), 5) for _ in range(2)]
        assert store.count("cam") == 2 and store.captioned_until("cam") == 60.0
        store.close()
        return events

    events = asyncio.run(main())
    assert [(e["type"], e["node"]["level"], e["node"]["text"]) for e in events] == [
        ("node", "coarse", "a red van"), ("node", "fine", "plate KX-4821")]
    assert all(e["node"]["id"] is not None for e in events)


def test_slow_subscriber_never_blocks_publishers() -> None:
    async def main() -> tuple[int, int]:
        bus = EventBus()
        async with bus.subscribe(maxsize=10) as sub:
            for i in range(100):
                bus.publish({"type": "status", "stream": "s", "i": i})
            await asyncio.sleep(0.05)
            first = await sub.get()
            return first["i"], sub.dropped

    first, dropped = asyncio.run(main())
    assert (first, dropped) == (90, 90)  # the oldest were dropped, the newest kept


def test_config_refuses_public_bind_without_token() -> None:
    with pytest.raises(ValidationError, match="without an API token"):
        load_settings(**{"service.host": "0.0.0.0"})
    with pytest.raises(ValidationError, match="without an API token"):
        load_settings(**{"service.host": "camera-gateway.example"})
    assert load_settings(**{"service.host": "localhost"}).service.host == "localhost"
    assert load_settings(**{"service.host": "::1"}).service.host == "::1"
    s = load_settings(**{"service.host": "0.0.0.0", "service.api_token": "t" * 32})
    assert "t" * 32 not in repr(s.service) and s.service.api_token.get_secret_value() == "t" * 32
    with pytest.raises(ValidationError):
        load_settings(**{"service.api_token": "short"})  # a token must be at least 16 characters
    with pytest.raises(ValidationError):
        load_settings(**{"service.port": 70000})
    with pytest.raises(ValidationError):
        load_settings(**{"service.typo": 1})


def test_config_mqtt_url() -> None:
    with pytest.raises(ValidationError, match="not in the url"):
        load_settings(**{"mqtt.url": "mqtt://user:pw@broker:1883"})
    with pytest.raises(ValidationError, match="mqtt://host"):
        load_settings(**{"mqtt.url": "http://broker"})
    with pytest.raises(ValidationError):
        load_settings(**{"mqtt.topic_prefix": "lucy/#"})
    assert load_settings(**{"mqtt.url": "mqtts://broker.local"}).mqtt.url == "mqtts://broker.local"


def test_source_checks(tmp_path: Path) -> None:
    video = tmp_path / "ok" / "v.mp4"
    video.parent.mkdir()
    video.write_bytes(b"not really a video; only the path is checked here")
    settings = load_settings(data=tmp_path / "data", **{"service.allowed_source_roots": [str(video.parent)]})
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)
    assert manager.check_source(str(video)) == str(video.resolve())
    assert manager.check_source(f"file://{video}") == str(video.resolve())
    assert manager.check_source("rtsp://u:p@127.0.0.1:8554/x").startswith("rtsp://")
    refused = [
        "ftp://host/x.mp4", "v.mp4", "../ok/v.mp4", f"{video.parent}/../ok/../../etc/passwd", "/etc/hostname",
        "file://evil.example/etc/passwd", str(video.parent), f"{video}\n", "rtsp:///nohost", "",
    ]
    for source in refused:
        with pytest.raises(InvalidStream):
            manager.check_source(source)


def test_chat_question_extraction() -> None:
    body = ChatRequest(model="cam", messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "first?"},
        {"role": "assistant", "content": "yes"},
        {"role": "user", "content": [{"type": "text", "text": "What plate"}, {"type": "text", "text": "was shown?"}]},
    ])
    assert read_request(body, 500).text == "What plate\nwas shown?"
    with pytest.raises(InvalidRequest):
        read_request(ChatRequest(model="cam", messages=[{"role": "system", "content": "x"}]), 500)
    text = answer_text({"answer": "KX-4821", "confident": False, "evidence": [{"start": 20, "end": 30}]})
    assert text.startswith("KX-4821") and "20.0-30.0 s" in text and "Not confident" in text


class _SlowToExit:
    """A stream worker whose run finishes at once, then takes a while to close its stores and exit."""

    pid = None  # no process of its own

    def __init__(self, spec: StreamSpec, settings: object, stores: object = None) -> None:
        self.spec = spec

    def messages(self):
        yield StateChange(StreamState.FINISHED)
        time.sleep(1.0)
        yield RunEnd(StreamState.FINISHED)
        yield WorkerExit(0)

    def stop(self) -> None:
        pass


def test_a_finished_stream_is_not_refused_as_running_while_its_worker_exits(tmp_path: Path) -> None:
    """The API shows a stream finished as soon as its run ends; adding it again then gets the answer a finished
    stream gets (here: its name holds another source), not "already running" from a worker still exiting."""
    video = tmp_path / "v.mp4"
    video.write_bytes(b"only the path is checked here")
    settings = load_settings(data=tmp_path / "data")
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)
    manager.stream_type = type("SlowStream", (ManagedStream,), {"worker_type": _SlowToExit})
    stream = manager.add("cam", str(video))
    deadline = time.monotonic() + 10
    while stream.state != StreamState.FINISHED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stream.state == StreamState.FINISHED and stream.active, (stream.state, stream.error)  # still exiting
    stream.settle()
    assert not stream.active
