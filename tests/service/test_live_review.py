"""The live view (MJPEG of a stream's newest stored frames) and the review timeline page, against the shared real
``lucy serve`` and in the real headless Chromium of the dashboard's tests. Screenshots go to /tmp/review-shots/."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC

from lucy.config import LucySettings, load_settings
from lucy.ingest.segments import recordings_dir, segment_name
from lucy.memory.nodes import MemoryNode
from lucy.perception.objects import Observations
from lucy.service.review import coverage, recorded
from lucy.wiring import open_frames, open_memory
from tests.service.conftest import LucyServer, wait_for
from tests.service.test_dashboard import _open, _wait, browser  # noqa: F401  (the module's Chromium)
from tests.service.test_objects import SNAPSHOT, record, track
from tests.service.test_watches import store_alert

SHOTS = Path("/tmp/review-shots")
LIVE = "porch"  # a file read at its own pace, as a camera delivers
REVIEWED = "carpark"  # a stream with known content, written as ingest and a detect stage leave it (a name no
# other module of the shared server uses: test_openai_compat.py adds "yard")
HOSTILE = "<img src=x onerror=alert(1)>"


def _shot(driver: webdriver.Chrome, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(SHOTS / name))


def _parts(res: httpx.Response) -> Iterator[tuple[dict[str, str], bytes]]:
    """The parts of a multipart/x-mixed-replace answer: (headers, body) each, cut by Content-Length."""
    buf = b""
    chunks = res.iter_bytes()
    while True:
        while b"\r\n\r\n" not in buf:
            buf += next(chunks)
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = [line for line in head.decode().split("\r\n") if line and not line.startswith("--")]
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        length = int(headers["content-length"])
        while len(buf) < length:
            buf += next(chunks)
        yield headers, buf[:length]
        buf = buf[length:]


@pytest.fixture(scope="module")
def live_stream(shared_server: LucyServer, videos: dict[str, Path]) -> Iterator[str]:
    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": LIVE, "source": str(videos["a"]), "realtime": True})
        assert r.status_code == 201, r.text
    wait_for(lambda: shared_server.stream(LIVE)["state"] == "recording", 90, "the paced stream to record")
    yield LIVE
    with shared_server.client() as c:
        c.delete(f"/v1/streams/{LIVE}", params={"purge": "true"})


def test_live_view_sends_new_frames_bounds_viewers_and_frees_slots(shared_server: LucyServer,
                                                                     live_stream: str) -> None:
    limit = LucySettings().service.live_max_viewers
    url = f"/v1/streams/{live_stream}/live.mjpeg"
    with httpx.Client(base_url=shared_server.url, timeout=30,
                      limits=httpx.Limits(max_connections=limit + 4)) as c, contextlib.ExitStack() as opened:
        assert c.get("/v1/streams/nobody/live.mjpeg").status_code == 404
        viewers = []
        for _ in range(limit):
            res = opened.enter_context(c.stream("GET", url))
            assert res.status_code == 200 and res.headers["content-type"].startswith("multipart/x-mixed-replace")
            viewers.append(res)
        # the first viewer sees the stream move on: different frames, each a JPEG, each saying when it was
        seen: list[float] = []
        parts = _parts(viewers[0])  # kept: a parts reader let go would close its response, and free its slot
        for headers, body in parts:
            assert headers["content-type"] == "image/jpeg" and Image.open(io.BytesIO(body)).format == "JPEG"
            assert "x-lucy-frame-wall" not in headers  # a file has no capture time
            seen.append(float(headers["x-lucy-frame-time"]))
            if len(set(seen)) >= 2:
                break
        assert seen == sorted(seen) and len(set(seen)) >= 2
        # one viewer more than the limit: refused, saying why
        with c.stream("GET", url) as refused:
            assert refused.status_code == 503
            assert "live_max_viewers" in json.loads(refused.read())["error"]["message"]
            assert refused.headers["retry-after"] == "5"
        # a viewer that goes away frees its slot
        viewers.pop().close()

        def admitted() -> bool:
            with c.stream("GET", url) as res:
                return res.status_code == 200

        wait_for(admitted, 30, "the freed slot to be taken")


def test_dashboard_shows_the_live_picture_and_stops_it_when_hidden(shared_server: LucyServer, live_stream: str,
                                                                    browser: webdriver.Chrome) -> None:  # noqa: F811
    wait = _open(browser, shared_server.url)
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, f'tr[data-stream="{live_stream}"]'))).click()
    wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#live-panel .stream-name"), live_stream))
    first = wait.until(lambda d: d.execute_script(
        "const i = document.getElementById('live-picture');"
        "return !i.hidden && i.naturalWidth > 0 && Number(i.dataset.frames) >= 1 && i.dataset.frameTime"))
    wait.until(lambda d: d.execute_script(
        "const i = document.getElementById('live-picture');"
        "return i.naturalWidth > 0 && i.dataset.frameTime !== arguments[0] && Number(i.dataset.frames) >= 2"), first)
    assert "frame at " in browser.find_element(By.ID, "live-note").text
    assert browser.find_element(By.ID, "review-link").get_attribute("href").endswith(f"/review/{live_stream}")
    for width, height in ((1400, 1000), (390, 844)):
        browser.set_window_size(width, height)
        browser.execute_script("document.getElementById('live-panel').scrollIntoView()")
        time.sleep(0.6)
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
        _shot(browser, f"live-{width}.png")
    browser.set_window_size(1280, 1000)
    # scrolled out of view, the live view closes (the server's slot is freed with it); back in view, it reopens
    browser.execute_script("document.getElementById('watches-panel').scrollIntoView()")
    wait.until(lambda d: d.execute_script("return live.controller === null"))
    # (read while closed: once back in view the page may reopen it, and count anew, before a read after the scroll)
    frames = int(browser.execute_script("return Number(document.getElementById('live-picture').dataset.frames)"))
    browser.execute_script("document.getElementById('live-panel').scrollIntoView()")
    wait.until(lambda d: d.execute_script("return live.controller !== null"))
    wait.until(lambda d: d.execute_script(
        "return Number(document.getElementById('live-picture').dataset.frames) >= 1 && live.frames >= 1"))
    assert frames >= 2
    browser.get("about:blank")  # the page's live view closes with it


# ------------------------------------------------------------------------------------------------ review


def test_coverage_runs_and_gaps() -> None:
    times = np.concatenate([np.arange(0, 30, 0.5), np.arange(45, 90, 0.5)])
    assert coverage(times, 2.0, 0.0, 90.0) == ([[0.0, 30.0], [45.0, 90.0]], False)
    # thinned by retention before 40 s: a frame every 10 s there is no gap
    thinned = np.concatenate([np.arange(0, 40, 10.0), np.arange(40, 60, 0.5)])
    assert coverage(thinned, 2.0, 40.0, 60.0) == ([[0.0, 60.0]], False)
    assert coverage(np.array([]), 2.0, 0.0, 0.0) == ([], False)


def test_recorded_runs_join_touching_segments(tmp_path: Path) -> None:
    folder = recordings_dir(tmp_path, "cam")
    folder.mkdir(parents=True)
    for start, end in ((0.0, 10.0), (10.0, 20.0), (50.0, 60.0)):
        (folder / segment_name(start, end)).write_bytes(b"")
    (folder / "not-a-segment.txt").write_bytes(b"")
    svc = SimpleNamespace(settings=SimpleNamespace(data=tmp_path))
    assert recorded(svc, "cam", 61.0) == ([[0.0, 20.0], [50.0, 60.0]], False)  # type: ignore[arg-type]
    assert recorded(svc, "other", 61.0) == ([], False)  # type: ignore[arg-type]


def _reviewed(server: LucyServer) -> dict[str, Any]:
    """A stream with frames 0-30 s and 45-90 s (a gap between), three tracked objects, a text read, an alert and
    an answered question whose evidence is 60-70 s."""
    settings = load_settings(data=server.data)
    store = open_frames(settings).create(REVIEWED, source=f"/videos/{REVIEWED}.mp4", live=False, width=160,
                                         height=90, stored_fps=2.0, codec="zstd", quality=90)
    times = np.concatenate([np.arange(0, 30, 0.5), np.arange(45, 90, 0.5)])
    frames = np.zeros((len(times), 90, 160, 3), np.uint8)
    frames[..., 0] = (times * 2.8).astype(np.uint8)[:, None, None]  # red grows with time: frames differ
    frames[..., 2] = 120
    store.append(frames, times)
    store.mark_finished(complete=True, lost=None)
    tracks = [track(1, "person", 5.0, 12.0, snapshot=SNAPSHOT), track(2, "car", 50.0, 80.0),
              track(3, HOSTILE, 20.0, 24.0)]
    record(server.data, Observations(stream=REVIEWED, until=90.0,
                                     tracks=[dataclasses.replace(t, stream=REVIEWED) for t in tracks]))
    memory = open_memory(settings)
    try:
        memory.add(MemoryNode(stream=REVIEWED, level="coarse", start=0.0, end=60.0, text=(
            'Scenes: blue.\nOn-screen text (read by OCR):\n- "PLATE KX-4821" (bottom left, white letters on gray, '
            f'seen 20-28 s)\n- "{HOSTILE}" (top, seen 50-52 s)')))
        qid = memory.add_question(REVIEWED, "Which car parked?")
        memory.set_answer(qid, {"answer": "a white car", "confident": True, "evidence": [
            {"start": 60.0, "end": 70.0}], "reason": "seen"})
    finally:
        memory.close()
    with server.client() as c:
        watch = c.post(f"/v1/streams/{REVIEWED}/watches", json={"question": "Tell me when a car parks"}).json()
    store_alert(server, watch["id"], REVIEWED, "Tell me when a car parks", 10.0)  # its span: 10-70 s
    with server.client() as c:
        r = c.get(f"/v1/streams/{REVIEWED}/timeline")
    assert r.status_code == 200, r.text
    return r.json()


def _count(driver: webdriver.Chrome, selector: str) -> int:
    return int(driver.execute_script("return document.querySelectorAll(arguments[0]).length", selector))


def test_review_page_draws_the_timeline_plays_and_moves_by_keyboard(shared_server: LucyServer,
                                                                    browser: webdriver.Chrome) -> None:  # noqa: F811
    body = _reviewed(shared_server)
    # the one request the page makes: every part, bounded
    assert body["coverage"] == [[0.0, 30.0], [45.0, 90.0]] and body["frames"] == 150
    assert [o["id"] for o in body["objects"]] == [1, 3, 2] and len(body["alerts"]) == 1
    assert [t["text"] for t in body["texts"]] == ["PLATE KX-4821", HOSTILE]
    assert body["questions"][0]["evidence"] == [{"start": 60.0, "end": 70.0}]
    with shared_server.client() as c:
        assert c.get("/v1/streams/nobody/timeline").status_code == 404
        assert c.get(f"/v1/streams/{REVIEWED}/timeline", params={"from": 50, "to": 40}).status_code == 422
        assert c.get(f"/v1/streams/{REVIEWED}/timeline", params={"from": "nan"}).status_code == 422
        window = c.get(f"/v1/streams/{REVIEWED}/timeline", params={"from": 40, "to": 90}).json()
        assert [o["id"] for o in window["objects"]] == [2] and [t["text"] for t in window["texts"]] == [HOSTILE]
        clip_status = c.get(f"/v1/streams/{REVIEWED}/clip", params={"from": 0, "to": 4}).status_code
    browser.set_window_size(1400, 1000)
    browser.get(f"{shared_server.url}/review/{REVIEWED}")
    wait = _wait(browser, 60)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded"))
    assert browser.find_element(By.ID, "stream-title").text == REVIEWED
    # the lanes: two runs of frames with the gap between, three objects, the alert, two texts, one answer
    assert _count(browser, "#review-timeline rect.coverage") == 2 and _count(browser, "#review-timeline rect.gap") == 1
    assert _count(browser, "#review-timeline rect.event.object") == 3
    assert _count(browser, "#review-timeline rect.event.alert") == 1
    assert _count(browser, "#review-timeline rect.event.text") == 2
    assert _count(browser, "#review-timeline rect.event.answer") == 1
    # the list: video text shown as text, never markup
    texts = browser.execute_script("return [...document.querySelectorAll('#events li .text')].map(e => e.textContent)")
    assert f"“{HOSTILE}”" in texts and f"{HOSTILE} #3" in texts and "Which car parked?" in texts
    assert not browser.find_elements(By.CSS_SELECTOR, "#events img:not(.snap), #review-timeline img")
    wait.until(lambda d: d.execute_script(
        "const i = document.querySelector('#events img.snap'); return i && i.naturalWidth > 0"))
    # the first frame shows at once; hover shows the frame under the pointer
    wait.until(lambda d: d.execute_script("const i = document.getElementById('still');"
                                          "return !i.hidden && i.naturalWidth > 0 && i.dataset.time === '0'"))
    svg = browser.find_element(By.ID, "review-timeline")
    ActionChains(browser).move_to_element_with_offset(svg, svg.size["width"] // 4, 0).perform()
    wait.until(lambda d: d.execute_script("const i = document.getElementById('hover-img');"
                                          "return !document.getElementById('hover').hidden && i.naturalWidth > 0"))
    _shot(browser, "review-1400-hover.png")
    # keyboard: arrows move the cursor (and the frame shown), Shift jumps to the next event, Enter plays
    track = browser.find_element(By.ID, "track")
    track.send_keys(Keys.HOME)
    track.send_keys(Keys.ARROW_RIGHT)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-cursor") == "1.000")
    wait.until(lambda d: d.execute_script("return document.getElementById('still').dataset.time === '1'"))
    track.send_keys(Keys.SHIFT, Keys.ARROW_RIGHT)
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-cursor") == "5.000"  # the person comes in
    assert track.get_attribute("aria-valuetext") == "0:05"
    track.send_keys(Keys.ENTER)
    if clip_status == 200:  # the clips endpoint (recordings and clips) is there: the clip plays
        played = _wait(browser, 60).until(lambda d: d.execute_script(
            "const v = document.getElementById('player');"
            "return (Number(v.dataset.duration) > 1 || v.error) && [Number(v.dataset.duration),"
            "v.error && v.error.code, document.getElementById('player-note').textContent]"))
        assert (played[0] or 0) > 1, played
        assert "clip person #1" in browser.find_element(By.ID, "player-note").text
    else:  # without it: the still frame of the span's start, and why
        wait.until(EC.text_to_be_present_in_element((By.ID, "player-note"), "no clip"))
        assert browser.execute_script("return document.getElementById('still').naturalWidth") > 0
    _shot(browser, "review-1400.png")
    browser.set_window_size(390, 844)
    time.sleep(0.6)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390  # no sideways scroll
    assert _count(browser, "#review-timeline rect.event.object") == 3  # redrawn to the phone's width
    _shot(browser, "review-390.png")
    browser.execute_script("document.getElementById('events-panel').scrollIntoView()")
    _shot(browser, "review-390-events.png")
    browser.set_window_size(1280, 1000)
