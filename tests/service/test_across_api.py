"""Questions across streams over HTTP: ``POST /v1/questions`` (JSON and server-sent events) and the OpenAI chat
model ``_all`` with the official ``openai`` client, against a real ``lucy serve`` over a data directory with two
camera streams ingested by the CLI (tests/across_videos.py); bad input answered with one JSON error."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from lucy.config import ALL_STREAMS
from lucy.testing.waiting import free_port
from tests.across_videos import PLATFORM, ingest_cameras
from tests.service.conftest import LucyServer, base_config

CAMERAS = ["back", "front"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LucyServer]:
    """One server over a data directory holding the ``back`` and ``front`` cameras (the sign on both, on back first)."""
    root = tmp_path_factory.mktemp("across-api")
    data = ingest_cameras(root, tuple(CAMERAS))
    workdir = root / "serve"
    workdir.mkdir()
    started = LucyServer(workdir, base_config(data, free_port(), detect={"backend": "none"})).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LucyServer]:
    workdir = tmp_path_factory.mktemp("across-empty")
    started = LucyServer(workdir, base_config(workdir / "data", free_port())).start()
    yield started
    started.stop()


def test_a_question_across_every_stream(server: LucyServer) -> None:
    with server.client() as c:
        r = c.post("/v1/questions", json={"question": f"Which camera saw the {PLATFORM} sign first?"})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["stream"] == ALL_STREAMS and answer["streams"] == CAMERAS
    assert answer["answer"].startswith("back first") and answer["confident"]
    assert {e["stream"] for e in answer["evidence"]} == set(CAMERAS)
    assert all(step.get("stream") in CAMERAS for step in answer["trace"] if step["start"] is not None)


def test_some_streams_and_the_event_stream(server: LucyServer) -> None:
    with server.client() as c:
        one = c.post("/v1/questions", json={"question": f"When was the {PLATFORM} sign seen?", "streams": ["front"]})
        with c.stream("POST", "/v1/questions", headers={"Accept": "text/event-stream"},
                      json={"question": f"When was the {PLATFORM} sign seen?"}) as events:
            assert events.status_code == 200
            kinds, answer = [], None
            kind = ""
            for line in events.iter_lines():
                if line.startswith("event: "):
                    kind = line[len("event: "):]
                    kinds.append(kind)
                elif line.startswith("data: ") and kind == "answer":
                    answer = json.loads(line[len("data: "):])
    assert one.status_code == 200, one.text
    # one stream named in `streams` is that stream's question: no other camera in it
    assert one.json()["stream"] == "front" and "streams" not in one.json() and "back" not in one.json()["answer"]
    assert kinds[-1] == "answer" and kinds.count("step") >= 1
    assert answer is not None and answer["streams"] == CAMERAS
    assert answer["answer"].startswith("First on back") and "then on front" in answer["answer"]


def test_bad_input(server: LucyServer, empty: LucyServer) -> None:
    with server.client() as c:
        unknown = c.post("/v1/questions", json={"question": "what?", "streams": ["front", "nope"]})
        none = c.post("/v1/questions", json={"question": "what?", "streams": [" "]})
        blank = c.post("/v1/questions", json={"question": "   "})
    assert unknown.status_code == 404 and "nope" in unknown.json()["error"]["message"]
    assert none.status_code == 422 and blank.status_code == 422
    with empty.client() as c:
        nothing = c.post("/v1/questions", json={"question": "what?"})
    assert nothing.status_code == 409 and "no stream yet" in nothing.json()["error"]["message"]
    client = openai.OpenAI(base_url=f"{empty.url}/v1", api_key="unused", timeout=60, max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError) as err:
        client.chat.completions.create(model=ALL_STREAMS, messages=[{"role": "user", "content": "What sign?"}])
    assert "holds none yet" in err.value.message


def test_the_chat_model_for_every_stream(server: LucyServer) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", timeout=180, max_retries=0)
    assert [m.id for m in client.models.list()] == [*CAMERAS, ALL_STREAMS]
    reply = client.chat.completions.create(model=ALL_STREAMS, messages=[
        {"role": "user", "content": f"Which camera saw the {PLATFORM} sign first?"}])
    assert reply.model == ALL_STREAMS
    content = reply.choices[0].message.content or ""
    assert content.startswith("back first") and "Evidence: back " in content
    lucy = reply.model_extra["lucy"]
    assert lucy["streams"] == CAMERAS
    chunks = list(client.chat.completions.create(model=ALL_STREAMS, stream=True, messages=[
        {"role": "user", "content": f"When was the {PLATFORM} sign seen?"}]))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "First on back" in streamed


def test_questions_route_is_documented(server: LucyServer) -> None:
    spec = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    body = spec["paths"]["/v1/questions"]["post"]
    assert "every stream" in body["summary"].lower()
