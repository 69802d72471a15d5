"""PostgresMemoryStore on a real PostgreSQL server (started by the tests): the same behaviours as the SQLite store,
checked on both backends, and what only a server has (restarts, writers on several connections, NOTIFY, secrets)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg
import pytest

from lucy.config import load_settings
from lucy.errors import StoreError
from lucy.memory import postgres_store
from lucy.memory.embedders import Embedder
from lucy.memory.nodes import INGEST_ORIGIN, TAIL_ORIGIN, MemoryNode, question_origin
from lucy.memory.postgres_store import PostgresMemoryStore, redact_dsn, search_query
from lucy.memory.retrieval import MemoryIndex
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.memory.store import MemoryObserver, MemoryStore, text_hash
from lucy.memory.watches import Alert
from lucy.testing.postgres import PG_PASSWORD  # the server's password, which must never be shown
from lucy.wiring import open_existing_memory, open_memory


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path):
    """A fresh store of each backend: every test using it runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        store: MemoryStore = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    else:
        store = PostgresMemoryStore(request.getfixturevalue("postgres_dsn"))
    yield store
    store.close()


@pytest.fixture
def pg(postgres_dsn: str):
    store = PostgresMemoryStore(postgres_dsn)
    yield store
    store.close()


def coarse(start: float, end: float, text: str, stream: str = "cam", **kw) -> MemoryNode:
    return MemoryNode(stream=stream, level="coarse", start=start, end=end, text=text, **kw)


# ------------------------------------------------------------------------------------------- both backends


def test_time_range_queries_return_overlapping_nodes_in_order(memory):
    stored = memory.add_many([coarse(60, 120, "second"), coarse(0, 60, "first"), coarse(120, 150, "third"),
                              MemoryNode("cam", "fine", 60, 70, "fine one", origin=question_origin(1)),
                              MemoryNode("cam", "ultra_fine", 60, 61, "ultra"),
                              coarse(0, 60, "other stream", stream="lobby")])
    assert all(n.id is not None and n.created > 0 for n in stored)
    assert [n.text for n in memory.nodes("cam")] == ["first", "second", "fine one", "ultra", "third"]
    assert [n.text for n in memory.nodes("cam", start=60, end=61)] == ["second", "fine one", "ultra"]
    assert [n.text for n in memory.nodes("cam", start=119.5, end=500)] == ["second", "third"]
    assert [n.text for n in memory.nodes("cam", end=0.5)] == ["first"]
    assert [n.text for n in memory.nodes("cam", level="fine")] == ["fine one"]
    assert [n.text for n in memory.nodes("cam", origin="ingest", limit=2)] == ["first", "second"]
    assert memory.nodes("nobody") == []
    assert memory.count("cam") == 5 and memory.count("cam", level="coarse", origin="ingest") == 3
    assert memory.streams() == ["cam", "lobby"]
    assert memory.node(stored[0].id) == stored[0] and memory.node(10_000_000) is None


def test_empty_span_is_refused_and_nothing_of_the_batch_is_kept(memory):
    with pytest.raises(ValueError):
        memory.add_many([coarse(0, 60, "fine"), coarse(5, 5, "nothing")])
    assert memory.nodes("cam") == []


def test_full_text_search_ranks_best_first(memory):
    memory.add_many([
        coarse(0, 60, "A red delivery van parks by the gate. The van is red; the van has plate KX-4821."),
        coarse(60, 120, "A blue car passes the gate while a cyclist waits."),
        coarse(120, 180, "The platform board reads PLATFORM 7 DEPARTS 14:05. A van is barely visible."),
        coarse(180, 240, "An empty street at night."),
        coarse(0, 60, "A red van in the lobby stream.", stream="lobby"),
    ])
    hits = memory.search("cam", "red van")
    texts = [n.text for n, _ in hits]
    assert texts[0].startswith("A red delivery van") and texts[1].startswith("The platform board")
    assert len(hits) == 2
    scores = [score for _, score in hits]
    assert scores[0] > scores[1] > 0
    assert [n.start for n, _ in memory.search("cam", "departing")] == [120.0]  # stemmed
    assert [n.start for n, _ in memory.search("cam", "kx 4821")] == [0.0]
    assert [n.start for n, _ in memory.search("cam", "4821")] == [0.0]  # "KX-4821" holds the word 4821
    assert [n.start for n, _ in memory.search("cam", "14")] == [120.0]  # "14:05" holds 14
    assert [n.start for n, _ in memory.search("cam", "van", start=100, end=200)] == [120.0]
    assert memory.search("cam", "van", level="fine") == []
    assert [n.stream for n, _ in memory.search("lobby", "van")] == ["lobby"]
    assert len(memory.search("cam", "van", limit=1)) == 1


