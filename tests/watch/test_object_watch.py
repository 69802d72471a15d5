"""Standing questions about a kind of object fire on the tracks the detect stage stored: the checker shows the check
agent a span's tracked objects beside its caption (lucy.watch.observed), so "alert me when a person appears" is a
yes in the span where a person was tracked, with the track's times as the alert's, and a caption that says nothing
of people is no obstacle."""

from __future__ import annotations

import asyncio

from lucy.config import load_settings
from lucy.memory.nodes import MemoryNode
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.perception.objects import Observations, PathPoint, TrackedObject
from lucy.query.reasoners.lexical import LexicalReasoner
from lucy.watch.checker import WatchChecker
from lucy.watch.observed import objects_section, track_statement
from lucy.wiring import open_frames

GRAY = "Scenes:\n- {a:.1f}-{b:.1f} s: mostly gray background"


def _track(tid: int, label: str, first: float, last: float, *, moving: bool, active: bool = False,
           attributes: dict[str, str] | None = None) -> TrackedObject:
    return TrackedObject(stream="gate", track_id=tid, label=label, first_seen=first, last_seen=last, score=0.8,
                         entered="left", exited=None if active else "right", moving=moving,
                         path=(PathPoint(first, 0.1, 0.6), PathPoint(last, 0.9 if moving else 0.1, 0.6)),
                         attributes=attributes or {}, best_time=first, best_box=(0.1, 0.4, 0.2, 0.8), active=active)


def test_a_watch_for_a_kind_of_object_fires_on_its_track(tmp_path):
    settings = load_settings(data=tmp_path / "data")
    memory = SQLiteMemoryStore.for_data(settings)
    person = memory.add_watch("gate", "Alert me when a person appears")
    car = memory.add_watch("gate", "Tell me when a car stops")
    dog = memory.add_watch("gate", "Tell me when a dog appears")
    vehicle = memory.add_watch("gate", "Let me know when a vehicle arrives")
    memory.add_many([MemoryNode("gate", "coarse", a, a + 60, GRAY.format(a=a, b=a + 60)) for a in (0.0, 60.0)])
    memory.record_observations(Observations(stream="gate", until=120.0, tracks=[
        _track(1, "person", 70.0, 80.0, moving=True, attributes={"upper": "red"}),
        _track(2, "car", 90.0, 120.0, moving=False, active=True, attributes={"colour": "white"}),
        _track(3, "car", 95.0, 99.0, moving=True)]))  # a car driving through does not "stop"
    for watch in (person, car, dog, vehicle):
        memory.set_watch_progress(watch.id, 0.0)
    checker = WatchChecker(settings, "gate", memory, LexicalReasoner(), None, open_frames(settings))
    try:
        alerts = asyncio.run(checker.check_span(0.0, 120.0))
        assert sorted((a.watch_id, a.start, a.end, a.level) for a in alerts) == [
            (person.id, 70.0, 80.0, "coarse"), (car.id, 90.0, 120.0, "coarse"),
            (vehicle.id, 90.0, 120.0, "coarse")], alerts  # both cars' times, in one alert
        assert all(memory.watch_progress(w.id) == 120.0 for w in (person, car, dog, vehicle))
    finally:
        asyncio.run(checker.aclose())
        memory.close()


def test_tracked_objects_read_as_statements_a_check_can_match():
    parked = _track(2, "car", 90.0, 120.0, moving=False, active=True, attributes={"colour": "white"})
    assert track_statement(parked) == ("- car 2 (vehicle): arrives, enters from the left, stops and stays (stationary, "
                                       "parked), still in view, seen 90.0-120.0 s, colour white")
    walker = _track(1, "person", 70.0, 80.0, moving=True)
    assert track_statement(walker) == ("- person 1: arrives, enters from the left, walks (moving), leaves at the "
                                       "right, seen 70.0-80.0 s")
    # no "; " inside a statement (the check agent splits on it), no word that negates it
    many = [_track(i, "person", float(i), float(i) + (i % 7), moving=True) for i in range(1, 60)]
    text = objects_section(many)
    lines = text.splitlines()
    assert lines[0] == "Objects (tracked by the detector, the 40 seen longest of 59):" and len(lines) == 41
    assert "; " not in text and " not " not in text and objects_section([]) == ""
