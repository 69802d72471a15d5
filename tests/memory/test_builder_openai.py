"""The builder over the real HTTP path: the openai captioner against a scripted OpenAI-compatible server that
is down (HTTP 503) for a while and then recovers; the backlog is then captioned from the frame store."""

from __future__ import annotations

import re
import threading

from lucy.config import load_settings
from lucy.ingest import Ingestor
from lucy.memory.builder import CoarseBuilder
from lucy.memory.captioners.openai import OpenAICaptioner
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer
from lucy.wiring import open_frames, open_memory

SPANS = [(0.0, 60.0), (60.0, 120.0), (120.0, 180.0), (180.0, 240.0), (240.0, 270.0)]
_CLIP = re.compile(r"from (\d+\.\d) s to (\d+\.\d) s")


def _clip_range(body: dict) -> str:
    """The clip's time range as the captioner tells it to the model (first text part of the user message)."""
    for part in body["messages"][-1]["content"]:
        if part.get("type") == "text" and (m := _CLIP.search(part["text"])):
            return f"{m.group(1)}-{m.group(2)}"
    raise AssertionError("no clip range in the request")


def test_server_outage_then_recovery(tmp_path, five_span_video):
    up = threading.Event()
    failed = []

    def script(body: dict) -> Reply:
        if not up.is_set():
            failed.append(_clip_range(body))
            return Reply("model is loading", status=503)
        return Reply(f"caption of frames {_clip_range(body)}")

    with ScriptedOpenAIServer(script, latency=0.01) as server:
        settings = load_settings(data=tmp_path / "data", **{
            "captioner.backend": "openai", "captioner.max_in_flight": 3,
            "captioner.openai.base_url": server.base_url, "captioner.openai.max_retries": 0,
            "captioner.openai.timeout_seconds": 10, "captioner.openai.max_frames": 4,
            "memory.retry_initial_seconds": 0.05, "memory.retry_max_seconds": 0.3})
        memory = open_memory(settings)
        captioner = OpenAICaptioner(settings.captioner.openai, max_in_flight=3)
        with CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)) as builder:
            result = Ingestor(settings, str(five_span_video), "cam", on_commit=builder.on_commit,
                              frames=open_frames(settings)).run()
            assert result.complete
            # The whole file is in the frame store; nothing could be captioned.
            assert not builder.drain(give_up_seconds=0.5, timeout=20)
            assert memory.count("cam") == 0 and builder.stats.pending == len(SPANS)
            assert builder.stats.failures >= 3 and "HTTP 503" in (builder.stats.last_error or "")
            up.set()
            assert builder.drain(give_up_seconds=20, timeout=30)
            stats = builder.stats
        assert server.peak_in_flight <= 3
    nodes = memory.nodes("cam")
    assert [(n.start, n.end) for n in nodes] == SPANS
    # Each node holds the caption of its own span's frames (coarse 0.5 fps: the first frame at the span's start).
    for node in nodes:
        first = float(node.text.split()[-1].split("-")[0])
        assert node.start <= first < node.end, node.text
        assert node.model == settings.captioner.openai.model and node.origin == "ingest"
    assert stats.captioned == len(SPANS) and stats.pending == 0 and stats.captioned_until == 270.0
    ok_requests = len(server.requests) - len(failed)
    assert ok_requests == len(SPANS)  # after recovery, each span was asked for exactly once
    memory.close()