@pytest.mark.parametrize(("question", "found"), [
    ('what did the "red van do?', 1), ("van AND", 1), ("OR van", 1), ("NOT van", 1), ("NEAR(van red", 1),
    ("van*", 1), ("text:van", 1), ("-van", 1), ("^van", 1), ("(van", 1), ("van)", 1), ("{van}", 1),
    ("van NEAR/2 red", 1), ("AND OR NOT", 1), ("\x00van", 1), ("vän", 1), ("汽车 van", 1), ("van <-> red", 1),
    ("'van' & !red", 1), ("van:*", 1), ("col:row", 0), ("'", 0), ('""', 0), ("  ", 0), ("", 0), ("?!", 0),
    ("bus*", 0), ("NEAR(bus, car)", 0), ("-bus or", 0),
])
def test_search_syntax_in_questions_never_raises(memory, question, found):
    memory.add(coarse(0, 60, "A red van, an AND sign, and NOT much else."))
    assert len(memory.search("cam", question)) == found


def test_ingest_span_is_stored_once_and_search_follows_replacement(memory):
    first = memory.add(coarse(0, 60, "a green tractor"))
    again = memory.add(coarse(0, 60, "a yellow bulldozer", model="m2"))
    assert again.id == first.id
    [node] = memory.nodes("cam")
    assert node.text == "a yellow bulldozer" and node.model == "m2"
    assert memory.search("cam", "tractor") == []
    assert [n.id for n, _ in memory.search("cam", "bulldozer")] == [first.id]
    q1 = memory.add(coarse(0, 60, "tractor? no", origin=question_origin(1)))
    q2 = memory.add(coarse(0, 60, "bulldozer, yes", origin=question_origin(2), parent=first.id))
    assert len({first.id, q1.id, q2.id}) == 3 and memory.node(q2.id).parent == first.id
    assert memory.count("cam") == 3


def test_tail_node_is_replaced_in_place_then_taken_over_by_the_ingest_caption(memory):
    tail = memory.add(coarse(120, 150, "a cat on the mat", origin=TAIL_ORIGIN))
    later = memory.add(coarse(120, 170, "a cat leaves the mat", origin=TAIL_ORIGIN))
    assert later.id == tail.id and memory.count("cam", origin=TAIL_ORIGIN) == 1
    child = memory.add(MemoryNode("cam", "fine", 120, 130, "whiskers", origin=question_origin(1), parent=tail.id))
    ingest = memory.add(coarse(120, 180, "a cat leaves; the mat is empty"))
    assert ingest.id == tail.id and ingest.origin == INGEST_ORIGIN  # same id: deeper nodes keep their parent
    assert memory.node(child.id).parent == tail.id
    assert [(n.origin, n.end) for n in memory.nodes("cam", level="coarse")] == [(INGEST_ORIGIN, 180.0)]
    # Once the span has its ingest caption, a tail node for it is not stored: the ingest node is the answer.
    assert memory.add(coarse(120, 175, "late tail", origin=TAIL_ORIGIN)) == memory.node(ingest.id)
    assert memory.count("cam", level="coarse") == 1
    assert [n.id for n, _ in memory.search("cam", "empty mat")] == [ingest.id]


def test_parent_that_went_is_unlinked(memory):
    parent = memory.add(coarse(0, 60, "a red van", stream="gone"))
    memory.delete_stream("gone")
    child = memory.add(MemoryNode("cam", "fine", 0, 10, "plate", origin=question_origin(1), parent=parent.id))
    assert child.parent is None and memory.node(child.id).parent is None


def test_captioned_until_is_contiguous_ingest_coverage(memory):
    assert memory.captioned_until("cam") == 0.0
    memory.add_many([coarse(0, 60, "a"), coarse(60, 120, "b"), coarse(180, 240, "d"),
                     MemoryNode("cam", "coarse", 120, 180, "asked", origin=question_origin(3))])
    assert memory.captioned_until("cam") == 120.0
    memory.add(coarse(120, 180, "c"))
    assert memory.captioned_until("cam") == 240.0
    assert memory.captioned_until("cam", level="fine") == 0.0
    memory.check()


