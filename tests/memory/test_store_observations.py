"""Observations stored with the stream (tracked objects, per-frame counts, observed-until) in both memory stores:
every behaviour of the ObservationStore protocol on SQLite and on a real PostgreSQL, the schema step that brings an
existing data directory up to date, and the fence of a stream's one writer."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from lucy.cluster.leases import Fenced, Leases
from lucy.memory import postgres_store, sqlite_store
from lucy.memory.nodes import MemoryNode
from lucy.memory.postgres_store import PostgresMemoryStore
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.memory.store import MemoryStore
from lucy.perception.objects import CountSample, Observations, PathPoint, TrackedObject


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path):
    """A fresh store of each backend: every test using it runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        store: MemoryStore = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    else:
        store = PostgresMemoryStore(request.getfixturevalue("postgres_dsn"))
    yield store
    store.close()


def track(track_id: int, first: float, last: float, label: str = "person", stream: str = "cam", **kw) -> TrackedObject:
    values = {"score": 0.8, "entered": "left", "exited": "right", "moving": True, "best_time": first,
              "best_box": (0.1, 0.2, 0.3, 0.6)}
    return TrackedObject(stream=stream, track_id=track_id, label=label, first_seen=first, last_seen=last,
                         **{**values, **kw})


def observe(store: MemoryStore, *tracks: TrackedObject, until: float = 0.0, counts=(), stream: str = "cam") -> None:
    store.record_observations(Observations(stream=stream, until=until, counts=list(counts), tracks=list(tracks)))


def ids(tracks: list[TrackedObject]) -> list[int]:
    return [t.track_id for t in tracks]


def test_a_track_and_counts_come_back_as_recorded(memory):
    van = TrackedObject(stream="cam", track_id=7, label="truck", first_seen=3.5, last_seen=3600.25, score=0.91,
                        entered="in view", exited=None, moving=False,
                        path=(PathPoint(3.5, 0.5, 0.2), PathPoint(1800.0, 0.51, 0.2), PathPoint(3600.25, 0.5, 0.21)),
                        attributes={"colour": "white"}, best_time=120.5, best_box=(0.4, 0.1, 0.6, 0.3),
                        snapshot=b"\xff\xd8jpeg bytes\x00\xff\xd9", active=True)
    assert memory.observed_until("cam") is None and memory.object_tracks("cam") == []
    observe(memory, van, until=3601.0, counts=[CountSample(3.5, {"truck": 1, "person": 2}), CountSample(4.0, {})])
    assert memory.object_track("cam", 7) == van  # every field, the snapshot's bytes included
    listed = memory.object_tracks("cam")
    assert listed == [replace(van, snapshot=None, snapshot_stored=True)]  # lists never carry snapshots' bytes
    assert listed[0].has_snapshot
    assert listed[0].dwell == pytest.approx(3596.75)
    assert memory.object_counts("cam", 0, 10) == [CountSample(3.5, {"person": 2, "truck": 1}), CountSample(4.0, {})]
    assert memory.observed_until("cam") == 3601.0
    assert memory.object_track("cam", 8) is None and memory.object_track("lobby", 7) is None
    assert memory.object_track("cam", 2**70) is None and memory.object_track("cam", -1) is None


def test_tracks_overlapping_a_range_oldest_first(memory):
    observe(memory, track(1, 0, 10), track(2, 10, 20), track(3, 25, 25), track(4, 5, 100), track(5, 19.999, 30),
            track(6, 20, 21))
    observe(memory, track(9, 0, 50, stream="lobby"), stream="lobby")
    assert ids(memory.object_tracks("cam")) == [1, 4, 2, 5, 6, 3]
    # Seen at any time in [10, 20): last seen at or after 10 (track 1 was seen at 10), first seen before 20.
    assert ids(memory.object_tracks("cam", start=10, end=20)) == [1, 4, 2, 5]
    assert ids(memory.object_tracks("cam", start=25, end=26)) == [4, 5, 3]  # a track seen once, at 25
    assert ids(memory.object_tracks("cam", start=100.5)) == []
    assert ids(memory.object_tracks("cam", start=30)) == [4, 5]
    assert ids(memory.object_tracks("cam", end=5)) == [1]
    assert ids(memory.object_tracks("cam", start=0, end=200, limit=2)) == [1, 4]
    assert memory.object_tracks("cam", limit=0) == [] and memory.object_tracks("nobody") == []
    assert ids(memory.object_tracks("lobby", start=10, end=20)) == [9]


