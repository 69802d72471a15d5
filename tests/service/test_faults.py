"""Faults around the service: a captioner that is down, then back (a real OpenAI-compatible HTTP server)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from lucy.testing import child_env
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer
from tests.service.conftest import LucyServer, wait_for


def _metric(server: LucyServer, name: str, stream: str) -> float:
    with server.client() as c:
        text = c.get("/metrics").text
    return next((s.value for f in text_string_to_metric_families(text) for s in f.samples
                 if s.name == name and s.labels.get("stream") == stream), 0.0)


def test_captioner_outage_never_stalls_ingest(lucy_server: Callable[..., LucyServer], videos: dict[str, Path]) -> None:
    down = threading.Event()
    down.set()

    def reply(body: dict[str, Any]) -> Reply:
        return Reply(status=503, content="overloaded") if down.is_set() else Reply("a street at dusk", prompt_tokens=50,
                                                                                   completion_tokens=7)

    with ScriptedOpenAIServer(reply) as vlm:
        server = lucy_server(
            captioner={"backend": "openai", "openai": {"base_url": vlm.base_url, "max_retries": 0,
                                                       "timeout_seconds": 10}},
            memory={"retry_initial_seconds": 0.2, "retry_max_seconds": 1.0})
        with server.client() as c:
            assert c.post("/v1/streams", json={"name": "street", "source": str(videos["a"])}).status_code == 201
        # The whole file is ingested although no caption succeeds; the lag and the failures show it.
        stuck = wait_for(lambda: (s := server.stream("street"))["state"] == "finished" and s["caption"]["failures"] >= 3
                         and s, 120, "ingest to finish while the captioner is down")
        assert stuck["ingested_until"] > 149 and stuck["captioned_until"] == 0
        assert stuck["lag_seconds"] == stuck["ingested_until"] and stuck["caption"]["last_error"]
        assert _metric(server, "lucy_caption_failures_total", "street") >= 3
        assert _metric(server, "lucy_caption_lag_seconds", "street") > 149
        assert _metric(server, "lucy_caption_queue_depth_spans", "street") == 3
        # The captioner comes back: the backlog drains from the frame store.
        down.clear()
        done = server.wait_captioned("street", timeout=120)
        assert done["caption"]["coarse_nodes"] == 3 and done["lag_seconds"] == 0
        with server.client() as c:
            nodes = c.get("/v1/streams/street/memory", params={"level": "coarse"}).json()["nodes"]
        assert [n["text"] for n in nodes] == ["a street at dusk"] * 3
        assert _metric(server, "lucy_caption_prompt_tokens_total", "street") >= 150
        assert _metric(server, "lucy_caption_requests_total", "street") >= 6
        assert _metric(server, "lucy_caption_latency_seconds_count", "street") >= 6
        # A stream whose captions are failing still stops at once when deleted.
        down.set()
        with server.client() as c:
            assert c.post("/v1/streams", json={"name": "alley", "source": str(videos["b"])}).status_code == 201
            wait_for(lambda: server.stream("alley")["caption"]["failures"] >= 1, 180, "alley's captions to fail")
            r = c.delete("/v1/streams/alley", timeout=30)
        assert r.status_code == 200 and r.json()["state"] == "stopped"


def test_damaged_stream_list_stops_the_start_clearly(tmp_path: Path) -> None:
    import subprocess
    import sys

    registry = tmp_path / "data" / "service" / "streams.json"
    registry.parent.mkdir(parents=True)
    registry.write_text('{"format": 1, "streams": [')  # cut short, as by a full disk
    env = child_env()
    done = subprocess.run([sys.executable, "-m", "lucy", "serve", "--data", str(tmp_path / "data"), "--port", "9"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1
    assert "cannot read the stream list" in done.stderr and "Traceback" not in done.stderr