def test_captioned_until_starts_at_zero_and_follows_overlaps(memory):
    memory.add(coarse(5, 60, "starts late"))
    assert memory.captioned_until("cam") == 0.0
    memory.add_many([coarse(0, 10, "first"), coarse(8, 30, "overlaps it"), coarse(20, 25, "inside")])
    assert memory.captioned_until("cam") == 60.0
    memory.add_many([coarse(60.0000005, 90, "within a microsecond"), coarse(91, 100, "after a gap")])
    assert memory.captioned_until("cam") == 90.0


def test_a_page_of_nodes_is_the_first_or_the_latest_limit_in_order(memory):
    nodes = [coarse(60.0 * i, 60.0 * (i + 1), f"c{i}") for i in range(30)]
    nodes += [MemoryNode("cam", "fine", 60.0 * i + 5, 60.0 * i + 15, f"f{i}") for i in range(0, 30, 3)]
    nodes += [MemoryNode("cam", "hour", 0, 1800, "all of it"), MemoryNode("cam", "fine", 0.1, 0.3, "rounded"),
              coarse(0, 60, "another stream's", stream="lobby")]
    memory.add_many(nodes)
    everything = memory.nodes("cam")
    assert len(everything) == 42 and everything == sorted(everything, key=lambda n: (n.start, n.level, n.id))
    for level in (None, "coarse", "fine"):
        for start, end in ((None, None), (0, None), (0.2, 0.25), (1000.5, None), (1500, 1500.5), (None, 900),
                           (610, 1250), (1795, 1800.5), (5000, None)):
            # What the page must hold: the overlapping nodes, filtered here from all of them.
            full = [n for n in everything if (level is None or n.level == level)
                    and (start is None or n.end > start) and (end is None or n.start < end)]
            assert memory.nodes("cam", level=level, start=start, end=end) == full, (level, start, end)
            assert memory.nodes("cam", level=level, start=start, end=end, latest=True) == full
            for limit in (1, 7, 100):
                first = memory.nodes("cam", level=level, start=start, end=end, limit=limit)
                latest = memory.nodes("cam", level=level, start=start, end=end, limit=limit, latest=True)
                assert (first, latest) == (full[:limit], full[-limit:]), (level, start, end, limit)
    # The long node is found from far inside it (the longest span bounds where an overlapping node starts).
    assert [n.text for n in memory.nodes("cam", start=1790, end=1791)] == ["all of it", "c29"]
    assert [n.text for n in memory.nodes("cam", start=0.2, end=0.25)] == ["c0", "all of it", "rounded"]
    assert memory.nodes("nobody", start=10, latest=True, limit=5) == []


def test_question_history(memory):
    q1 = memory.add_question("cam", "What plate did the van have?", ["KX-4821", "KX-4812"], horizon=90.0)
    q2 = memory.add_question("cam", "Which platform?")
    memory.add_question("lobby", "Anyone there?")
    memory.set_answer(q1, {"answer": "KX-4821", "confident": True, "spans": [[0, 60]]})
    rows = memory.questions("cam")
    assert [r["id"] for r in rows] == [q2, q1]
    assert rows[1]["options"] == ["KX-4821", "KX-4812"] and rows[1]["horizon"] == 90.0
    assert rows[1]["answer"] == {"answer": "KX-4821", "confident": True, "spans": [[0, 60]]}
    assert rows[1]["answered"] >= rows[1]["asked"] > 0
    assert rows[0]["answer"] is None and rows[0]["answered"] is None
    assert memory.questions("cam", limit=1)[0]["id"] == q2
    with pytest.raises(KeyError):
        memory.set_answer(999_999, {"answer": "x"})


def test_event_spans_are_alerts_and_answers_evidence(memory):
    watch = memory.add_watch("cam", "a van?")
    memory.add_alert(_alert(watch.id, start=120))
    memory.add_alert(_alert(memory.add_watch("lobby", "anyone?").id, stream="lobby", start=5))
    answered = memory.add_question("cam", "What plate?")
    memory.set_answer(answered, {"answer": "KX", "evidence": [{"start": 30, "end": 45, "level": "fine"},
                                                              {"start": "bad"}]})
    memory.add_question("cam", "Still running?")
    failed = memory.add_question("cam", "Broke?")
    memory.set_answer(failed, {"error": "model down"})
    assert memory.event_spans("cam") == [(30.0, 45.0), (120.0, 180.0)]
    assert memory.event_spans("lobby") == [(5.0, 65.0)] and memory.event_spans("none") == []