def test_label_filter_and_the_vehicle_group(memory):
    observe(memory, track(1, 0, 5, "person"), track(2, 1, 6, "car"), track(3, 2, 7, "truck"), track(4, 3, 8, "bus"),
            track(5, 4, 9, "bicycle"), track(6, 5, 10, "dog"), track(7, 6, 11, "vehicle"))
    assert ids(memory.object_tracks("cam", label="person")) == [1]
    assert ids(memory.object_tracks("cam", label="car")) == [2]
    assert ids(memory.object_tracks("cam", label="vehicle")) == [2, 3, 4]  # every one of VEHICLES, not bicycles
    assert ids(memory.object_tracks("cam", label="vehicle", start=6.5, end=20)) == [3, 4]
    assert memory.object_tracks("cam", label="cat") == []


def test_a_replaced_track_keeps_its_snapshot_unless_it_brings_one(memory):
    first = track(1, 0, 2, active=True, exited=None, snapshot=b"first view")
    observe(memory, first, until=2)
    grown = track(1, 0, 9, active=False, exited="right", attributes={"upper": "red"},
                  path=(PathPoint(0, 0.1, 0.5), PathPoint(9, 0.9, 0.5)))
    observe(memory, grown, until=10)
    stored = memory.object_track("cam", 1)
    assert stored == replace(grown, snapshot=b"first view")  # updated in place, its snapshot kept
    assert ids(memory.object_tracks("cam", start=5)) == [1]
    observe(memory, replace(grown, snapshot=b"a better view"), until=10)
    assert memory.object_track("cam", 1).snapshot == b"a better view"
    observe(memory, replace(grown, snapshot=b""), until=10)  # an empty snapshot is none
    assert memory.object_track("cam", 1).snapshot == b"a better view"
    assert len(memory.object_tracks("cam")) == 1


def test_next_track_id_goes_on_from_the_highest_stored_per_stream(memory):
    assert memory.next_track_id("cam") == 1
    observe(memory, track(3, 0, 1), track(41, 1, 2), track(2, 2, 3))
    observe(memory, track(5, 0, 1, stream="lobby"), stream="lobby")
    assert memory.next_track_id("cam") == 42 and memory.next_track_id("lobby") == 6
    assert memory.next_track_id("dock") == 1


def test_observed_until_moves_forward_only(memory):
    observe(memory, until=30.0)
    assert memory.observed_until("cam") == 30.0
    observe(memory, until=12.0)  # a pass over frames observed already (a resumed stream) does not move it back
    assert memory.observed_until("cam") == 30.0
    observe(memory, until=60.5, counts=[CountSample(59.5, {"person": 1})])
    assert memory.observed_until("cam") == 60.5 and memory.observed_until("lobby") is None


def test_counts_in_a_half_open_range_with_empty_frames_kept(memory):
    observe(memory, until=3, counts=[CountSample(0.0, {"person": 3, "car": 0}), CountSample(0.5, {}),
                                     CountSample(1.0, {"person": 1, "dog": 2}), CountSample(2.0, {"person": 5})])
    assert memory.object_counts("cam", 0.5, 2.0) == [CountSample(0.5, {}), CountSample(1.0, {"person": 1, "dog": 2})]
    assert memory.object_counts("cam", 0, 0.5) == [CountSample(0.0, {"person": 3})]  # labels of 0 are left out
    assert max(c.counts.get("person", 0) for c in memory.object_counts("cam", 0, 10)) == 5
    observe(memory, until=3, counts=[CountSample(1.0, {"person": 2})])  # the same frame again replaces its counts
    assert memory.object_counts("cam", 1.0, 1.5) == [CountSample(1.0, {"person": 2})]
    assert memory.object_counts("cam", 5, 10) == [] and memory.object_counts("lobby", 0, 10) == []


