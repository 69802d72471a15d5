"""``GET /v1/streams/{name}/clip`` against a real ``lucy serve``: a playable MP4 with its file name, the bad requests'
errors, and Chromium's ``<video>`` playing the clip (the dashboard tests' browser)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import av
import pytest
from selenium import webdriver

from lucy.ingest.recording import SegmentWriter
from lucy.ingest.segments import recordings_dir
from tests.service.conftest import SHORT_SECONDS, LucyServer, wait_for
from tests.service.test_dashboard import browser  # noqa: F401  (the module's headless Chromium)

STREAM = "clipcam"


@pytest.fixture(scope="module")
def clipcam(shared_server: LucyServer, videos: dict[str, Path]) -> str:
    """Stream ``clipcam`` (the short video), ingested to its end."""
    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": STREAM, "source": str(videos["short"]), "captioner": "none"})
        assert r.status_code == 201, r.text
        wait_for(lambda: c.get(f"/v1/streams/{STREAM}").json()["state"] == "finished", 120, "ingest to finish")
    return STREAM


def _seconds(body: bytes) -> tuple[float, int]:
    """Duration of the video track and the number of pictures that decode."""
    with av.open(io.BytesIO(body)) as container:
        times = [float(f.pts * f.time_base) for f in container.decode(video=0)]
        rate = float(container.streams.video[0].average_rate or 6)
    return max(times) - min(times) + 1.0 / rate, len(times)


def test_clip_of_a_file_stream_is_a_playable_mp4(shared_server: LucyServer, clipcam: str) -> None:
    with shared_server.client() as c:
        r = c.get(f"/v1/streams/{clipcam}/clip", params={"from": 2, "to": 8})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "video/mp4"
    assert r.headers["content-disposition"] == 'inline; filename="clipcam_2-8s.mp4"'
    assert r.headers["x-lucy-clip-origin"] == "source"  # a file is its own recording
    start = float(r.headers["x-lucy-clip-start"])
    assert 0.0 <= start <= 2.0  # the keyframe at or before 2 s (this file has one at its start)
    seconds, pictures = _seconds(r.content)
    assert seconds == pytest.approx(8.0 - start, abs=0.3) and pictures >= (8.0 - start) * 6 - 2


def test_bad_clip_requests_get_one_clear_error(shared_server: LucyServer, clipcam: str) -> None:
    with shared_server.client() as c:
        cases = {
            "to before from": (c.get(f"/v1/streams/{clipcam}/clip", params={"from": 8, "to": 2}), 422,
                               "must be after from"),
            "too long": (c.get(f"/v1/streams/{clipcam}/clip", params={"from": 0, "to": 400}), 422,
                         "at most 300 s long (recording.max_clip_seconds)"),
            "negative": (c.get(f"/v1/streams/{clipcam}/clip", params={"from": -3, "to": 2}), 422, "negative"),
            "unknown stream": (c.get("/v1/streams/nosuch/clip", params={"from": 0, "to": 2}), 404,
                               "no stream 'nosuch'"),
            "beyond the stream": (c.get(f"/v1/streams/{clipcam}/clip", params={"from": 100, "to": 110}), 404,
                                  f"(it covers 0.0-{SHORT_SECONDS:.1f} s)"),
        }
        missing = c.get(f"/v1/streams/{clipcam}/clip", params={"from": 1})
    for what, (r, status, says) in cases.items():
        assert r.status_code == status, (what, r.text)
        assert says in r.json()["detail"], (what, r.text)
        assert "Traceback" not in r.text
    assert missing.status_code == 422 and "to" in missing.text


def test_chromium_plays_a_clip_and_reports_its_duration(shared_server: LucyServer, clipcam: str,
                                                        browser: webdriver.Chrome) -> None:  # noqa: F811
    browser.get(shared_server.url + "/")
    state = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const video = document.createElement('video');
        video.muted = true;
        video.src = arguments[0];
        video.addEventListener('error', () => done({error: video.error && video.error.code}));
        video.addEventListener('loadedmetadata', async () => {
          const duration = video.duration;
          try { await video.play(); } catch (e) { done({error: String(e)}); return; }
          setTimeout(() => done({duration, time: video.currentTime, paused: video.paused,
                                 width: video.videoWidth}), 1500);
        });
        document.body.appendChild(video);
        """, f"/v1/streams/{clipcam}/clip?from=2&to=8")
    assert "error" not in state, state
    # 6 s as asked: the pictures from the keyframe before 2 s are decoded, not shown (the MP4 edit list)
    assert 5.8 <= state["duration"] <= 6.3 and state["width"] == 320
    assert state["time"] > 0.5 and not state["paused"]  # it plays


def test_recorded_segments_are_listed_and_clips_are_cut_from_them(shared_server: LucyServer, clipcam: str,
                                                                   videos: dict[str, Path]) -> None:
    folder = recordings_dir(shared_server.data, clipcam)
    writer = SegmentWriter(folder, 4.0, clipcam)  # the stream's file re-muxed as a recorder would (media time 0)
    try:
        with av.open(str(videos["short"])) as container:
            video = container.streams.video[0]
            writer.connect(video, None)
            writer.anchor(0.0)
            for packet in container.demux(video):
                packet.decode()  # a source hands packets over once decoded
                writer.packet(packet)
        writer.close()
        with shared_server.client() as c:
            listed = c.get(f"/v1/streams/{clipcam}/recordings")
            clip = c.get(f"/v1/streams/{clipcam}/clip", params={"from": 5, "to": 9})
            unknown = c.get("/v1/streams/nosuch/recordings")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert listed.status_code == 200, listed.text
    segments = listed.json()["segments"]
    assert segments and segments[0]["start"] == 0.0 and not any(s["open"] for s in segments)
    assert segments[-1]["end"] == pytest.approx(SHORT_SECONDS, abs=0.2)
    assert all(a["end"] == pytest.approx(b["start"], abs=0.2) for a, b in zip(segments, segments[1:], strict=False))
    assert clip.status_code == 200 and clip.headers["x-lucy-clip-origin"] == "recording"
    start = float(clip.headers["x-lucy-clip-start"])
    assert start <= 5.0 and _seconds(clip.content)[0] == pytest.approx(9.0 - start, abs=0.3)
    assert unknown.status_code == 404 and "no stream 'nosuch'" in unknown.json()["detail"]