def test_delete_stream_forgets_nodes_search_vectors_history_and_watches(memory):
    kept = memory.add(coarse(0, 60, "a red van", stream="lobby"))
    parent = memory.add(coarse(0, 60, "a red van at the gate"))
    child = memory.add(MemoryNode("cam", "fine", 0, 10, "the red van's plate", origin=question_origin(1),
                                  parent=parent.id))
    memory.put_vectors("m", {parent.id: np.ones(4, np.float32), kept.id: np.ones(4, np.float32)})
    memory.add_question("cam", "which van?")
    watch = memory.add_watch("cam", "tell me when a van parks")
    memory.add_alert(_alert(watch.id))
    assert memory.delete_stream("cam") == 2
    assert memory.nodes("cam") == [] and memory.search("cam", "van") == [] and memory.questions("cam") == []
    assert memory.watches("cam") == [] and memory.alerts("cam") == [] and memory.node(child.id) is None
    assert memory.vectors("m", [parent.id, kept.id]).keys() == {kept.id}
    assert [n.id for n, _ in memory.search("lobby", "van")] == [kept.id]
    assert memory.streams() == ["lobby"]


def test_vectors_are_kept_per_model_and_go_with_a_change_of_text(memory):
    a, b = memory.add_many([coarse(0, 60, "a red van"), coarse(60, 120, "a blue car")])
    va, vb = np.arange(8, dtype=np.float32), np.full(8, 0.5, np.float32)
    memory.put_vectors("m1", {a.id: va, b.id: vb})
    memory.put_vectors("m2", {a.id: vb})
    got = memory.vectors("m1", [a.id, b.id, a.id, 10_000_000])
    assert got.keys() == {a.id, b.id} and got[a.id].dtype == np.float32
    assert np.array_equal(got[a.id], va) and np.array_equal(got[b.id], vb)
    assert np.array_equal(memory.vectors("m2", [a.id])[a.id], vb)
    memory.put_vectors("m1", {a.id: vb})  # replaces
    assert np.array_equal(memory.vectors("m1", [a.id])[a.id], vb)
    memory.put_vectors("m1", {b.id: va}, text_hashes={b.id: "stale"})  # made from another text: never returned
    assert memory.vectors("m1", [b.id]) == {}
    memory.put_vectors("m1", {b.id: va}, text_hashes={b.id: text_hash("a blue car")})
    assert b.id in memory.vectors("m1", [b.id])
    memory.add(coarse(60, 120, "a green bus"))  # the span's text changes: its vectors go
    assert memory.vectors("m1", [b.id]) == {} and memory.vectors("m1", []) == {}
    memory.put_vectors("m1", {10_000_000: va})  # a node that is gone: nothing kept, no error
    assert memory.vectors("m1", [10_000_000]) == {}


def test_versions_and_fingerprint_follow_every_change(memory):
    assert memory.versions("cam") == {}
    empty = memory.fingerprint("cam")
    a = memory.add(coarse(0, 60, "a", created=100.0))
    one = memory.fingerprint("cam")
    assert one != empty and memory.versions("cam") == {a.id: 100.0}
    memory.add(coarse(0, 60, "b", created=200.0))  # rewritten: same id, new created
    assert memory.fingerprint("cam") != one and memory.versions("cam") == {a.id: 200.0}


def _alert(watch_id: int, stream: str = "cam", start: float = 0.0) -> Alert:
    return Alert(id=None, watch_id=watch_id, stream=stream, question="q", start=start, end=start + 60,
                 reason="seen", frame_time=start + 30, level="coarse", created=time.time(), event_end=start + 60,
                 llm_calls=2, caption_calls=1)