def test_delete_stream_forgets_its_observations_only(memory):
    observe(memory, track(1, 0, 5, snapshot=b"jpeg"), until=6, counts=[CountSample(1.0, {"person": 1})])
    observe(memory, track(1, 0, 5, stream="lobby"), until=6, counts=[CountSample(1.0, {"dog": 1})], stream="lobby")
    memory.add(MemoryNode(stream="cam", level="coarse", start=0, end=60, text="a person walks by"))
    assert memory.delete_stream("cam") == 1
    assert memory.object_tracks("cam") == [] and memory.object_track("cam", 1) is None
    assert memory.object_counts("cam", 0, 10) == [] and memory.observed_until("cam") is None
    assert memory.next_track_id("cam") == 1
    assert ids(memory.object_tracks("lobby")) == [1] and memory.observed_until("lobby") == 6
    assert memory.object_counts("lobby", 0, 10) == [CountSample(1.0, {"dog": 1})]


def test_nul_in_labels_and_attributes_is_taken_out(memory):
    odd = track(1, 0, 5, label="per\0son", entered="le\0ft", exited="\0right",
                attributes={"up\0per": "re\0d", "face": "seen"})
    observe(memory, odd, until=5, counts=[CountSample(1.0, {"per\0son": 2, "person": 1})])
    stored = memory.object_track("cam", 1)
    assert (stored.label, stored.entered, stored.exited) == ("person", "left", "right")
    assert stored.attributes == {"upper": "red", "face": "seen"}
    assert ids(memory.object_tracks("cam", label="person")) == [1]
    assert memory.object_counts("cam", 0, 5) == [CountSample(1.0, {"person": 3})]  # the same label once cleaned


@pytest.mark.parametrize("bad", [
    track(1, 5, 4),  # last seen before it was first seen
    track(1, 0, 1, stream="lobby"),  # another stream's track
    track(0, 0, 1),  # ids start at 1
    track(2**63, 0, 1),  # past a 64-bit id
    track(1, 0, math.nan),
    track(1, 0, 1, score=math.inf),
    track(1, 0, 1, path=(PathPoint(0, math.nan, 0.5),)),
    track(1, 0, 1, label="\0"),
])
def test_a_record_that_cannot_be_stored_is_refused_and_nothing_is_written(memory, bad):
    with pytest.raises(ValueError):
        observe(memory, track(3, 0, 1), bad, until=10, counts=[CountSample(0.5, {"person": 1})])
    assert memory.object_tracks("cam") == [] and memory.object_counts("cam", 0, 10) == []
    assert memory.observed_until("cam") is None


def test_a_negative_count_or_a_time_that_is_not_a_number_is_refused(memory):
    with pytest.raises(ValueError, match="negative"):
        observe(memory, until=1, counts=[CountSample(0.5, {"person": -1})])
    with pytest.raises(ValueError):
        observe(memory, until=math.nan)
    with pytest.raises(ValueError):
        observe(memory, until=1, counts=[CountSample(math.inf, {"person": 1})])
    assert memory.observed_until("cam") is None and memory.object_counts("cam", -math.inf, math.inf) == []


# ------------------------------------------------------------------------------------------- schema and fences


