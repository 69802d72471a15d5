"""`lucy search` from the command line, on a generated video ingested with the embedded captioner: two coarse
spans, each with its own sign and colour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lucy.synth import PALETTE, Overlay, Scene, write_video

ENV = {"LUCY_INGEST__FRAME_WIDTH": "320", "LUCY_INGEST__FRAME_HEIGHT": "180",
       "LUCY_CAPTIONER__PIXELS__COARSE_MAX_FRAMES": "8", "LUCY_CAPTIONER__MAX_IN_FLIGHT": "2"}
HIT_KEYS = {"stream", "level", "start", "end", "text", "snippet", "score", "lexical_rank", "semantic_rank",
            "similarity", "node_id", "origin"}


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


def test_search_prints_each_moment_with_its_time_level_and_the_line_that_matched(run_lucy, data):
    found = search(run_lucy, data, "platform sign", "--stream", "cam")
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert lines[0].startswith("cam: ") and lines[0].endswith(" for 'platform sign'")
    assert lines[1].startswith("searched by words")
    assert lines[2].startswith("[0:00:00.0 - 0:01:00.0] coarse  score ")
    assert 0.3 <= float(lines[2].rsplit(" ", 1)[1]) <= 1.0
    # the caption's line with the query's words, not its "Clip 0.0-59.8 s (coarse look: ..." header
    assert lines[3].startswith('    - "PLATFORM 7" (top left, ')
    assert not any(line.startswith("    Clip ") for line in lines)


def test_search_says_when_nothing_matches_well(run_lucy, data):
    found = search(run_lucy, data, "an elephant bathing in a swimming pool", "--stream", "cam")
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines() == [
        "cam: no good match for 'an elephant bathing in a swimming pool'", found.stdout.splitlines()[1],
        "nothing in memory is close enough to show; try other words or `lucy memory --stream cam`"]
    assert json.loads(search(run_lucy, data, "an elephant bathing in a swimming pool", "--json").stdout) == []


def test_search_json_ranks_the_span_whose_words_match(run_lucy, data):
    found = search(run_lucy, data, "when does the store close", "--stream", "cam", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits and set(hits[0]) == HIT_KEYS
    best = hits[0]
    assert (best["stream"], best["level"], best["start"], best["end"]) == ("cam", "coarse", 60.0, 120.0)
    assert "STORE CLOSES AT 9 PM" in best["text"] and best["origin"] == "ingest"
    assert isinstance(best["node_id"], int) and best["lexical_rank"] == 1
    assert all(0.3 <= h["score"] <= 1 for h in hits)  # relevance, 0-1, at least the floor


def test_search_filters_by_time_level_and_limit(run_lucy, data):
    late = json.loads(search(run_lucy, data, "platform", "--stream", "cam", "--from", "70", "--json").stdout)
    assert all(h["end"] > 70 for h in late) and not any("PLATFORM 7" in h["text"] for h in late)
    early = json.loads(search(run_lucy, data, "store closes", "--stream", "cam", "--to", "50", "--json").stdout)
    assert all(h["start"] < 50 for h in early) and not any("STORE CLOSES" in h["text"] for h in early)
    # the names of before, hidden from --help, still work (with a note)
    old = search(run_lucy, data, "store closes", "--stream", "cam", "--end", "50", "--json")
    assert json.loads(old.stdout) == early and "--start/--end are now --from/--to" in old.stderr
    help_text = run_lucy("search", "--help", env={**ENV, "COLUMNS": "200"}).stdout
    assert "--from" in help_text and "--to" in help_text and "--start" not in help_text and "--end" not in help_text
    one = json.loads(search(run_lucy, data, "red scene", "--stream", "cam", "--limit", "1", "--json").stdout)
    assert len(one) == 1
    speech = search(run_lucy, data, "platform", "--stream", "cam", "--level", "speech")
    assert speech.returncode == 0, speech.stderr
    assert "cam: no good match for 'platform'" in speech.stdout


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
    backwards = search(run_lucy, data, "platform", "--stream", "cam", "--from", "50", "--to", "10")
    assert backwards.returncode == 1 and "--to (10) must be after --from (50)" in backwards.stderr
    assert search(run_lucy, data, "platform", "--stream", "cam,nope").returncode == 1
    assert search(run_lucy, data, "platform", "--stream", " , ").returncode == 1


def test_search_of_a_data_directory_without_streams_says_how_to_make_one(run_lucy, tmp_path):
    """It used to suggest other words, as if something in memory had been near."""
    done = search(run_lucy, tmp_path / "empty", "a red van")
    assert done.returncode == 0, done.stderr
    assert "no stream yet" in done.stdout and "ingest FILE --stream NAME" in done.stdout
    assert "other words" not in done.stdout


def test_search_finds_other_words_of_the_same_meaning(run_lucy, data):
    from lucy.config import load_settings
    from lucy.memory.embedders import make_embedder

    if make_embedder(load_settings(data=data)) is None:
        pytest.skip("the local embedder cannot run on this CPU (it needs x86-64 with AVX2)")
    found = search(run_lucy, data, "shop opening hours", "--stream", "cam")
    assert found.stdout.splitlines()[1] == "searched by words + meaning"  # no model ids: `lucy config` has them
    hits = json.loads(search(run_lucy, data, "shop opening hours", "--stream", "cam", "--json").stdout)
    best = hits[0]  # no word in common with "STORE CLOSES AT 9 PM": found by meaning alone
    assert (best["start"], best["lexical_rank"], best["semantic_rank"]) == (60.0, None, 1)
    assert all(best["similarity"] > h["similarity"] for h in hits[1:])


def test_search_by_words_only(run_lucy, data):
    found = run_lucy("search", "shop opening hours", "--stream", "cam", "--data", str(data), timeout=120,
                     env={**ENV, "LUCY_EMBEDDER__BACKEND": "none"})
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[:2] == ["cam: no good match for 'shop opening hours'",
                                             "searched by words only: embedder.backend is 'none'"]
    words = json.loads(run_lucy("search", "store", "--stream", "cam", "--data", str(data), "--json", timeout=120,
                                env={**ENV, "LUCY_EMBEDDER__BACKEND": "none"}).stdout)
    assert [h["start"] for h in words] == [60.0]
    assert words[0]["semantic_rank"] is None and words[0]["similarity"] is None


def test_search_across_streams(run_lucy, data, tmp_path):
    """Every stream by default, some with --stream a,b; each hit names its stream."""
    import shutil

    from lucy.memory.nodes import MemoryNode
    from lucy.memory.sqlite_store import SQLiteMemoryStore

    both = tmp_path / "data"
    shutil.copytree(data, both)
    memory = SQLiteMemoryStore(both / "memory.sqlite")
    memory.add(MemoryNode(stream="yard", level="coarse", start=0, end=60,
                          text="Clip 0.0-59.5 s (coarse look: 8 frames).\nText:\n- \"PLATFORM 9\" (bottom right)"))
    memory.close()
    for args in ([], ["--stream", "cam,yard"]):
        hits = json.loads(search(run_lucy, both, "platform", *args, "--json").stdout)
        assert {h["stream"] for h in hits} == {"cam", "yard"}, args
    printed = search(run_lucy, both, "platform", "--stream", "yard,cam").stdout.splitlines()
    assert printed[0] == "yard, cam: 2 matches for 'platform'"
    assert {line.split(" ")[0] for line in printed[2::2]} == {"cam", "yard"}
    assert '    - "PLATFORM 9" (bottom right)' in printed
    only = json.loads(search(run_lucy, both, "platform", "--stream", "yard", "--json").stdout)
    assert [h["stream"] for h in only] == ["yard"]
