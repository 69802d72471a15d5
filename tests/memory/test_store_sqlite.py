"""SQLiteMemoryStore: time-range queries, full-text search (ranking, escaping, sync), history, migrations."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from lucy.errors import StoreError
from lucy.memory import sqlite_store
from lucy.memory.nodes import MemoryNode, question_origin
from lucy.memory.sqlite_store import SQLiteMemoryStore, fts_query
from lucy.memory.store import MemoryObserver, MemoryStore


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    yield s
    s.close()


def coarse(start: float, end: float, text: str, stream: str = "cam", **kw) -> MemoryNode:
    return MemoryNode(stream=stream, level="coarse", start=start, end=end, text=text, **kw)


def test_database_is_wal_with_a_time_index(store):
    db = sqlite3.connect(store.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(sqlite_store.MIGRATIONS) == store.schema_version
    plan = " ".join(r[-1] for r in db.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM nodes WHERE stream = 'cam' AND level = 'coarse' AND start < 10"))
    assert "nodes_stream_level_start" in plan or "nodes_ingest_span" in plan
    db.close()


def test_database_files_are_owner_only(tmp_path: Path) -> None:
    """memory.sqlite holds webhook URLs (which often carry secrets): it and its -wal/-shm are 0600, whatever the
    umask, and files an older version made world-readable are narrowed when the store opens."""
    old = os.umask(0o022)
    try:
        store = SQLiteMemoryStore(tmp_path / "memory.sqlite")
        store.add(coarse(0, 10, "a van"))
        files = [store.path, Path(f"{store.path}-wal"), Path(f"{store.path}-shm")]
        assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files), [oct(f.stat().st_mode) for f in files]
        store.close()
        for f in files:
            if f.exists():
                f.chmod(0o644)
        again = SQLiteMemoryStore(tmp_path / "memory.sqlite")
        assert again.count("cam") == 1
        assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files if f.exists())
        again.close()
    finally:
        os.umask(old)


def test_time_range_queries_return_overlapping_nodes_in_order(store):
    stored = store.add_many([coarse(60, 120, "second"), coarse(0, 60, "first"), coarse(120, 150, "third"),
                             MemoryNode("cam", "fine", 60, 70, "fine one", origin=question_origin(1)),
                             coarse(0, 60, "other stream", stream="lobby")])
    assert all(n.id is not None and n.created > 0 for n in stored)
    assert [n.text for n in store.nodes("cam")] == ["first", "second", "fine one", "third"]
    # Half-open overlap: [60, 61) touches "second" and "fine one", not "first" (which ends at 60).
    assert [n.text for n in store.nodes("cam", start=60, end=61)] == ["second", "fine one"]
    assert [n.text for n in store.nodes("cam", start=119.5, end=500)] == ["second", "third"]
    assert [n.text for n in store.nodes("cam", end=0.5)] == ["first"]
    assert [n.text for n in store.nodes("cam", level="fine")] == ["fine one"]
    assert [n.text for n in store.nodes("cam", origin="ingest", limit=2)] == ["first", "second"]
    assert store.nodes("nobody") == []
    assert store.count("cam") == 4 and store.count("cam", level="coarse", origin="ingest") == 3
    assert store.streams() == ["cam", "lobby"]


def test_empty_span_is_refused(store):
    with pytest.raises(ValueError):
        store.add(coarse(5, 5, "nothing"))
    assert store.nodes("cam") == []


def test_full_text_search_ranks_by_bm25(store):
    store.add_many([
        coarse(0, 60, "A red delivery van parks by the gate. The van is red; the van has plate KX-4821."),
        coarse(60, 120, "A blue car passes the gate while a cyclist waits."),
        coarse(120, 180, "The platform board reads PLATFORM 7 DEPARTS 14:05. A van is barely visible."),
        coarse(180, 240, "An empty street at night."),
        coarse(0, 60, "A red van in the lobby stream.", stream="lobby"),
    ])
    hits = store.search("cam", "red van")
    texts = [n.text for n, _ in hits]
    assert texts[0].startswith("A red delivery van")  # both words, several times
    assert texts[1].startswith("The platform board")  # "van" once
    assert len(hits) == 2  # the blue car, the street and the other stream do not match
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[1] > 0
    # Stemming: "departing" finds "DEPARTS"; digits and codes are words too.
    assert [n.start for n, _ in store.search("cam", "departing")] == [120.0]
    assert [n.start for n, _ in store.search("cam", "kx 4821")] == [0.0]
    # Time and level filters apply to search.
    assert [n.start for n, _ in store.search("cam", "van", start=100, end=200)] == [120.0]
    assert store.search("cam", "van", level="fine") == []
    assert [n.stream for n, _ in store.search("lobby", "van")] == ["lobby"]


@pytest.mark.parametrize(("question", "found"), [
    ('what did the "red van do?', 1), ("van AND", 1), ("OR van", 1), ("NOT van", 1), ("NEAR(van red", 1),
    ("van*", 1), ("text:van", 1), ("-van", 1), ("^van", 1), ("(van", 1), ("van)", 1), ("{van}", 1),
    ("van NEAR/2 red", 1), ("AND OR NOT", 1), ("\x00van", 1), ("vän", 1), ("汽车 van", 1),
    ("col:row", 0), ("'", 0), ('""', 0), ("  ", 0), ("", 0), ("?!", 0), ("bus*", 0), ("NEAR(bus, car)", 0),
])
def test_fts_syntax_in_questions_never_raises(store, question, found):
    store.add(coarse(0, 60, "A red van, an AND sign, and NOT much else."))
    assert len(store.search("cam", question)) == found


def test_fts_query_quotes_every_word():
    assert fts_query('NEAR(van "red") col:x') == '"near" OR "van" OR "red" OR "col" OR "x"'
    assert fts_query("!!! ???") == ""
    assert fts_query("van van VAN") == '"van"'


def test_ingest_span_is_stored_once_and_index_follows_replacement(store):
    first = store.add(coarse(0, 60, "a green tractor"))
    again = store.add(coarse(0, 60, "a yellow bulldozer", model="m2"))
    assert again.id == first.id
    [node] = store.nodes("cam")
    assert node.text == "a yellow bulldozer" and node.model == "m2"
    assert store.search("cam", "tractor") == []  # the index forgot the old text
    assert [n.id for n, _ in store.search("cam", "bulldozer")] == [first.id]
    # Question-made nodes over the same span are separate memories.
    q1 = store.add(coarse(0, 60, "tractor? no", origin=question_origin(1)))
    q2 = store.add(coarse(0, 60, "bulldozer, yes", origin=question_origin(2), parent=first.id))
    assert len({first.id, q1.id, q2.id}) == 3 and store.node(q2.id).parent == first.id
    assert store.count("cam") == 3


def test_captioned_until_is_contiguous_ingest_coverage(store):
    assert store.captioned_until("cam") == 0.0
    store.add_many([coarse(0, 60, "a"), coarse(60, 120, "b"), coarse(180, 240, "d"),
                    MemoryNode("cam", "coarse", 120, 180, "asked", origin=question_origin(3))])
    assert store.captioned_until("cam") == 120.0  # [120, 180) only exists from a question
    store.add(coarse(120, 180, "c"))
    assert store.captioned_until("cam") == 240.0
    store.add(coarse(240, 262.5, "partial last span"))
    assert store.captioned_until("cam") == 262.5
    assert store.captioned_until("cam", level="fine") == 0.0


def test_question_history(store):
    q1 = store.add_question("cam", "What plate did the van have?", ["KX-4821", "KX-4812"], horizon=90.0)
    q2 = store.add_question("cam", "Which platform?")
    store.add_question("lobby", "Anyone there?")
    store.set_answer(q1, {"answer": "KX-4821", "confident": True, "spans": [[0, 60]]})
    rows = store.questions("cam")
    assert [r["id"] for r in rows] == [q2, q1]  # newest first
    assert rows[1]["options"] == ["KX-4821", "KX-4812"] and rows[1]["horizon"] == 90.0
    assert rows[1]["answer"] == {"answer": "KX-4821", "confident": True, "spans": [[0, 60]]}
    assert rows[0]["answer"] is None and rows[0]["answered"] is None
    assert store.questions("cam", limit=1)[0]["id"] == q2
    with pytest.raises(KeyError):
        store.set_answer(9999, {"answer": "x"})


def test_delete_stream_forgets_nodes_index_and_history(store):
    kept = store.add(coarse(0, 60, "a red van", stream="lobby"))
    parent = store.add(coarse(0, 60, "a red van at the gate"))
    store.add(MemoryNode("cam", "fine", 0, 10, "the red van's plate", origin=question_origin(1), parent=parent.id))
    store.add_question("cam", "which van?")
    assert store.delete_stream("cam") == 2
    assert store.nodes("cam") == [] and store.search("cam", "van") == [] and store.questions("cam") == []
    assert [n.id for n, _ in store.search("lobby", "van")] == [kept.id]
    fts_rows = sqlite3.connect(store.path).execute("SELECT count(*) FROM nodes_fts WHERE nodes_fts MATCH 'van'")
    assert fts_rows.fetchone()[0] == 1  # the index forgot the deleted text


def test_migrates_an_older_database_and_keeps_its_data(tmp_path, monkeypatch):
    path = tmp_path / "memory.sqlite"
    old = SQLiteMemoryStore(path)
    old.add(coarse(0, 60, "a parcel is left at the door"))
    old.close()

    def v2_add_confidence(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE nodes ADD COLUMN confidence REAL NOT NULL DEFAULT 1.0")

    monkeypatch.setattr(sqlite_store, "MIGRATIONS", [*sqlite_store.MIGRATIONS, v2_add_confidence])
    stores = []
    errors: list[BaseException] = []

    def open_store() -> None:  # several openers at once: the migration runs once, under the write lock
        try:
            stores.append(SQLiteMemoryStore(path))
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    new = stores[0]
    assert new.schema_version == len(sqlite_store.MIGRATIONS)  # the appended step ran, once
    columns = [r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(nodes)")]
    assert columns.count("confidence") == 1
    assert [n.text for n, _ in new.search("cam", "parcel")] == ["a parcel is left at the door"]
    new.add(coarse(60, 120, "the parcel is taken"))
    assert len(new.search("cam", "parcel")) == 2
    for s in stores:
        s.close()


def test_version_zero_file_is_initialised(tmp_path):
    path = tmp_path / "memory.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE unrelated (x)").connection.close()
    store = SQLiteMemoryStore(path)
    assert store.schema_version == len(sqlite_store.MIGRATIONS)
    store.add(coarse(0, 1, "hello"))
    assert store.count("cam") == 1
    store.close()


def test_newer_database_is_refused(tmp_path):
    path = tmp_path / "memory.sqlite"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {len(sqlite_store.MIGRATIONS) + 5}")
    db.close()
    with pytest.raises(StoreError, match="newer than this Lucy"):
        SQLiteMemoryStore(path)


def test_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "memory.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open memory store"):
        SQLiteMemoryStore(path)


def test_threads_share_one_store(store):
    def write(i: int) -> None:
        for j in range(50):
            store.add(MemoryNode("cam", "fine", i * 1000 + j, i * 1000 + j + 1, f"thread{i} item{j}",
                                 origin=question_origin(i)))
            store.search("cam", f"thread{i}")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.count("cam") == 200
    assert all(len(store.search("cam", f"thread{i}", limit=100)) == 50 for i in range(4))


def test_fingerprint_is_read_again_only_after_a_commit_by_anyone(store):
    store.add(coarse(0, 60, "a"))
    statements: list[str] = []
    store._db().set_trace_callback(statements.append)
    first = store.fingerprint("cam")
    assert store.fingerprint("cam") == first and store.fingerprint("cam") == first
    assert sum("count(*)" in s for s in statements) == 1  # the aggregate is read once while nothing changes

    writer = threading.Thread(target=store.add, args=(coarse(60, 120, "b"),))  # another thread's connection
    writer.start()
    writer.join()
    second = store.fingerprint("cam")
    assert second != first
    other = SQLiteMemoryStore(store.path)  # another store object, as another process would write
    other.add(coarse(0, 60, "a, rewritten"))
    other.close()
    third = store.fingerprint("cam")
    assert third != second
    store.delete_stream("cam")  # this connection
    assert store.fingerprint("cam") == (0, None, 0.0)
    assert store.fingerprint("other") == (0, None, 0.0)


def _instructions(store: SQLiteMemoryStore, read: Callable[[], object]) -> int:
    """SQLite virtual-machine instructions that ``read`` ran on this thread's connection (to within 100): what it
    cost in rows visited, whatever the machine's speed."""
    ticks: list[int] = []
    db = store._db()
    db.set_progress_handler(lambda: ticks.append(1), 100)  # returns None: go on
    try:
        read()
    finally:
        db.set_progress_handler(None, 0)
    return 100 * len(ticks)