def test_watches_alerts_cursors_and_progress(memory):
    memory.add_many([coarse(0, 60, "a"), coarse(60, 120, "b")])
    w1 = memory.add_watch("cam", "  tell me when a van parks ", cooldown_seconds=30, webhook_url="http://x/hook")
    w2 = memory.add_watch("lobby", "anyone at the desk?")
    assert w1.question == "tell me when a van parks" and w1.webhook_url == "http://x/hook"
    assert memory.watch_progress(w1.id) == 120.0 and memory.watch_progress(w2.id) == 0.0
    memory.set_watch_progress(w1.id, 180.5)
    assert memory.watch_progress(w1.id) == 180.5
    assert [w.id for w in memory.watches()] == [w1.id, w2.id] and [w.id for w in memory.watches("cam")] == [w1.id]
    with pytest.raises(ValueError):
        memory.add_watch("cam", "   ")
    with pytest.raises(ValueError):
        memory.add_watch("cam", "q", cooldown_seconds=-1)
    with pytest.raises(KeyError):
        memory.watch_progress(999_999)
    with pytest.raises(KeyError):
        memory.set_watch_progress(999_999, 1.0)
    assert memory.latest_alert() is None
    first = memory.add_alert(_alert(w1.id))
    second = memory.add_alert(_alert(w2.id, stream="lobby"))
    third = memory.add_alert(_alert(w1.id, start=60))
    assert first.id < second.id < third.id and third.llm_calls == 2 and third.caption_calls == 1
    assert memory.alerts() == [first, second, third]
    assert memory.alerts("cam") == [first, third] and memory.alerts(watch_id=w2.id) == [second]
    assert memory.alerts(after_id=first.id, limit=1) == [second]
    # by media time: the alerts whose span overlaps [start, end) (0-60 and 60-120 touch, never overlap)
    assert memory.alerts("cam", start=60) == [third] and memory.alerts("cam", end=60) == [first]
    assert memory.alerts("cam", start=30, end=90) == [first, third] and memory.alerts("cam", start=120) == []
    assert memory.latest_alert() == third and memory.latest_alert("lobby") == second
    assert memory.latest_alert(watch_id=w1.id) == third
    assert memory.delete_watch(w1.id) and not memory.delete_watch(w1.id)
    assert [w.id for w in memory.watches()] == [w2.id] and memory.alerts(watch_id=w1.id) == [first, third]
    assert memory.alert_cursor("serve") is None
    memory.set_alert_cursor("serve", first.id)
    memory.set_alert_cursor("serve", third.id)
    memory.set_alert_cursor("mqtt", second.id)
    assert memory.alert_cursor("serve") == third.id and memory.alert_cursor("mqtt") == second.id
    memory.delete_stream("cam")
    fourth = memory.add_alert(_alert(w2.id, stream="lobby"))
    assert fourth.id > third.id  # ids never reused: a poller's after_id stays valid


class ConceptEmbedder(Embedder):
    """Counts words by concept (synonyms share a dimension): a tiny embedder whose meaning a test can predict."""

    CONCEPTS = (("woman", "lady"), ("desk", "counter"), ("van", "truck"), ("rain", "wet"))
    name, model, dim = "concepts", "concepts-1", len(CONCEPTS) + 1

    def _vector(self, text: str) -> np.ndarray:
        words = text.lower().replace(";", " ").replace(".", " ").split()
        v = np.array([sum(w in group for w in words) for group in self.CONCEPTS] + [0.1], np.float32)
        return v / np.linalg.norm(v)

    def embed_passages(self, texts):
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text):
        return self._vector(text)


def test_nul_characters_are_taken_out_of_every_text_written(memory):
    """PostgreSQL refuses U+0000 in text and SQLite keeps it: every text a store writes (captions, transcripts,
    instructions, questions and options, answers, watches, alerts) loses it on the way in, so both hold the same."""
    caption, said = memory.add_many([coarse(0, 60, "PLATFORM\x00 7 sign", instruction="read\x00 it"),
                                     MemoryNode("cam", "speech", 5, 8, "mind\x00 the gap")])
    assert (caption.text, caption.instruction, said.text) == ("PLATFORM 7 sign", "read it", "mind the gap")
    assert [n.text for n in memory.nodes("cam")] == ["PLATFORM 7 sign", "mind the gap"]
    assert [node.text for node, _ in memory.search("cam", "platform")] == ["PLATFORM 7 sign"]
    qid = memory.add_question("cam", "which\x00 platform?", ["7\x00", "8"], horizon=60.0)
    memory.set_answer(qid, {"answer": "7\x00", "trace": [{"detail": "read\x00"}]})
    (row,) = memory.questions("cam")
    assert (row["question"], row["options"]) == ("which platform?", ["7", "8"])
    assert row["answer"] == {"answer": "7", "trace": [{"detail": "read"}]}
    watch = memory.add_watch("cam", "a van\x00 parks?")
    assert watch.question == "a van parks?" and memory.watches("cam")[0].question == "a van parks?"
    alert = memory.add_alert(replace(_alert(watch.id), question="a van\x00 parks?", reason="seen\x00 it"))
    assert (alert.question, alert.reason) == ("a van parks?", "seen it")
    assert [(a.question, a.reason) for a in memory.alerts("cam")] == [("a van parks?", "seen it")]


