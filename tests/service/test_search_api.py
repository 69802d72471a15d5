"""``GET /v1/streams/{name}/search`` on a real server: a stream's memory found by its words and by their meaning,
filters, errors in the API's shape, and a frame for each hit."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from lucy.config import load_settings
from lucy.memory.embedders import make_embedder
from lucy.service.errors import NotFound
from lucy.service.memory_pages import frame_urls
from tests.service.conftest import LucyServer

HIT_KEYS = {"stream", "node_id", "level", "start", "end", "text", "snippet", "origin", "score", "lexical_rank",
            "semantic_rank", "similarity", "frame_url"}


@pytest.fixture(scope="module")
def shop(shared_server: LucyServer, videos: dict[str, Path]) -> str:
    """Video ``c`` as stream ``shop``: blue then green, "STORE CLOSES AT 9 PM" from 100 to 130 s."""
    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "shop", "source": str(videos["c"])})
        assert r.status_code == 201, r.text
    shared_server.wait_captioned("shop")
    return "shop"


def test_search_finds_a_caption_by_its_words(shared_server: LucyServer, shop: str) -> None:
    with shared_server.client() as c:
        r = c.get(f"/v1/streams/{shop}/search", params={"q": "store closes"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["stream"] == shop and body["streams"] == [shop] and body["query"] == "store closes"
    assert body["no_match"] is False
    hits = body["hits"]
    assert hits and all(set(h) == HIT_KEYS for h in hits)
    best = hits[0]  # either span that shows the sign (their similarities to the words differ by a thousandth)
    assert "STORE CLOSES" in best["text"] and best["start"] in (60.0, 120.0) and best["level"] == "coarse"
    assert {h["start"] for h in hits[:2]} == {60.0, 120.0} and {h["lexical_rank"] for h in hits[:2]} == {1, 2}
    assert best["origin"] == "ingest" and isinstance(best["node_id"], int)
    assert all(0.3 <= h["score"] <= 1 for h in hits)  # relevance, 0-1, at least the floor
    assert all(0 < h["score"] <= 1 for h in hits) and "STORE CLOSES" in best["snippet"]
    assert len({(h["start"], h["end"]) for h in hits}) == len(hits)  # one result per span


def test_search_says_when_nothing_matches(shared_server: LucyServer, shop: str) -> None:
    with shared_server.client() as c:
        for path in (f"/v1/streams/{shop}/search", "/v1/search"):
            body = c.get(path, params={"q": "an elephant bathing in a swimming pool"}).json()
            assert body["hits"] == [] and body["no_match"] is True, path


def test_search_across_streams(shared_server: LucyServer, shop: str) -> None:
    with shared_server.client() as c:
        body = c.get("/v1/search", params={"q": "store closes"}).json()
        assert body["stream"] is None or body["streams"] == [shop]
        assert shop in body["streams"] and any(h["stream"] == shop for h in body["hits"])
        some = c.get("/v1/search", params={"q": "store closes", "streams": f"{shop}, {shop}"}).json()
        assert some["streams"] == [shop] and some["hits"] and {h["stream"] for h in some["hits"]} == {shop}
        assert some["hits"] == c.get(f"/v1/streams/{shop}/search", params={"q": "store closes"}).json()["hits"]
        r = c.get("/v1/search", params={"q": "store", "streams": f"{shop},nope"})
        assert r.status_code == 404 and "nope" in r.json()["detail"]
        for params in ({"q": "store", "streams": " , "}, {"q": "store", "from": 50, "to": 10}, {"q": " "}):
            r = c.get("/v1/search", params=params)
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", params


def test_search_finds_a_caption_by_its_meaning(shared_server: LucyServer, shop: str) -> None:
    if make_embedder(load_settings(data=shared_server.data)) is None:
        pytest.skip("the local embedder cannot run on this CPU (it needs x86-64 with AVX2)")
    with shared_server.client() as c:
        body = c.get(f"/v1/streams/{shop}/search", params={"q": "shop opening hours"}).json()
    assert body["semantic"] is True
    best = body["hits"][0]  # no word in common with the sign: found by meaning alone
    # either span that shows the sign (OCR reads it "STORE CLOSESAT9PM" in one, whole in the other), not the first
    assert "STORE CLOSES" in best["text"] and best["start"] in (60.0, 120.0)
    assert best["lexical_rank"] is None and best["semantic_rank"] == 1 and 0 < best["similarity"] <= 1


def test_search_filters(shared_server: LucyServer, shop: str) -> None:
    with shared_server.client() as c:
        def hits(**params: object) -> list[dict]:
            r = c.get(f"/v1/streams/{shop}/search", params={"q": "store closes", **params})
            assert r.status_code == 200, r.text
            return r.json()["hits"]

        early = hits(to=60)
        assert all(h["start"] < 60 for h in early)
        assert not any("STORE CLOSES" in h["text"] for h in early)  # the sign shows from 100 s
        assert hits(end=60) == early  # the names of before
        assert all(h["end"] > 120 for h in hits(**{"from": 120}))
        assert all(h["end"] > 120 for h in hits(start=120))
        assert hits(level="coarse") and all(h["level"] == "coarse" for h in hits(level="coarse"))
        assert hits(level="speech") == []  # the video has no sound
        assert len(hits(limit=1)) == 1


def test_search_errors_in_the_api_shape(shared_server: LucyServer, shop: str) -> None:
    with shared_server.client() as c:
        r = c.get("/v1/streams/nope/search", params={"q": "store"})
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "not_found" and "nope" in r.json()["detail"]
        r = c.get(f"/v1/streams/{shop}/search")
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "q"]
        for params in ({"q": ""}, {"q": "   "}, {"q": "x" * 501}, {"q": "store", "limit": 0},
                       {"q": "store", "limit": 101}, {"q": "store", "level": "medium"},
                       {"q": "store", "start": 50, "end": 10}, {"q": "store", "start": -1}):
            r = c.get(f"/v1/streams/{shop}/search", params=params)
            assert r.status_code == 422, (params, r.text)
            assert r.json()["error"]["code"] == "invalid_request"
        assert c.get(f"/v1/streams/{shop}/search", params={"q": "x" * 500}).status_code == 200


def test_each_hit_links_the_frame_at_its_middle(shared_server: LucyServer, shop: str) -> None:
    with shared_server.client() as c:
        hits = c.get(f"/v1/streams/{shop}/search", params={"q": "store closes", "limit": 5}).json()["hits"]
        for hit in hits:
            assert hit["frame_url"] is not None
            assert hit["frame_url"].startswith(f"/v1/streams/{shop}/frames?t=")
            r = c.get(hit["frame_url"] + "&width=160")
            assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
            shown = float(r.headers["X-Lucy-Frame-Time"])
            assert hit["start"] <= shown <= hit["end"]
            image = Image.open(io.BytesIO(r.content))
            assert image.size == (160, 90)


class _Frames:
    def __init__(self, times: list[float], available_from: float = 0.0) -> None:
        self._times, self._from = np.array(times), available_from

    def times(self) -> np.ndarray:
        return self._times

    def info(self) -> SimpleNamespace:
        return SimpleNamespace(stored_fps=2.0)

    def available_from(self) -> float:
        return self._from


def _no_frames(name: str) -> _Frames:
    raise NotFound(f"stream {name!r} has no frames yet")


def test_frame_url_is_none_where_no_frame_is_kept() -> None:
    kept = frame_urls(SimpleNamespace(reader=lambda name: _Frames([0.0, 0.5, 99.5], available_from=40.0)), "cam")
    assert kept(10.0) is None  # retention deleted the frames before 40 s
    assert kept(70.0) == "/v1/streams/cam/frames?t=70.000"
    assert kept(100.0) == "/v1/streams/cam/frames?t=100.000" and kept(100.5) is None  # past the last frame
    sound_only = frame_urls(SimpleNamespace(reader=lambda name: _Frames([])), "radio")
    assert sound_only(30.0) is None
    assert frame_urls(SimpleNamespace(reader=_no_frames), "radio")(30.0) is None