def test_a_page_of_a_long_stream_reads_only_the_rows_it_returns(store):
    n = 20_000  # 2 weeks of 60 s spans, and a fine node every tenth span
    store.add_many([coarse(60.0 * i, 60.0 * (i + 1), f"span {i}") for i in range(n)]
                   + [MemoryNode("cam", "fine", 60.0 * i, 60.0 * i + 10, f"fine {i}") for i in range(0, n, 10)])
    end = 60.0 * n
    assert _instructions(store, lambda: store.nodes("cam")) > 10 * n  # reading everything visits every row
    pages = {  # the dashboard's page, a level's, a page from late on, a window: each reads about what it returns
        "latest": lambda: store.nodes("cam", start=0, limit=61, latest=True),
        "latest coarse": lambda: store.nodes("cam", level="coarse", limit=61, latest=True),
        "from late on": lambda: store.nodes("cam", start=end - 3000, limit=61),
        "coarse from late on": lambda: store.nodes("cam", level="coarse", start=end - 3000, limit=61),
        "a window": lambda: store.nodes("cam", start=end / 2, end=end / 2 + 600),
        "latest before": lambda: store.nodes("cam", end=end / 2, limit=10, latest=True),
    }
    for name, read in pages.items():
        assert _instructions(store, read) < n, name
    assert [x.text for x in pages["latest"]()][-2:] == [f"span {n - 2}", f"span {n - 1}"]
    half = n // 2
    assert [x.text for x in pages["latest before"]()] == [f"fine {half - 10}"] + [f"span {i}" for i in
                                                                                   range(half - 9, half)]