def test_hybrid_search_over_the_store(memory):
    nodes = memory.add_many([coarse(0, 60, "A woman standing at the desk hands a key card to a guest."),
                             coarse(60, 120, "A red van is parked outside the entrance."),
                             coarse(120, 180, "The counter is empty; a ceiling lamp flickers above the lift."),
                             coarse(180, 240, "Rain falls on the car park.")])
    index = MemoryIndex(memory, ConceptEmbedder())
    words = MemoryIndex(memory, None)
    assert words.search("cam", "the lady behind the counter smiling") == []  # one word of four: no good match
    assert words.search("cam", "the lady behind the counter smiling", floor=False)[0].node.id == nodes[2].id
    hits = index.search("cam", "the lady behind the counter smiling")
    assert hits[0].node.id == nodes[0].id and hits[0].similarity == pytest.approx(1.0, abs=0.01)
    assert memory.vectors("concepts-1", [n.id for n in nodes]).keys() == {n.id for n in nodes}  # stored once made
    rewritten = memory.add(coarse(60, 120, "A delivery truck waits in the rain."))
    assert index.search("cam", "a wet van")[0].node.id == rewritten.id  # the rewrite was seen, its vector remade


class Recorder(MemoryObserver):
    def __init__(self) -> None:
        self.seen: list[list[tuple[int | None, str]]] = []

    def on_nodes_added(self, nodes):
        self.seen.append([(n.id, n.text) for n in nodes])


def test_observers_see_what_committed(memory):
    recorder = Recorder()
    memory.add_observer(recorder)
    first = memory.add(coarse(0, 60, "a red van"))
    with pytest.raises(ValueError):
        memory.add_many([coarse(60, 120, "fine"), coarse(5, 5, "empty")])
    assert recorder.seen == [[(first.id, "a red van")]]
    memory.remove_observer(recorder)


def test_registering_the_same_watch_again_returns_it(memory):
    """Same stream, question (normalised, any case) and sink: the same watch, whatever its cooldown; another sink,
    stream or question, or the same one after it was deleted: a new watch."""
    first, new = memory.register_watch("cam", "Tell me when a van parks", cooldown_seconds=30)
    assert new
    for again in ("tell me when a VAN parks", "  Tell me when\u200b a van  parks ", "Tell me when a van parks"):
        assert memory.register_watch("cam", again, cooldown_seconds=99) == (first, False)
    assert memory.add_watch("cam", "TELL ME WHEN A VAN PARKS") == first
    hooked, new = memory.register_watch("cam", "Tell me when a van parks", webhook_url="http://x/hook")
    assert new and hooked.id != first.id
    assert memory.register_watch("cam", "tell me when a van parks", webhook_url="http://x/hook") == (hooked, False)
    assert memory.register_watch("lobby", "Tell me when a van parks")[1]
    assert memory.register_watch("cam", "Tell me when a van leaves")[1]
    assert len(memory.watches("cam")) == 3
    memory.delete_watch(first.id)
    again, new = memory.register_watch("cam", "Tell me when a van parks")
    assert new and again.id != first.id


