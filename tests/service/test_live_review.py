"""The live view (MJPEG of a stream's newest stored frames), against the shared real
``lucy serve`` and in the real headless Chromium of the dashboard's tests. Screenshots go to /tmp/review-shots/."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC

from lucy.config import LucySettings
from tests.service.conftest import LucyServer, wait_for
from tests.service.test_dashboard import _open, browser  # noqa: F401  (the module's Chromium)

SHOTS = Path("/tmp/review-shots")
LIVE = "porch"  # a file read at its own pace, as a camera delivers


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
    browser.execute_script("document.getElementById('live-panel').scrollIntoView()")
    frames = int(browser.execute_script("return Number(document.getElementById('live-picture').dataset.frames)"))
    wait.until(lambda d: d.execute_script("return live.controller !== null"))
    wait.until(lambda d: d.execute_script(
        "return Number(document.getElementById('live-picture').dataset.frames) >= 1 && live.frames >= 1"))
    assert frames >= 2
    browser.get("about:blank")  # the page's live view closes with it
