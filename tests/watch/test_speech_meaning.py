"""Speech watches by meaning (lucy/watch/meaning.py) with the default local embedder: a line that says the watch's
subject in other words is a match, and the kinds of line that the plain cosine of phrases took for one are not (a
line that shares one word of a two-word subject; a line near it only in what every announcement shares). The lines
and subjects here are of none of the benchmarks' sets."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from lucy.config import load_settings
from lucy.memory.embedders import make_embedder
from lucy.memory.nodes import MemoryNode
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.memory.transcribers.base import TranscriptLine, format_transcript
from lucy.query.reasoners.lexical import LexicalReasoner
from lucy.query.reasoners.lexical_watch import MEANING_FLOOR, watch_subject
from lucy.text import terms
from lucy.watch.checker import WatchChecker
from lucy.watch.meaning import SpeechMeaning, phrases
from lucy.wiring import open_frames

# (watch, a line that means what it waits for in other words, a line that does not although the plain cosine of its
# best phrase reached the old floor, 0.80)
CASES = [
    ("Is there an announcement about a closed road?", "The high street is blocked to traffic until further notice.",
     "The museum closes in fifteen minutes."),
    ("Tell me when they mention free food", "Complimentary snacks are now being handed out in the main hall.",
     "Breakfast is served in the dining room from seven."),
    ("Is there an announcement about a storm?", "Heavy winds and thunder are expected this afternoon, stay indoors.",
     "Please stand clear of the closing doors."),
    ("Tell me when someone mentions a refund", "You can get your money back at the customer service counter.",
     "Free wifi is available in the lounge."),
]


@pytest.fixture(scope="module")
def embedder():
    made = make_embedder(load_settings())
    if made is None:
        pytest.skip("the local embedder cannot run on this machine")
    yield made
    made.close()


def test_lines_that_mean_the_subject_pass_the_floor_and_near_misses_do_not(embedder) -> None:
    meaning = SpeechMeaning(embedder)
    raw_misses = []
    for watch, meant, other in CASES:
        subject = watch_subject(watch)
        assert subject is not None, watch
        got = meaning.similarities([meant, other], [subject])[subject]
        assert got[0] >= MEANING_FLOOR > got[1], (watch, got)
        # what the plain cosine of the other line's best phrase was: at the old floor or near it
        words = [w for w in re.findall(r"[\w'-]+", other) if terms(w)]  # its content words, as the old rule took
        vectors = embedder.embed_passages(phrases(words))
        raw_misses.append(float((vectors @ embedder.embed_query(subject)).max()))
    assert max(raw_misses) >= 0.80, raw_misses  # the old rule alerted on at least one of them


def test_a_line_with_every_word_of_the_subject_is_a_match_and_shared_words_count_once(embedder) -> None:
    meaning = SpeechMeaning(embedder)
    got = meaning.similarities(["The road is closed near the bridge.", "The doors are closing now."],
                               ["closed road", "free food"])
    assert got["closed road"][0] == 1.0  # every word ("closed" and "closing" are one word)
    assert got["closed road"][1] < MEANING_FLOOR  # "closing" shared; "doors ... now" is not a road
    assert all(s < MEANING_FLOOR for s in got["free food"])


def test_the_checker_alerts_on_the_meant_line_only(tmp_path: Path, embedder) -> None:
    settings = load_settings(data=tmp_path / "data")
    memory = SQLiteMemoryStore.for_data(settings)
    watches = [memory.add_watch("hall", watch) for watch, _, _ in CASES]
    lines = [TranscriptLine(5.0 + 10 * i, 8.0 + 10 * i, other) for i, (_, _, other) in enumerate(CASES)]
    lines.append(TranscriptLine(50.0, 54.0, CASES[2][1]))  # the storm, in other words
    memory.add_many([MemoryNode("hall", "coarse", 0, 60, "Scenes:\n- 0.0-60.0 s: mostly gray background"),
                     MemoryNode("hall", "speech", 0, 60, format_transcript(lines))])
    for watch in watches:
        memory.set_watch_progress(watch.id, 0.0)
    checker = WatchChecker(settings, "hall", memory, LexicalReasoner(), None, open_frames(settings),
                           embedder=embedder)
    try:
        alerts = asyncio.run(checker.check_span(0.0, 60.0))
    finally:
        memory.close()
    assert [(a.watch_id, a.start, a.end) for a in alerts] == [(watches[2].id, 50.0, 54.0)], alerts
