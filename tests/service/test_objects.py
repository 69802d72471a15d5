"""Tracked objects as events (Frigate's /api/events) against a real ``lucy serve``: the objects route with its
filters and the snapshot route, ``lucy objects`` on the same data directory, and the MQTT messages of tracks that
appear, change and end (a real mosquitto broker) with the retained counts Home Assistant's people sensor reads.
The store is filled as a stream worker's detect stage fills it (``record_observations``)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lucy import testing
from lucy.config import load_settings
from lucy.perception.objects import CountSample, Observations, PathPoint, TrackedObject
from lucy.wiring import open_frames, open_memory
from tests.service.conftest import LucyServer, Mosquitto, wait_for
from tests.service.test_mqtt import Watcher

STREAM = "plaza"


def _jpeg(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(out, format="JPEG")
    return out.getvalue()


SNAPSHOT = _jpeg((200, 30, 30))


def track(tid: int, label: str, first: float, last: float, *, moving: bool = True, active: bool = False,
          attributes: dict[str, str] | None = None, snapshot: bytes | None = None) -> TrackedObject:
    return TrackedObject(stream=STREAM, track_id=tid, label=label, first_seen=first, last_seen=last, score=0.81,
                         entered="left", exited=None if active else "right", moving=moving,
                         path=(PathPoint(first, 0.1, 0.5), PathPoint(last, 0.9 if moving else 0.1, 0.5)),
                         attributes=attributes or {}, best_time=first + 0.5, best_box=(0.1, 0.2, 0.3, 0.6),
                         snapshot=snapshot, active=active)


def stored_stream(data: Path, observations: Observations, name: str = STREAM) -> None:
    """A stream with 60 s of small frames and what its detect stage observed, as ``lucy ingest`` leaves it."""
    settings = load_settings(data=data)
    store = open_frames(settings).create(name, source=f"/videos/{name}.mp4", live=False, width=48, height=32,
                                         stored_fps=2.0, codec="zstd", quality=90)
    times = np.arange(0, 60, 0.5)
    store.append(np.full((len(times), 32, 48, 3), 90, np.uint8), times)
    store.mark_finished(complete=True, lost=None)
    record(data, observations)


def record(data: Path, observations: Observations) -> None:
    memory = open_memory(load_settings(data=data))
    try:
        memory.record_observations(observations)
    finally:
        memory.close()


WHITE = {"colour": "white"}
FILLED = Observations(stream=STREAM, until=60.0, counts=[CountSample(5.0, {"person": 1, "car": 1}),
                                                           CountSample(59.5, {"car": 1})], tracks=[
    track(1, "car", 1.0, 60.0, moving=False, active=True, attributes=WHITE),
    track(2, "person", 2.0, 8.0, attributes={"upper": "red", "lower": "blue"}, snapshot=SNAPSHOT),
    track(3, "truck", 20.0, 24.0),
    track(4, "dog", 40.0, 44.5, attributes={"colour": "<b>brown</b>"})])


def test_objects_route_filters_by_label_and_time_and_serves_snapshots(lucy_server: Callable[..., LucyServer],
                                                                       tmp_path: Path) -> None:
    stored_stream(tmp_path / "data", FILLED)
    server = lucy_server(data=tmp_path / "data")
    with server.client() as c:
        body = c.get(f"/v1/streams/{STREAM}/objects").json()
        assert [o["id"] for o in body["objects"]] == [1, 2, 3, 4] and body["truncated"] is False
        person = body["objects"][1]
        assert person == {
            "id": 2, "stream": STREAM, "label": "person", "first_seen": 2.0, "last_seen": 8.0, "dwell": 6.0,
            "entered": "left", "exited": "right", "moving": True, "attributes": {"upper": "red", "lower": "blue"},
            "score": 0.81, "path": [{"time": 2.0, "x": 0.1, "y": 0.5}, {"time": 8.0, "x": 0.9, "y": 0.5}],
            "best_time": 2.5, "best_box": [0.1, 0.2, 0.3, 0.6], "active": False,
            "snapshot_url": f"/v1/streams/{STREAM}/objects/2/snapshot.jpg",
            "clip_url": f"/v1/streams/{STREAM}/clip?from=2&to=8"}
        assert body["objects"][0]["active"] and body["objects"][0]["exited"] is None
        assert body["objects"][0]["moving"] is False

        def ids(**params: object) -> list[int]:
            r = c.get(f"/v1/streams/{STREAM}/objects", params=params)
            assert r.status_code == 200, r.text
            return [o["id"] for o in r.json()["objects"]]

        assert ids(label="person") == [2] and ids(label="Person") == [2]
        assert ids(label="vehicle") == [1, 3]  # car and truck: any vehicle
        assert ids(label="cat") == []
        assert ids(**{"from": 30, "to": 42}) == [1, 4]  # seen at any time in [30, 42): the parked car, the dog
        assert ids(**{"from": 9, "to": 20}) == [1]  # the person left at 8, the truck came at 20
        limited = c.get(f"/v1/streams/{STREAM}/objects", params={"limit": 2}).json()
        assert [o["id"] for o in limited["objects"]] == [1, 2] and limited["truncated"] is True

        # each object links to its clip: its time in view, or the first minute of a longer stay (the parked car
        # tracked from 1 s to the end is shown arriving), a playable MP4 from the stored frames
        assert body["objects"][0]["clip_url"] == f"/v1/streams/{STREAM}/clip?from=1&to=60"
        clip = c.get(person["clip_url"])
        assert clip.status_code == 200 and clip.headers["content-type"] == "video/mp4", clip.text[:200]
        assert clip.content[4:8] == b"ftyp"

        snap = c.get(person["snapshot_url"])
        assert snap.status_code == 200 and snap.headers["content-type"] == "image/jpeg"
        assert snap.content == SNAPSHOT and Image.open(io.BytesIO(snap.content)).size == (64, 48)
        assert c.get(f"/v1/streams/{STREAM}/objects/3/snapshot.jpg").status_code == 404  # none kept ...
        assert body["objects"][2]["snapshot_url"] is None  # ... and the list says so
        assert c.get(f"/v1/streams/{STREAM}/objects/99/snapshot.jpg").status_code == 404  # no such object

        # bad input: what other stream routes answer
        assert c.get("/v1/streams/nowhere/objects").status_code == 404
        assert c.get("/v1/streams/nowhere/objects/2/snapshot.jpg").status_code == 404
        for params in ({"label": "<script>"}, {"label": "x" * 65}, {"from": 10, "to": 5}, {"from": -1},
                       {"limit": 0}, {"to": "nan"}):
            r = c.get(f"/v1/streams/{STREAM}/objects", params=params)
            assert r.status_code == 422, (params, r.text)
        assert c.get(f"/v1/streams/{STREAM}/objects/0/snapshot.jpg").status_code == 422
        schema = c.get("/openapi.json").json()
        assert {"ObjectOut", "ObjectList"} <= set(schema["components"]["schemas"])
        assert "/v1/streams/{name}/objects/{track_id}/snapshot.jpg" in schema["paths"]


def test_lucy_objects_lists_a_streams_tracks_as_a_table_or_json(tmp_path: Path, run_lucy) -> None:
    data = tmp_path / "data"
    stored_stream(data, FILLED)
    done = run_lucy("objects", "--stream", STREAM, "--label", "vehicle", "--json", "--data", str(data))
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    assert [o["id"] for o in page["objects"]] == [1, 3] and page["label"] == "vehicle"
    assert page["objects"][0]["attributes"] == {"colour": "white"} and page["objects"][0]["active"] is True

    done = run_lucy("objects", "--stream", STREAM, "--data", str(data), env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.strip().startswith(("│", "┃"))]
    assert done.stdout.splitlines()[0].strip() == f"tracked objects in {STREAM}: 4"
    assert any("person" in r and "0:00:02.0" in r and "moving" in r and "upper red" in r for r in rows), done.stdout
    assert any("car" in r and "stationary" in r and "still tracked" in r for r in rows), done.stdout
    assert "<b>brown</b>" in done.stdout  # data, shown as it is (never read as markup)

    done = run_lucy("objects", "--stream", STREAM, "--from", "9", "--to", "20", "--data", str(data), "--json")
    assert [o["id"] for o in json.loads(done.stdout)["objects"]] == [1]
    done = run_lucy("objects", "--stream", STREAM, "--label", "cat", "--data", str(data))
    assert done.returncode == 0 and "plaza: no tracked objects labelled cat" in done.stdout
    # bad input: one error line, exit 1
    for args, said in ((["--stream", "plazza"], "did you mean 'plaza'"), (["--stream", STREAM, "--from", "9", "--to",
                                                                          "5"], "empty time range"),
                       (["--stream", STREAM, "--label", "<b>"], "not a label")):
        done = run_lucy("objects", *args, "--data", str(data))
        assert done.returncode == 1 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_tracks_that_appear_change_and_end_are_published_on_mqtt(lucy_server: Callable[..., LucyServer],
                                                                 mosquitto: Mosquitto, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """What the store held before the server started is not news (only the end of a track still active then is);
    each new track is ``new`` once, a stop is an ``update``, an end ``end`` once, a track that came and went between
    two looks ``new`` then ``end``; the counts in view are retained for Home Assistant's people sensor."""
    data = tmp_path / "data"
    stored_stream(data, FILLED)
    # a server with a detector (the suite's default has none), as users have it: the people sensor is announced
    monkeypatch.setitem(testing.SUITE_ENV, "LUCY_DETECT__BACKEND", "hog")
    server = lucy_server(data=data, mqtt={"enabled": True, "url": f"mqtt://127.0.0.1:{mosquitto.port}",
                                          "client_id": "lucy-ha", "objects_poll_seconds": 0.2})
    wait_for(lambda: server.client().get("/readyz").json()["mqtt"] == "connected", 60, "the bridge to connect")
    watcher = Watcher(mosquitto.port, topics=("lucy/#", "homeassistant/#"))
    events = lambda: [p for t, p, _ in watcher.find(lambda t, p, r: t == f"lucy/{STREAM}/objects")]  # noqa: E731
    counts = lambda: [(p, r) for t, p, r in watcher.find(lambda t, p, r: t == f"lucy/{STREAM}/counts")]  # noqa: E731
    try:
        config = wait_for(lambda: watcher.find(
            lambda t, p, r: t == f"homeassistant/sensor/lucy-ha/{STREAM}_people/config" and p), 30, "people sensor")
        sensor = config[-1][1]
        assert sensor["state_topic"] == f"lucy/{STREAM}/counts" and "counts.person" in sensor["value_template"]
        assert sensor["availability_topic"] == "lucy/available" and sensor["unit_of_measurement"] == "people"
        wait_for(lambda: counts(), 30, "the counts of the first look")  # the server has looked once
        assert counts()[-1][0] == {"stream": STREAM, "time": 59.5, "counts": {"car": 1}}  # the newest sample

        record(data, Observations(stream=STREAM, until=65.0, counts=[CountSample(64.5, {"person": 2, "car": 1})],
                                  tracks=[track(1, "car", 1.0, 65.0, moving=False, active=True, attributes=WHITE),
                                          track(5, "person", 61.0, 65.0, active=True, snapshot=SNAPSHOT)]))
        wait_for(lambda: len(events()) >= 1, 30, "the new person")
        wait_for(lambda: counts()[-1][0]["counts"] == {"car": 1, "person": 2}, 30, "two people in view")
        record(data, Observations(stream=STREAM, until=70.0, tracks=[
            track(1, "car", 1.0, 66.0, moving=False, attributes=WHITE),
            track(5, "person", 61.0, 70.0, moving=False, active=True)]))
        record(data, Observations(stream=STREAM, until=75.0, tracks=[track(6, "bicycle", 71.0, 73.0)]))
        wait_for(lambda: len(events()) >= 5, 30, "the car's end, the person's stop, the bicycle")
        said = [(e["type"], e["object"]["id"]) for e in events()]
        assert said == [("new", 5), ("end", 1), ("update", 5), ("new", 6), ("end", 6)], said
        assert all(e["stream"] == STREAM for e in events())
        first = events()[0]["object"]
        assert first["label"] == "person" and first["active"] and first["snapshot_url"].endswith("/5/snapshot.jpg")
        assert events()[2]["object"]["moving"] is False
        latest = [(p, r) for p, r in counts() if p["time"] == 64.5]
        assert latest and latest[-1][1] is False  # live delivery; a new subscriber gets it retained:
        late = Watcher(mosquitto.port, topics=(f"lucy/{STREAM}/counts",))
        try:
            got = wait_for(lambda: late.find(lambda t, p, r: r), 30, "the retained counts")
            assert got[-1][1]["counts"] == {"car": 1, "person": 2}
        finally:
            late.close()
    finally:
        watcher.close()


def test_an_object_that_stays_links_to_the_clip_of_its_arrival() -> None:
    from lucy.service.objects import OBJECT_CLIP_SECONDS, object_json

    parked = object_json(track(9, "truck", 100.0, 30_000.0, moving=False, active=True))
    assert parked["clip_url"] == f"/v1/streams/{STREAM}/clip?from=100&to={100 + OBJECT_CLIP_SECONDS:g}"
    glimpse = object_json(track(10, "dog", 7.25, 7.5))  # shorter than a second: widened to one
    assert glimpse["clip_url"] == f"/v1/streams/{STREAM}/clip?from=7.25&to=8.25"
