"""`lucy search` from the command line, on a generated video ingested with the embedded captioner: two coarse
spans, each with its own sign and colour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lucy.synth import PALETTE, Overlay, Scene, write_video

ENV = {"LUCY_INGEST__FRAME_WIDTH": "320", "LUCY_INGEST__FRAME_HEIGHT": "180",
       "LUCY_CAPTIONER__PIXELS__COARSE_MAX_FRAMES": "8", "LUCY_CAPTIONER__MAX_IN_FLIGHT": "2"}
HIT_KEYS = {"stream", "level", "start", "end", "text", "score", "lexical_rank", "semantic_rank", "similarity",
            "node_id", "origin"}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stream ``cam``: 0-60 s teal with a "PLATFORM 7" sign, 60-120 s red with "STORE CLOSES AT 9 PM"."""
    from tests.conftest import _run_lucy

    root = tmp_path_factory.mktemp("search")
    video = write_video(root / "v.mp4", duration=120, fps=4, width=320, height=180,
                        scenes=[Scene(0, 60, PALETTE["teal"]), Scene(60, 120, PALETTE["red"])],
                        overlays=[Overlay(10, 30, "PLATFORM 7", size=0.12, x=0.05, y=0.1),
                                  Overlay(75, 95, "STORE CLOSES AT 9 PM", size=0.09, x=0.05, y=0.1)])
    done = _run_lucy("ingest", str(video), "--stream", "cam", "--captioner", "pixels", "--preset", "live",
                     "--data", str(root / "data"), env=ENV, timeout=180)
    assert done.returncode == 0, done.stderr
    return root / "data"


def search(run_lucy, data: Path, *args: str):
    return run_lucy("search", *args, "--data", str(data), env=ENV, timeout=120)


def test_search_prints_each_moment_with_its_time_level_and_caption(run_lucy, data):
    found = search(run_lucy, data, "platform sign", "--stream", "cam")
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert lines[0].startswith("cam: ") and "for 'platform sign'" in lines[0]
    assert lines[1].startswith("searched by words")
    assert lines[2].startswith("[0:00:00.0 - 0:01:00.0] coarse  score ")
    # the caption's lines with the query's words, then how many were left out
    assert lines[3].startswith('    - "PLATFORM 7" (top left, ')
    assert lines[4].startswith("    … ") and lines[4].endswith(" more lines")
    # a span without the words shows its first lines (up to 3), each at most 100 characters
    later = lines[lines.index(next(x for x in lines if x.startswith("[0:01:00.0 - 0:02:00.0] coarse"))) + 1:]
    assert later[0].startswith("    Clip 60.0-") and all(len(x) <= 104 for x in later[:3])


def test_search_json_ranks_the_span_whose_words_match(run_lucy, data):
    found = search(run_lucy, data, "when does the store close", "--stream", "cam", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits and set(hits[0]) == HIT_KEYS
    best = hits[0]
    assert (best["stream"], best["level"], best["start"], best["end"]) == ("cam", "coarse", 60.0, 120.0)
    assert "STORE CLOSES AT 9 PM" in best["text"] and best["origin"] == "ingest"
    assert isinstance(best["node_id"], int) and best["lexical_rank"] == 1
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_search_filters_by_time_level_and_limit(run_lucy, data):
    late = json.loads(search(run_lucy, data, "platform", "--stream", "cam", "--start", "70", "--json").stdout)
    assert all(h["end"] > 70 for h in late) and not any("PLATFORM 7" in h["text"] for h in late)
    early = json.loads(search(run_lucy, data, "store closes", "--stream", "cam", "--end", "50", "--json").stdout)
    assert all(h["start"] < 50 for h in early) and not any("STORE CLOSES" in h["text"] for h in early)
    one = json.loads(search(run_lucy, data, "clip scenes colours", "--stream", "cam", "--limit", "1", "--json").stdout)
    assert len(one) == 1
    speech = search(run_lucy, data, "platform", "--stream", "cam", "--level", "speech")
    assert speech.returncode == 0, speech.stderr
    assert "cam: 0 matches" in speech.stdout
    assert "no memory matches; try other words or `lucy memory --stream cam`" in speech.stdout


def test_search_errors(run_lucy, data):
    unknown = search(run_lucy, data, "platform", "--stream", "nope")
    assert unknown.returncode == 1  # as `lucy memory` and `lucy ask` for a stream that is not there
    assert unknown.stderr.strip().count("\n") == 0
    assert "no stream named 'nope'" in unknown.stderr and "(streams: cam)" in unknown.stderr
    empty = search(run_lucy, data, "   ", "--stream", "cam")
    assert empty.returncode == 1 and "search text is empty" in empty.stderr
    for bad in (["--limit", "0"], ["--limit", "101"], ["--level", "medium"]):
        refused = search(run_lucy, data, "platform", "--stream", "cam", *bad)
        assert refused.returncode == 2 and "usage:" in refused.stderr.lower()
    backwards = search(run_lucy, data, "platform", "--stream", "cam", "--start", "50", "--end", "10")
    assert backwards.returncode == 1 and "--end (10) must be after --start (50)" in backwards.stderr


def test_search_finds_other_words_of_the_same_meaning(run_lucy, data):
    from lucy.config import load_settings
    from lucy.memory.embedders import make_embedder

    if make_embedder(load_settings(data=data)) is None:
        pytest.skip("the local embedder cannot run on this CPU (it needs x86-64 with AVX2)")
    found = search(run_lucy, data, "shop opening hours", "--stream", "cam")
    assert "searched by words + meaning (local multilingual-e5-small" in found.stdout
    hits = json.loads(search(run_lucy, data, "shop opening hours", "--stream", "cam", "--json").stdout)
    best = hits[0]  # no word in common with "STORE CLOSES AT 9 PM": found by meaning alone
    assert (best["start"], best["lexical_rank"], best["semantic_rank"]) == (60.0, None, 1)
    assert best["similarity"] > hits[1]["similarity"]


def test_search_by_words_only(run_lucy, data):
    found = run_lucy("search", "shop opening hours", "--stream", "cam", "--data", str(data), timeout=120,
                     env={**ENV, "LUCY_EMBEDDER__BACKEND": "none"})
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[:2] == ["cam: 0 matches for 'shop opening hours'",
                                             "searched by words only: embedder.backend is 'none'"]
    words = json.loads(run_lucy("search", "store", "--stream", "cam", "--data", str(data), "--json", timeout=120,
                                env={**ENV, "LUCY_EMBEDDER__BACKEND": "none"}).stdout)
    assert [h["start"] for h in words] == [60.0]
    assert words[0]["semantic_rank"] is None and words[0]["similarity"] is None