def test_counts_and_caption_coverage_are_read_again_only_after_a_commit_by_anyone(store):
    store.add_many([coarse(0, 60, "a"), coarse(60, 120, "b")])
    assert (store.count("cam", level="coarse", origin="ingest"), store.captioned_until("cam")) == (2, 120.0)
    assert _instructions(store, lambda: (store.count("cam", level="coarse", origin="ingest"),
                                         store.captioned_until("cam"), store.count("cam"))) <= 300
    seen: list[object] = []  # another thread (its own connection) is given what this one read
    reader = threading.Thread(target=lambda: seen.append((store.captioned_until("cam"), _instructions(
        store, lambda: seen.append(store.count("cam", level="coarse", origin="ingest"))))))
    reader.start()
    reader.join()
    assert seen == [2, (120.0, 0)]
    other = SQLiteMemoryStore(store.path)  # another store object, as another process would write
    other.add(coarse(120, 180, "c"))
    other.close()
    assert (store.count("cam", level="coarse", origin="ingest"), store.captioned_until("cam")) == (3, 180.0)
    writer = threading.Thread(target=store.add, args=(coarse(180, 240, "d"),))  # another thread's connection
    writer.start()
    writer.join()
    assert (store.count("cam"), store.captioned_until("cam")) == (4, 240.0)
    store.delete_stream("cam")  # this connection
    assert (store.count("cam"), store.captioned_until("cam")) == (0, 0.0)