def test_the_same_watch_registered_at_once_by_several_writers_is_one(memory, tmp_path, request):
    """Each writer its own store (own connection): the look-up and the insert are one transaction."""
    def store() -> MemoryStore:
        if isinstance(memory, SQLiteMemoryStore):
            return SQLiteMemoryStore(tmp_path / "memory.sqlite")
        return PostgresMemoryStore(request.getfixturevalue("postgres_dsn"))

    stores = [store() for _ in range(6)]
    start = threading.Barrier(len(stores))
    got: list[tuple[int, bool]] = []

    def register(s: MemoryStore) -> None:
        start.wait()
        watch, new = s.register_watch("cam", "Is a van at the gate?")
        got.append((watch.id, new))

    threads = [threading.Thread(target=register, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert len(memory.watches("cam")) == 1 and len({i for i, _ in got}) == 1
    assert sorted(new for _, new in got) == [False] * 5 + [True]


def test_threads_share_one_store(memory):
    def write(i: int) -> None:
        for j in range(25):
            memory.add(MemoryNode("cam", "fine", i * 1000 + j, i * 1000 + j + 1, f"thread{i} item{j}",
                                  origin=question_origin(i)))
            memory.search("cam", f"thread{i}")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert memory.count("cam") == 100
    assert all(len(memory.search("cam", f"thread{i}", limit=100)) == 25 for i in range(4))
    assert memory.open_connections() <= 1  # the workers' connections were closed with their threads


def test_closed_store_refuses_use(memory):
    memory.close()
    with pytest.raises(StoreError, match="closed"):
        memory.nodes("cam")


# ------------------------------------------------------------------------------------------- PostgreSQL only


def test_schema_is_migrated_once_and_search_uses_the_gin_index(pg, postgres_dsn):
    assert pg.schema_version == len(postgres_store.MIGRATIONS) and pg.is_initialised()
    pg.add(coarse(0, 60, "a red van"))
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(len(postgres_store.MIGRATIONS),)]
        db.execute("SET enable_seqscan = off")
        plan = " ".join(r[0] for r in db.execute(
            "EXPLAIN SELECT id FROM nodes WHERE search @@ websearch_to_tsquery('lucy', 'van')").fetchall())
        assert "nodes_search" in plan
        kinds = dict(db.execute("SELECT column_name, data_type FROM information_schema.columns "
                                "WHERE table_name IN ('nodes', 'node_vectors') AND column_name IN ('search', 'vector')"
                                ).fetchall())
        assert kinds == {"search": "tsvector", "vector": "bytea"}


def test_an_appended_migration_runs_once_for_concurrent_openers(postgres_dsn, monkeypatch):
    old = PostgresMemoryStore(postgres_dsn)
    old.add(coarse(0, 60, "a parcel is left at the door"))
    old.close()

    def v_next_add_confidence(db) -> None:
        db.execute("ALTER TABLE nodes ADD COLUMN confidence double precision NOT NULL DEFAULT 1.0")

    monkeypatch.setattr(postgres_store, "MIGRATIONS", [*postgres_store.MIGRATIONS, v_next_add_confidence])
    stores: list[PostgresMemoryStore] = []
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            stores.append(PostgresMemoryStore(postgres_dsn))
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(stores) == 4
    assert stores[0].schema_version == len(postgres_store.MIGRATIONS)
    assert [n.text for n, _ in stores[1].search("cam", "parcel")] == ["a parcel is left at the door"]
    for s in stores:
        s.close()
    monkeypatch.setattr(postgres_store, "MIGRATIONS", postgres_store.MIGRATIONS[:-2])
    with pytest.raises(StoreError, match="newer than this Lucy"):
        PostgresMemoryStore(postgres_dsn)


def test_concurrent_writers_of_the_same_spans_leave_one_node_each(postgres_dsn):
    stores = [PostgresMemoryStore(postgres_dsn) for _ in range(2)]  # two stores: two connections, as two processes
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def write(k: int) -> None:
        try:
            for span in range(40):
                barrier.wait()  # both race for each new span: a question's tail node, then the ingest caption
                stores[k].add(coarse(span * 60, span * 60 + 30, f"writer{k} tail{span}", origin=TAIL_ORIGIN))
                # Several spans per batch, in opposite orders: span locks are taken in one order, no deadlock.
                batch = [coarse(span * 60, span * 60 + 60, f"writer{k} span{span}"),
                         coarse((39 - span) * 60, (39 - span) * 60 + 60, f"writer{k} mirror{span}")]
                stores[k].add_many(batch if k == 0 else batch[::-1])
        except BaseException as err:  # noqa: BLE001
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=write, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    nodes = stores[0].nodes("cam")
    assert len(nodes) == 40 and all(n.origin == INGEST_ORIGIN for n in nodes)  # one ingest node per span
    assert [n.start for n in nodes] == [60.0 * i for i in range(40)] and stores[0].captioned_until("cam") == 2400.0
    for s in stores:
        s.close()


def test_re_adding_the_same_captions_is_idempotent(pg):
    batch = [coarse(60.0 * i, 60.0 * i + 60, f"span {i}") for i in range(5)]
    first = pg.add_many(batch)
    again = pg.add_many(batch)
    assert [n.id for n in again] == [n.id for n in first] and pg.count("cam") == 5
    assert [n.text for n in pg.nodes("cam")] == [f"span {i}" for i in range(5)]


def test_a_restarted_server_is_reconnected_and_an_outage_is_a_store_error(postgres_server, pg, caplog):
    caplog.set_level(logging.DEBUG)
    pg.add(coarse(0, 60, "before the restart"))
    in_thread: list[object] = []
    worker = threading.Thread(target=lambda: in_thread.append(pg.count("cam")))
    worker.start()
    worker.join()
    postgres_server.stop()
    try:
        with pytest.raises(StoreError) as down:
            pg.nodes("cam")
        with pytest.raises(StoreError) as down_write:
            pg.add(coarse(60, 120, "during the outage"))
    finally:
        postgres_server.start()
    for err in (down.value, down_write.value):
        assert PG_PASSWORD not in str(err) and "postgresql://lucy@127.0.0.1" in str(err)
    # The next calls after it is back work: each thread's dropped connection is replaced.
    assert [n.text for n in pg.nodes("cam")] == ["before the restart"]
    stored = pg.add(coarse(60, 120, "after the restart"))
    assert pg.node(stored.id).text == "after the restart" and pg.captioned_until("cam") == 120.0
    assert PG_PASSWORD not in caplog.text
    assert in_thread == [1]


def test_a_restart_between_calls_is_invisible_to_writes_and_reads(postgres_server, pg):
    pg.add(coarse(0, 60, "one"))
    postgres_server.stop()
    postgres_server.start()
    assert pg.add(coarse(60, 120, "two")).id is not None  # the stale connection is replaced, the write retried once
    assert pg.count("cam") == 2


def test_secrets_never_appear_in_errors(postgres_server):
    wrong = postgres_server.dsn().replace(PG_PASSWORD, "Wrong-Secret-99")
    with pytest.raises(StoreError) as err:
        PostgresMemoryStore(wrong)
    assert "Wrong-Secret-99" not in str(err.value) and "postgresql://lucy@127.0.0.1" in str(err.value)
    with pytest.raises(StoreError) as bad:
        PostgresMemoryStore("host=x password='Bad-Secret-77 port=5")
    assert "Bad-Secret-77" not in str(bad.value)
    assert redact_dsn(f"postgresql://lucy:{PG_PASSWORD}@db.example:5433/lucy?sslmode=require") == \
        "postgresql://lucy@db.example:5433/lucy"
    assert PG_PASSWORD not in repr(PostgresMemoryStore(postgres_server.dsn(), migrate=False))


def test_committed_nodes_are_notified(pg, postgres_dsn):
    with psycopg.connect(postgres_dsn, autocommit=True) as listener:
        listener.execute(f"LISTEN {postgres_store.NOTIFY_CHANNEL}")
        stored = pg.add_many([coarse(0, 60, "a"), coarse(60, 120, "b"), coarse(0, 60, "c", stream="lobby")])
        with pytest.raises(ValueError):
            pg.add_many([coarse(120, 180, "never"), coarse(5, 5, "empty")])  # rolled back: not notified
        payloads = [json.loads(n.payload) for n in listener.notifies(timeout=2.0, stop_after=2)]
    assert payloads == [{"stream": "cam", "ids": [stored[0].id, stored[1].id]},
                        {"stream": "lobby", "ids": [stored[2].id]}]


def test_search_query_quotes_every_word():
    assert search_query('NEAR(van "red") or col:x -y') == '"near" or "van" or "red" or "or" or "col" or "x" or "y"'
    assert search_query("!!! ???") == "" and search_query("van van VAN") == '"van"'


def test_config_picks_the_backend(tmp_path, postgres_dsn, monkeypatch):
    settings = load_settings(data=tmp_path / "data")
    assert settings.memory.backend == "sqlite" and open_existing_memory(settings) is None
    store = open_memory(settings)
    assert isinstance(store, SQLiteMemoryStore)
    store.close()
    monkeypatch.setenv("LUCY_MEMORY__BACKEND", "postgres")
    monkeypatch.setenv("LUCY_MEMORY__POSTGRES_DSN", postgres_dsn)
    settings = load_settings(data=tmp_path / "data")
    assert PG_PASSWORD not in repr(settings.memory) and PG_PASSWORD not in settings.model_dump_json()
    assert open_existing_memory(settings) is None  # reading never creates the tables
    store = open_memory(settings)  # the one factory picks PostgreSQL
    assert isinstance(store, PostgresMemoryStore)
    store.add(coarse(0, 60, "a red van"))
    store.close()
    existing = open_existing_memory(settings)
    assert isinstance(existing, PostgresMemoryStore) and existing.streams() == ["cam"]
    existing.close()
    monkeypatch.delenv("LUCY_MEMORY__POSTGRES_DSN")
    with pytest.raises(ValueError, match="needs memory.postgres_dsn"):
        load_settings(data=tmp_path / "data")


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents_alone(pg):
    pg.add(coarse(0, 60, "parent"))
    parent_connection = pg._conn()
    parent_backend = parent_connection.info.backend_pid
    pid = os.fork()
    if pid == 0:  # the child: writes through the inherited store object, then leaves without cleanup
        code = 1
        try:
            stored = pg.add(coarse(60, 120, "child"))
            code = 0 if stored.id is not None and pg._conn().info.backend_pid != parent_backend else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [n.text for n in pg.nodes("cam")] == ["parent", "child"]
    assert pg._conn() is parent_connection and not parent_connection.broken  # not reconnected: never disturbed