def test_an_sqlite_data_directory_of_the_previous_schema_gains_observations(tmp_path, monkeypatch):
    path = tmp_path / "memory.sqlite"
    monkeypatch.setattr(sqlite_store, "MIGRATIONS", sqlite_store.MIGRATIONS[:5])  # the release before observations
    old = SQLiteMemoryStore(path)
    old.add(MemoryNode(stream="cam", level="coarse", start=0, end=60, text="a white van parks"))
    assert old.schema_version == 5
    old.close()
    monkeypatch.undo()
    new = SQLiteMemoryStore(path)
    assert new.schema_version == len(sqlite_store.MIGRATIONS) == 6
    assert [n.text for n, _ in new.search("cam", "van")] == ["a white van parks"]
    observe(new, track(1, 0, 60, "truck", snapshot=b"jpeg"), until=60)
    assert new.object_track("cam", 1).snapshot == b"jpeg" and new.next_track_id("cam") == 2
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"object_tracks", "object_counts", "observed_until"} <= tables
    new.close()


def test_sqlite_range_reads_use_the_indexes(tmp_path):
    store = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    db = sqlite3.connect(store.path)
    plans = {
        "time": "SELECT track_id FROM object_tracks WHERE stream = 'cam' AND last_seen >= 10 AND first_seen < 20",
        "label": "SELECT track_id FROM object_tracks WHERE stream = 'cam' AND label IN ('car') AND last_seen >= 10",
        "counts": "SELECT time, counts FROM object_counts WHERE stream = 'cam' AND time >= 1 AND time < 2",
    }
    details = {k: " ".join(r[3] for r in db.execute(f"EXPLAIN QUERY PLAN {sql}")) for k, sql in plans.items()}
    assert "object_tracks_stream_last_seen" in details["time"]
    assert "object_tracks_stream_label" in details["label"]
    assert "PRIMARY KEY" in details["counts"] and "SCAN" not in details["counts"]
    db.close()
    store.close()


def test_a_postgres_database_of_the_previous_schema_gains_observations(postgres_dsn, monkeypatch):
    monkeypatch.setattr(postgres_store, "MIGRATIONS", postgres_store.MIGRATIONS[:5])
    old = PostgresMemoryStore(postgres_dsn)
    old.add(MemoryNode(stream="cam", level="coarse", start=0, end=60, text="a white van parks"))
    old.close()
    monkeypatch.undo()
    new = PostgresMemoryStore(postgres_dsn)
    try:
        assert new.schema_version == len(postgres_store.MIGRATIONS) == 6
        observe(new, track(1, 0, 60, "truck", snapshot=b"jpeg\x00"), until=60)
        assert new.object_track("cam", 1).snapshot == b"jpeg\x00" and new.nodes("cam")[0].text == "a white van parks"
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            kinds = dict(db.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name "
                                    "IN ('object_tracks', 'object_counts') AND column_name IN "
                                    "('path', 'snapshot', 'counts')").fetchall())
        assert kinds == {"path": "jsonb", "snapshot": "bytea", "counts": "jsonb"}
    finally:
        new.close()


def test_a_superseded_owner_cannot_record_observations(postgres_dsn):
    db = PostgresMemoryStore(postgres_dsn)
    leases = Leases(db, ttl_seconds=30)
    zombie = PostgresMemoryStore(postgres_dsn)
    zombie.set_fence(leases.acquire("cam", "owner-a"))
    try:
        observe(zombie, track(1, 0, 5), until=5)
        owner = PostgresMemoryStore(postgres_dsn)
        owner.set_fence(leases.acquire("cam", "owner-b", take_over=True))
        try:
            with pytest.raises(Fenced):
                observe(zombie, track(1, 0, 9, snapshot=b"a zombie's"), until=9,
                        counts=[CountSample(8.0, {"person": 1})])
            observe(owner, track(2, 6, 9), until=9)
        finally:
            owner.close()
    finally:
        zombie.close()
    assert [(t.track_id, t.last_seen) for t in db.object_tracks("cam")] == [(1, 5.0), (2, 9.0)]
    assert db.object_counts("cam", 0, 10) == [] and db.observed_until("cam") == 9.0
    db.close()