def test_closed_store_refuses_use(tmp_path):
    s = SQLiteMemoryStore(tmp_path / "m.sqlite")
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.nodes("cam")


class Recorder(MemoryObserver):
    def __init__(self) -> None:
        self.seen: list[list[tuple[int | None, str]]] = []

    def on_nodes_added(self, nodes):
        self.seen.append([(n.id, n.text) for n in nodes])


class Broken(MemoryObserver):
    def on_nodes_added(self, nodes):
        raise RuntimeError("observer bug")


def test_observers_see_every_node_stored_after_it_commits(store):
    recorder = Recorder()
    store.add_observer(Broken())  # a failing observer is logged; the write and the other observers go on
    store.add_observer(recorder)
    first = store.add(coarse(0, 60, "a red van"))
    more = store.add_many([coarse(60, 120, "a bus"), MemoryNode("cam", "fine", 0, 10, "plate KX-4821")])
    assert recorder.seen == [[(first.id, "a red van")], [(n.id, n.text) for n in more]]
    assert all(node_id is not None for batch in recorder.seen for node_id, _ in batch)
    with pytest.raises(ValueError):  # a write that fails tells nobody
        store.add_many([coarse(120, 180, "fine"), coarse(5, 5, "empty")])
    assert len(recorder.seen) == 2 and store.count("cam") == 3
    store.remove_observer(recorder)
    store.add(coarse(120, 180, "after"))
    assert len(recorder.seen) == 2


def test_node_by_id_and_stream_listing_are_on_the_interface(store):
    assert isinstance(store, MemoryStore)
    stored = store.add(coarse(0, 60, "a red van", stream="yard"))
    assert store.node(stored.id) == stored and store.node(10_000) is None
    assert store.streams() == ["yard"]
    store.delete_stream("yard")
    assert store.streams() == [] and store.node(stored.id) is None
    store.check()  # the readiness probe answers
