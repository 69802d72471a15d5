"""The HTTP API against a real ``lucy serve`` (uvicorn, in a child process) with httpx."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import httpx
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from tests.service.conftest import SHORT_SECONDS, LucyServer, wait_for


def _metric(server: LucyServer, name: str, stream: str) -> float | None:
    with server.client() as c:
        text = c.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels.get("stream") == stream:
                return s.value
    return None


def _sse_events(response: httpx.Response) -> list[tuple[str, dict]]:
    events, kind = [], None
    for line in response.iter_lines():
        if line.startswith("event:"):
            kind = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            events.append((kind, json.loads(line.split(":", 1)[1])))
    return events


@pytest.fixture(scope="module")
def cam(shared_server: LucyServer, videos: dict[str, Path]) -> dict:
    """Stream ``cam`` (video ``a``), ingested and captioned to its end."""
    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "cam", "source": str(videos["a"])})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["name"] == "cam" and body["state"] in ("starting", "catching_up", "finished")
    return shared_server.wait_captioned("cam")


def test_stream_status_and_list(shared_server: LucyServer, cam: dict) -> None:
    assert cam["ingested_until"] == pytest.approx(150.0, abs=1.0)
    assert cam["captioned_until"] == cam["ingested_until"] and cam["lag_seconds"] == 0
    assert cam["frames"] > 0 and cam["decode_fps"] > 0 and cam["reconnects"] == 0
    assert cam["caption"]["coarse_nodes"] == 3  # [0,60) [60,120) [120,150)
    with shared_server.client() as c:
        listed = c.get("/v1/streams").json()["streams"]
        models = c.get("/v1/models").json()
    assert "cam" in [s["name"] for s in listed]
    assert "cam" in [m["id"] for m in models["data"]] and models["object"] == "list"


def test_memory_endpoint(shared_server: LucyServer, cam: dict) -> None:
    with shared_server.client() as c:
        everything = c.get("/v1/streams/cam/memory").json()
        coarse = c.get("/v1/streams/cam/memory", params={"level": "coarse"}).json()
        window = c.get("/v1/streams/cam/memory", params={"from": 60, "to": 120, "level": "coarse"}).json()
        latest = c.get("/v1/streams/cam/memory", params={"latest": "true", "limit": 1, "level": "coarse"}).json()
    assert [(n["start"], n["end"]) for n in coarse["nodes"]] == [(0, 60), (60, 120), (120, 150)]
    assert all(n["origin"] == "ingest" and n["text"] for n in coarse["nodes"])
    assert len(everything["nodes"]) >= 3
    assert [(n["start"], n["end"]) for n in window["nodes"]] == [(60, 120)]
    assert [(n["start"], n["end"]) for n in latest["nodes"]] == [(120, 150)] and latest["truncated"]


def test_frames_endpoint(shared_server: LucyServer, cam: dict) -> None:
    with shared_server.client() as c:
        r = c.get("/v1/streams/cam/frames", params={"t": 30.2})
        small = c.get("/v1/streams/cam/frames", params={"t": 0, "width": 160})
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    shown = float(r.headers["x-lucy-frame-time"])
    assert 29.0 <= shown <= 30.2  # the frame on screen at t: the last stored frame at or before it
    image = Image.open(io.BytesIO(r.content))
    assert image.format == "JPEG" and image.size == (320, 180)
    # Around 30 s the scene is blue (the first half of the video).
    r_, g_, b_ = image.resize((1, 1)).getpixel((0, 0))
    assert b_ > r_ and b_ > g_
    assert Image.open(io.BytesIO(small.content)).size == (160, 90)


def test_question_json_and_sse(shared_server: LucyServer, cam: dict) -> None:
    question = {"question": "What number plate was shown?"}
    with shared_server.client() as c:
        r = c.post("/v1/streams/cam/questions", json=question)
        assert r.status_code == 200, r.text
        answer = r.json()
        with c.stream("POST", "/v1/streams/cam/questions", json=question,
                      headers={"Accept": "text/event-stream"}) as streamed:
            assert streamed.status_code == 200
            assert streamed.headers["content-type"].startswith("text/event-stream")
            events = _sse_events(streamed)
    for key in ("answer", "confident", "evidence", "iterations", "llm_calls", "caption_calls", "horizon", "trace"):
        assert key in answer, key
    assert answer["horizon"] == pytest.approx(150.0, abs=1.0)
    # Read from the observations and coarse memory or found by backtracking: either way the totals are the trace's.
    assert answer["trace"] and answer["llm_calls"] == sum(s["llm_calls"] for s in answer["trace"])
    assert answer["caption_calls"] == sum(s["caption_calls"] for s in answer["trace"])
    assert all(0 <= e["start"] <= e["end"] <= answer["horizon"] for e in answer["evidence"])
    # SSE: every step as it happened, then the answer (whose trace is exactly those steps).
    kinds = [k for k, _ in events]
    assert kinds[-1] == "answer" and set(kinds[:-1]) == {"step"} and len(kinds) > 1
    final = events[-1][1]
    assert [s["index"] for _, s in events[:-1]] == list(range(1, len(events)))
    assert [s["agent"] for _, s in events[:-1]][:len(final["trace"])] == [s["agent"] for s in final["trace"]]
    # The second asking reuses what the first uncovered: no more captioner calls than the first.
    assert final["caption_calls"] <= answer["caption_calls"]
    assert "KX-4821" in (answer["answer"] + final["answer"]) or not answer["confident"]
    # The question history and the question metrics saw both.
    with shared_server.client() as c:
        history = c.get("/v1/streams/cam/questions").json()["questions"]
    assert len([q for q in history if q["question"] == question["question"]]) == 2
    assert (_metric(shared_server, "lucy_questions_total", "cam") or 0) >= 2
    assert (_metric(shared_server, "lucy_question_latency_seconds_count", "cam") or 0) >= 2


def test_metrics_after_ingest(shared_server: LucyServer, cam: dict) -> None:
    assert _metric(shared_server, "lucy_ingest_frames_stored_total", "cam") == cam["frames"]
    assert _metric(shared_server, "lucy_ingest_media_seconds_total", "cam") == pytest.approx(150.0, abs=1.0)
    assert _metric(shared_server, "lucy_caption_coarse_nodes_total", "cam") == 3
    assert (_metric(shared_server, "lucy_caption_requests_total", "cam") or 0) >= 3
    assert _metric(shared_server, "lucy_caption_lag_seconds", "cam") == 0
    assert _metric(shared_server, "lucy_stream_state", "cam") == 4  # finished
    with shared_server.client() as c:
        r = c.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")


def test_bad_requests(shared_server: LucyServer, videos: dict[str, Path], cam: dict) -> None:
    video = str(videos["b"])
    with shared_server.client() as c:
        def status(method: str, url: str, **kw: object) -> int:
            return c.request(method, url, **kw).status_code  # type: ignore[arg-type]

        # unknown stream
        assert status("GET", "/v1/streams/nope") == 404
        assert status("GET", "/v1/streams/nope/memory") == 404
        assert status("POST", "/v1/streams/nope/questions", json={"question": "hi?"}) == 404
        assert status("DELETE", "/v1/streams/nope") == 404
        # bad names and path tricks
        for name in ("../cam", ".hidden", "a/b", "x" * 65, "a b", "..", "-x", "zarr.json"):
            assert status("POST", "/v1/streams", json={"name": name, "source": video}) == 422, name
        r = c.delete("/v1/streams/zarr.json", params={"purge": "true"})  # the frame store's own root metadata
        assert r.status_code == 422 and "keeps a file of that name" in r.json()["detail"], r.text
        assert status("GET", "/v1/streams/..%2Fcam") in (404, 422)
        assert status("GET", "/v1/streams/%2E%2E/memory") in (404, 422)
        # sources: unsupported scheme, relative path, missing file, outside the allowed roots, a directory
        for source in ("ftp://127.0.0.1/v.mp4", "videos/a.mp4", "/no/such/video.mp4", "/etc/hostname",
                       str(videos["b"].parent)):
            r = c.post("/v1/streams", json={"name": "bad", "source": source})
            assert r.status_code == 422, (source, r.text)
            assert isinstance(r.json()["detail"], str) and r.json()["detail"]
        assert status("POST", "/v1/streams", json={"name": "x", "source": video, "captioner": "gpt"}) == 422
        assert status("POST", "/v1/streams", json={"name": "x", "source": video, "preset": "nope"}) == 422
        assert status("POST", "/v1/streams", json={"name": "x", "source": video, "extra": 1}) == 422
        # duplicate name: another source under an existing name
        r = c.post("/v1/streams", json={"name": "cam", "source": video})
        assert r.status_code == 409 and "another source" in r.json()["detail"]
        # time ranges
        assert status("GET", "/v1/streams/cam/memory", params={"from": -1}) == 422
        assert status("GET", "/v1/streams/cam/memory", params={"from": 50, "to": 40}) == 422
        assert status("GET", "/v1/streams/cam/memory", params={"from": 50, "to": 50}) == 422
        assert status("GET", "/v1/streams/cam/memory", params={"from": "nan"}) == 422
        assert status("GET", "/v1/streams/cam/memory", params={"level": "deepest"}) == 422
        assert status("GET", "/v1/streams/cam/frames", params={"t": -1}) == 422
        assert status("GET", "/v1/streams/cam/frames", params={"t": "inf"}) == 422
        assert status("GET", "/v1/streams/cam/frames") == 422
        r = c.get("/v1/streams/cam/frames", params={"t": 1000})
        assert r.status_code == 404 and "ingested up to" in r.json()["detail"]
        # questions: empty, blank, oversized (the server allows 500 characters), one option, bad JSON
        for body in ({"question": ""}, {"question": "   \n"}, {"question": "x" * 501},
                     {"question": "which?", "options": ["only one"]}, {"question": "q?", "options": ["a", " "]},
                     {"question": "q?", "extra": True}, {}):
            r = c.post("/v1/streams/cam/questions", json=body)
            assert r.status_code == 422, (body, r.text)
        r = c.post("/v1/streams/cam/questions", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422
        # an oversized question is refused the same way on the SSE path
        r = c.post("/v1/streams/cam/questions", json={"question": "x" * 501}, headers={"Accept": "text/event-stream"})
        assert r.status_code == 422


def test_invisible_characters_are_taken_out_at_every_edge(shared_server: LucyServer, cam: dict) -> None:
    """Zero-width, format and control characters are taken out where text comes in: a question, chat message, watch
    or search made only of them is refused (422) and never runs; options that differ only by them or by case are
    refused as the same; a word with one inside is the same word to search."""
    invisible = "\u200b\u200c\u200d\u2060\ufeff\u202e\u0000\u0007"
    chat = {"model": "cam", "messages": [{"role": "user", "content": "Which colour is the van?"}]}
    refused = [("/v1/streams/cam/questions", {"question": invisible}),
               ("/v1/streams/cam/questions", {"question": "Which colour?", "options": ["Red", "re\u200bd"]}),
               ("/v1/streams/cam/questions", {"question": "Which colour?", "options": ["Red", "Blue", "\u2060"]}),
               ("/v1/chat/completions", {"model": "cam", "messages": [{"role": "user", "content": invisible}]}),
               ("/v1/chat/completions", {**chat, "options": ["Blue", "BLUE\ufeff"]}),
               ("/v1/streams/cam/watches", {"question": invisible})]
    with shared_server.client() as c:
        asked = len(c.get("/v1/streams/cam/questions", params={"limit": 500}).json()["questions"])
        watches = c.get("/v1/streams/cam/watches").json()["watches"]
        for path, body in refused:
            r = c.post(path, json=body, headers={"Accept": "text/event-stream"} if "options" in body else {})
            assert r.status_code == 422, (path, body, r.text)
        assert c.get("/v1/streams/cam/search", params={"q": invisible}).status_code == 422
        assert len(c.get("/v1/streams/cam/questions", params={"limit": 500}).json()["questions"]) == asked
        assert c.get("/v1/streams/cam/watches").json()["watches"] == watches
        plain = c.get("/v1/streams/cam/search", params={"q": "orange"}).json()
        split = c.get("/v1/streams/cam/search", params={"q": "or\u200bange\u00ad"}).json()
    assert plain["hits"] and [h["node_id"] for h in split["hits"]] == [h["node_id"] for h in plain["hits"]]
    assert split["query"] == "orange"


def test_duplicate_running_stream_and_delete(shared_server: LucyServer, videos: dict[str, Path]) -> None:
    spec = {"name": "paced", "source": str(videos["short"]), "realtime": True, "captioner": "none"}
    with shared_server.client() as c:
        assert c.post("/v1/streams", json=spec).status_code == 201
        r = c.post("/v1/streams", json=spec)
        assert r.status_code == 409 and "already running" in r.json()["detail"]
        wait_for(lambda: c.get("/v1/streams/paced").json()["state"] == "recording", 60, "paced stream recording")
        # DELETE stops ingestion but keeps what was stored
        r = c.delete("/v1/streams/paced")
        assert r.status_code == 200, r.text
        stopped = r.json()
        assert stopped["state"] == "stopped" and 0 < stopped["ingested_until"] < SHORT_SECONDS
        again = c.get("/v1/streams/paced").json()
        assert again["state"] == "stopped" and again["ingested_until"] == stopped["ingested_until"]
        assert again["managed"] is False  # no longer the server's stream; what it stored stays
        assert c.get("/v1/streams/paced/frames", params={"t": 0.5}).status_code == 200
        # not resumed: the server's stream list no longer holds it
        registry = json.loads((shared_server.data / "service" / "streams.json").read_text())
        assert "paced" not in [s["name"] for s in registry["streams"]]
        # ?purge=true deletes frames and memory too
        r = c.delete("/v1/streams/paced", params={"purge": "true"})
        assert r.status_code == 200 and r.json()["purged"] is True
        assert c.get("/v1/streams/paced").status_code == 404
        assert c.get("/v1/streams/paced/memory").status_code == 404
        assert not (shared_server.data / "frames.zarr" / "paced").exists()
        assert "paced" not in [s["name"] for s in c.get("/v1/streams").json()["streams"]]
        # and the name can be used again, for another source
        r = c.post("/v1/streams", json={**spec, "source": str(videos["b"]), "realtime": False})
        assert r.status_code == 201
        c.delete("/v1/streams/paced", params={"purge": "true"})


def test_credentials_never_shown(shared_server: LucyServer) -> None:
    secret = "s3cr3t-pw"
    url = f"rtsp://admin:{secret}@127.0.0.1:9/cam"  # nothing listens on port 9: the stream fails
    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "door", "source": url, "captioner": "none"})
        assert r.status_code == 201, r.text
        assert secret not in r.text and "admin:***@127.0.0.1:9" in r.json()["source"]
        failed = wait_for(lambda: (s := c.get("/v1/streams/door").json())["state"] == "failed" and s, 60,
                          "the unreachable camera to fail")
        assert failed["error"] and secret not in json.dumps(failed)
        texts = [c.get("/v1/streams").text, c.get("/metrics").text, c.get("/v1/models").text,
                 c.get("/openapi.json").text]
        c.delete("/v1/streams/door", params={"purge": "true"})
    assert all(secret not in t for t in texts)
    assert secret not in shared_server.log()
    # The stream list keeps the URL (a resumed camera needs it), readable by the owner only.
    registry = shared_server.data / "service" / "streams.json"
    assert stat.S_IMODE(os.stat(registry).st_mode) == 0o600


def test_docs_and_dashboard(shared_server: LucyServer) -> None:
    with shared_server.client() as c:
        spec = c.get("/openapi.json").json()
        page = c.get("/")
        script = c.get("/static/dashboard.js")
        health = c.get("/healthz")
    for path in ("/v1/streams", "/v1/streams/{name}", "/v1/streams/{name}/questions", "/v1/streams/{name}/memory",
                 "/v1/streams/{name}/frames", "/v1/chat/completions", "/v1/models", "/metrics"):
        assert path in spec["paths"], path
    assert page.status_code == 200 and "text/html" in page.headers["content-type"] and "dashboard.js" in page.text
    assert script.status_code == 200 and "text/event-stream" in script.text
    assert "http://" not in page.text.replace("http://www.w3.org", "")  # nothing loaded from elsewhere
    assert health.json() == {"status": "ok"}


def test_frames_of_a_stream_in_progress(shared_server: LucyServer, videos: dict[str, Path]) -> None:
    """Questions and frames mid-stream: a paced stream answers about what it has so far."""
    with shared_server.client() as c:
        assert c.post("/v1/streams", json={"name": "live1", "source": str(videos["short"]), "realtime": True,
                                           "captioner": "pixels"}).status_code == 201
        wait_for(lambda: c.get("/v1/streams/live1").json()["ingested_until"] >= 3, 60, "3 s ingested")
        r = c.post("/v1/streams/live1/questions", json={"question": "What text is on screen?"})
        assert r.status_code == 200, r.text
        answer = r.json()
        status = c.get("/v1/streams/live1").json()
        assert 0 < answer["horizon"] <= status["ingested_until"] + 1e-6
        assert status["state"] in ("recording", "finished")
        c.delete("/v1/streams/live1", params={"purge": "true"})


def test_ids_limits_and_sizes_out_of_range_answer_422(shared_server: LucyServer, cam: dict) -> None:
    """Every integer of a path or query is bounded where it enters: a 64-bit overflow (2**63, 10**30), a negative
    or a non-number is a 422 JSON error, never a 500 from the store."""
    checked = [  # (route, the integer parameter, the other parameters it needs)
        ("/v1/streams/cam/alerts", "after_id", {}), ("/v1/streams/cam/alerts", "watch_id", {}),
        ("/v1/streams/cam/alerts", "limit", {}), ("/v1/streams/cam/questions", "limit", {}),
        ("/v1/streams/cam/memory", "limit", {}), ("/v1/streams/cam/search", "limit", {"q": "plate"}),
        ("/v1/streams/cam/frames", "width", {"t": 1}), ("/v1/streams/cam/frames/latest", "width", {}),
    ]
    with shared_server.client() as c:
        for value in (2**63, 2**64 + 1, 10**30, -1, -(2**63) - 1, "abc", "1.5", "0x10", ""):
            for route, name, extra in checked:
                r = c.get(route, params={**extra, name: value})
                assert r.status_code == 422, (route, name, value, r.status_code, r.text)
                assert r.headers["content-type"].startswith("application/json") and r.json()["error"]["message"]
            if value != "":  # the path's id
                r = c.delete(f"/v1/streams/cam/watches/{value}")
                assert r.status_code == 422 and r.json()["error"]["message"], (value, r.text)
        # The largest id there can be is a valid one: nothing has it.
        assert c.get("/v1/streams/cam/alerts", params={"after_id": 2**63 - 1}).json()["alerts"] == []
        assert c.get("/v1/streams/cam/alerts", params={"watch_id": 2**63 - 1}).json()["alerts"] == []
        assert c.delete(f"/v1/streams/cam/watches/{2**63 - 1}").status_code == 404


def test_the_dashboards_memory_page_of_a_long_stream_reads_only_its_rows(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 nodes stored, and ``memory?latest=true&limit=60`` (the dashboard's request) turns 61 rows into nodes:
    the page is cut in SQL, not from the whole stream in Python."""
    from starlette.testclient import TestClient

    from lucy.config import load_settings
    from lucy.memory import sqlite_store
    from lucy.memory.nodes import MemoryNode
    from lucy.service.app import create_app
    from lucy.wiring import open_frames

    settings = load_settings(data=tmp_path / "data", **{"captioner.backend": "pixels"})
    open_frames(settings).create("long", source="/v.mp4", live=False, width=64, height=64, stored_fps=2.0,
                                 codec="zstd", quality=90)
    memory = sqlite_store.SQLiteMemoryStore.for_data(settings)
    n = 20_000
    memory.add_many([MemoryNode("long", "coarse", 60.0 * i, 60.0 * (i + 1), f"span {i}") for i in range(n)])
    made: list[int] = []

    def counted(row):  # every row a store turns into a node
        made.append(1)
        return node_of(row)

    node_of = sqlite_store.node_of
    monkeypatch.setattr(sqlite_store, "node_of", counted)
    with TestClient(create_app(settings, memory=memory), base_url="http://127.0.0.1") as client:
        made.clear()
        r = client.get("/v1/streams/long/memory", params={"latest": "true", "limit": 60})
        assert r.status_code == 200, r.text
        page = r.json()
        assert [x["text"] for x in page["nodes"]] == [f"span {i}" for i in range(n - 60, n)] and page["truncated"]
        assert len(made) == 61
        made.clear()
        first = client.get("/v1/streams/long/memory", params={"limit": 5, "level": "coarse", "from": 600_000}).json()
        assert [x["text"] for x in first["nodes"]] == [f"span {i}" for i in range(10_000, 10_005)]
        assert len(made) == 6
