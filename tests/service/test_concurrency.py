"""Several streams ingesting while many questions arrive at once; streams resumed after the server restarts."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import openai
from prometheus_client.parser import text_string_to_metric_families

from lucy.ingest import ZarrFrameStore
from tests.service.conftest import SHORT_SECONDS, LucyServer, wait_for

QUESTIONS = ["What text was shown on screen?", "What colours were shown?", "How many orange boxes were there?",
             "What happened in the middle of the video?"]


def _metric_sum(server: LucyServer, name: str) -> float:
    with server.client() as c:
        text = c.get("/metrics").text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


def test_streams_and_questions_at_once(lucy_server: Callable[..., LucyServer], videos: dict[str, Path]) -> None:
    server = lucy_server(service={"max_concurrent_questions": 3})
    names = {"north": videos["a"], "south": videos["b"], "east": videos["c"]}

    def add(name: str) -> int:
        with server.client() as c:
            return c.post("/v1/streams", json={"name": name, "source": str(names[name])}).status_code

    with ThreadPoolExecutor(max_workers=3) as pool:  # at once, into a fresh data directory
        assert list(pool.map(add, names)) == [201, 201, 201]
    wait_for(lambda: all(server.stream(n)["ingested_until"] >= 8 for n in names), 120, "every stream to have frames")

    # Health stays responsive while questions and ingest load the machine (the event loop is never blocked).
    health: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            began = time.monotonic()
            assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200
            health.append(time.monotonic() - began)
            time.sleep(0.2)

    def ask(i: int) -> dict:
        stream, question = list(names)[i % 3], QUESTIONS[i % len(QUESTIONS)]
        with server.client(timeout=300) as c:
            if i % 4 == 1:  # SSE
                with c.stream("POST", f"/v1/streams/{stream}/questions", json={"question": question},
                              headers={"Accept": "text/event-stream"}) as r:
                    assert r.status_code == 200
                    events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
                return events[-1]
            if i % 4 == 2:  # the OpenAI-compatible endpoint
                client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", timeout=300, max_retries=0)
                reply = client.chat.completions.create(model=stream, messages=[{"role": "user", "content": question}])
                return reply.model_extra["lucy"]
            r = c.post(f"/v1/streams/{stream}/questions", json={"question": question})
            assert r.status_code == 200, r.text
            return r.json()

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    count = 12
    try:
        with ThreadPoolExecutor(max_workers=count) as pool:
            answers = list(pool.map(ask, range(count)))
    finally:
        stop.set()
        prober.join(60)
    assert len(answers) == count
    for i, answer in enumerate(answers):
        assert answer["stream"] == list(names)[i % 3], answer
        assert answer["question"] == QUESTIONS[i % len(QUESTIONS)]
        assert answer["trace"] and answer["horizon"] > 0 and "answer" in answer
    assert health and max(health) < 5.0, f"/healthz took up to {max(health):.2f} s while questions ran"

    # Every caption is stored: each stream, once finished, has its three coarse spans and no lag.
    for name in names:
        status = server.wait_captioned(name)
        assert status["caption"]["coarse_nodes"] == 3 and status["lag_seconds"] == 0
        with server.client() as c:
            coarse = c.get(f"/v1/streams/{name}/memory", params={"level": "coarse"}).json()["nodes"]
        # (Questions that came before the builder caught up captioned the tail themselves, as their own nodes.)
        assert [(n["start"], n["end"]) for n in coarse if n["origin"] == "ingest"] == [(0, 60), (60, 120), (120, 150)]
    assert _metric_sum(server, "lucy_questions_total") == count
    assert _metric_sum(server, "lucy_question_failures_total") == 0
    assert _metric_sum(server, "lucy_caption_coarse_nodes_total") == 9


def test_streams_resume_after_restart(lucy_server: Callable[..., LucyServer], videos: dict[str, Path]) -> None:
    first = lucy_server()
    with first.client() as c:
        for name in ("paced", "dropped"):
            assert c.post("/v1/streams", json={"name": name, "source": str(videos["short"]),
                                               "realtime": True}).status_code == 201
        # Deleted once it has frames (a stream deleted before its first frame leaves nothing to list): must not
        # come back.
        wait_for(lambda: (first.stream("dropped")["ingested_until"] or 0) > 0, 60, "a frame of the dropped stream")
        assert c.delete("/v1/streams/dropped").status_code == 200
        wait_for(lambda: first.stream("paced")["ingested_until"] >= 3, 60, "3 s of the paced stream")
    before = first.stream("paced")["ingested_until"]
    first.stop(signal.SIGKILL)  # a crash mid-stream: nothing is saved at exit (killed at once, so a loaded
    assert before < SHORT_SECONDS - 2  # machine cannot let the paced stream reach its end first)

    second = lucy_server(data=first.data)
    resumed = second.stream("paced")
    assert resumed["managed"] and resumed["state"] in ("starting", "recording")
    assert second.stream("dropped")["state"] == "stopped" and not second.stream("dropped")["managed"]
    final = second.wait_captioned("paced", timeout=120)
    assert final["ingested_until"] >= SHORT_SECONDS - 0.5
    # No frame twice, none missing: one frame per sampling slot (2 fps) from 0 to the end.
    times = ZarrFrameStore.open(second.data, "paced").times()
    assert np.all(np.diff(times) > 0)
    assert abs(len(times) - 2 * SHORT_SECONDS) <= 2, len(times)
    with second.client() as c:
        coarse = c.get("/v1/streams/paced/memory", params={"level": "coarse"}).json()["nodes"]
    assert [(n["start"], n["end"]) for n in coarse if n["origin"] == "ingest"] == [(0, final["ingested_until"])]
    # A clean stop keeps the stream on the list too (it is resumed, and finds nothing left to do).
    assert second.stop(signal.SIGTERM) == 0
    registry = json.loads((second.data / "service" / "streams.json").read_text())
    assert [s["name"] for s in registry["streams"]] == ["paced"]
    third = lucy_server(data=first.data)
    assert third.wait_captioned("paced", timeout=60)["ingested_until"] == final["ingested_until"]
