"""Frame retention in a real ``lucy serve``: the maintainer thins and drops a stream's old frames (and leaves a
stream it does not record alone), the frames endpoint never serves a deleted frame, questions about expired spans
answer from memory without captioning, and the storage metrics are exported."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from lucy.config import load_settings
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.wiring import open_frames
from tests.service.conftest import LucyServer, wait_for


def _samples(server: LucyServer, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    with server.client() as c:
        text = c.get("/metrics").text
    return {tuple(sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


def _chunk_bytes(data: Path, stream: str) -> int:
    return sum(f.stat().st_size for f in (data / "frames.zarr" / stream / "frames").glob("c.*"))


def test_retention_in_a_running_server(lucy_server, videos, tmp_path) -> None:
    data = tmp_path / "data"
    # First without retention, so that all of the video is captioned into memory...
    server = lucy_server(data=data)
    with server.client() as c:
        assert c.post("/v1/streams", json={"name": "ret", "source": str(videos["a"])}).status_code == 201
    server.wait_captioned("ret")
    server.stop()
    # A stream recorded beside the server (as by `lucy ingest`): not the server's, so retention never touches it.
    assert Ingestor(load_settings(data=data), str(videos["b"]), "beside",
                    frames=open_frames(load_settings(data=data))).run().complete
    beside = ZarrFrameStore.open(data, "beside")
    kept = (len(beside.times()), _chunk_bytes(data, "beside"))

    # ... then with it (ages scaled down: the 150 s video's newest frame is at 149.5 s).
    server = lucy_server(data=data, retention={"full_seconds": 9.5, "keep_seconds": 29.5, "interval_seconds": 0.2,
                                               "min_free_bytes": 0},
                         query={"init_spans": 1, "neighbours": 0, "max_iterations": 1})
    # both kinds: one scrape may come between the maintainer's thinning and its dropping
    expired = {(("reason", "expired"), ("stream", "ret")), (("reason", "thinned"), ("stream", "ret"))}
    wait_for(lambda: expired <= set(_samples(server, "lucy_frame_freed_bytes_total")), 60,
             "the maintainer to thin and drop old frames")
    freed = _samples(server, "lucy_frame_freed_bytes_total")
    assert freed[(("reason", "expired"), ("stream", "ret"))] > 0
    assert freed[(("reason", "thinned"), ("stream", "ret"))] > 0
    wait_for(lambda: _samples(server, "lucy_frame_stored_bytes").get((("stream", "ret"),))
             == _chunk_bytes(data, "ret"), 30, "bytes stored to match the disk")
    assert (len(beside.times()), _chunk_bytes(data, "beside")) == kept
    assert (beside.info().expired_before, beside.info().thinned_before) == (0.0, 0.0)
    assert (("stream", "beside"),) not in _samples(server, "lucy_frame_stored_bytes")

    with server.client() as c:
        for t in (5.0, 60.0):  # expired: said so, not shown another moment's frame
            r = c.get("/v1/streams/ret/frames", params={"t": t})
            assert r.status_code == 404 and "have expired (retention)" in r.json()["detail"], r.text
        for t in (121.0, 130.3, 141.0, 149.0):  # thinned and whole stretches
            r = c.get("/v1/streams/ret/frames", params={"t": t})
            assert r.status_code == 200, r.text
            shown = float(r.headers["X-Lucy-Frame-Time"])
            assert shown >= 120.0  # nothing before the expired boundary is ever served
            if shown < 140.0:
                assert shown % 2.0 == 0.0  # thinned to the coarse rate (0.5 fps): one frame per 2 s slot
            assert max(Image.open(io.BytesIO(r.content)).convert("L").getextrema()) > 0  # never a black fill

        # The plate was shown at 20-40 s: its frames are gone, its memory is not.
        r = c.post("/v1/streams/ret/questions",
                   json={"question": "What colour was the car with PLATE KX-4821?",
                         "options": ["red", "silver", "black"]})
        assert r.status_code == 200, r.text
        answer = r.json()
    assert answer["caption_calls"] == 0
    assert "frames before 120 s have expired (retention)" in answer["errors"]
    assert any(s["agent"] == "caption" and "expired" in (s.get("error") or "") for s in answer["trace"])
    assert answer["answer"] in ("red", "silver", "black")
    assert "Traceback" not in server.log()
