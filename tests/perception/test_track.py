"""The tracker on synthetic detection sequences at the detect stage's ~2 fps: ids kept through crossings and gaps,
edges, stillness, false positives, counts; colours and snapshots from synthetic frames."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from lucy.config.settings import DetectSettings
from lucy.perception import appearance
from lucy.perception.objects import IN_VIEW, Detection, PathPoint, TrackedObject
from lucy.perception.track import PATH_POINTS, SNAPSHOT_SIDE, Tracker, simplify

FPS = 2.0
STEP = 1 / FPS


def person(cx: float, cy: float = 0.5, score: float = 0.8, w: float = 0.04, h: float = 0.12) -> Detection:
    return Detection("person", (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), score)


def run(tracker: Tracker, frames, frame_image=None) -> dict[int, list[TrackedObject]]:
    """Feed (time, detections) frames, then finish: every record made, by track id, oldest first."""
    records: dict[int, list[TrackedObject]] = {}
    last = 0.0
    for time, detections in frames:
        for r in tracker.update(time, detections, frame_image):
            records.setdefault(r.track_id, []).append(r)
        last = time
    for r in tracker.finish(last + STEP):
        records.setdefault(r.track_id, []).append(r)
    return records


def final(records: dict[int, list[TrackedObject]]) -> dict[int, TrackedObject]:
    return {i: rs[-1] for i, rs in records.items()}


def walk(x0: float, x1: float, speed: float, start: float = 0.0, y: float = 0.5, **kw):
    """A person walking from x0 to x1 at ``speed`` (picture widths a second), one detection per frame."""
    n = round(abs(x1 - x0) / speed * FPS) + 1
    step = math.copysign(speed * STEP, x1 - x0)
    return [(start + i * STEP, person(x0 + i * step, y, **kw)) for i in range(n)]


def merge(*walks):
    """Frames of several walks together, at their common times."""
    by_time: dict[float, list[Detection]] = {}
    for w in walks:
        for t, d in w:
            by_time.setdefault(round(t, 6), []).append(d)
    return sorted(by_time.items())


def test_two_people_crossing_keep_their_ids():
    """Walking towards each other at 0.1 picture widths a second (1.25 of their own widths a frame), crossing in
    the middle, where the nearer one hides the other for two frames (the detector sees one person there)."""
    a = walk(0.15, 0.85, 0.1, y=0.5)
    b = walk(0.85, 0.15, 0.1, y=0.53)
    frames = merge(a, b)
    hidden = [t for t, _ in frames if 3.0 <= t < 4.0]
    frames = [(t, ds[:1] if t in hidden else ds) for t, ds in frames]
    objects = final(run(Tracker("cam", DetectSettings(), first_id=1), frames))
    assert sorted(objects) == [1, 2]
    going_right = [o for o in objects.values() if o.path[0].x < o.path[-1].x]
    going_left = [o for o in objects.values() if o.path[0].x > o.path[-1].x]
    assert len(going_right) == len(going_left) == 1
    right, left = going_right[0], going_left[0]
    assert right.path[0].x == pytest.approx(0.15) and right.path[-1].x > 0.8 and right.path[-1].y == pytest.approx(0.5)
    assert left.path[0].x == pytest.approx(0.85) and left.path[-1].x < 0.2 and left.path[-1].y == pytest.approx(0.53)
    assert right.moving and left.moving


@pytest.mark.parametrize("touching", [True, False], ids=["box-at-edge", "heading-through-edge"])
def test_walking_left_to_right_enters_left_and_exits_right(touching):
    """First seen with its box at the left edge, or just inside it moving right (it came from there one frame
    before); last seen at the right edge, or heading out through it; then nothing for longer than the lost time."""
    start, end = (0.02, 0.98) if touching else (0.05, 0.95)
    frames = [(t, [d]) for t, d in walk(start, end, 0.08)]
    last = frames[-1][0]
    settings = DetectSettings()
    gone = settings.track_lost_seconds + (settings.track_min_hits + 1) * STEP  # it may still be known again till then
    frames += [(last + (i + 1) * STEP, []) for i in range(math.ceil(gone * FPS))]
    tracker = Tracker("cam", settings, first_id=1)
    records: dict[int, list[TrackedObject]] = {}
    for t, ds in frames:
        for r in tracker.update(t, ds):
            records.setdefault(r.track_id, []).append(r)
    assert list(records) == [1]
    ended = records[1][-1]
    assert not ended.active and ended.exited == "right" and ended.entered == "left" and ended.moving
    assert ended.first_seen == 0.0 and ended.last_seen == pytest.approx(last)
    assert ended.path[0].x == pytest.approx(start) and ended.path[-1].x == pytest.approx(end, abs=0.05)
    assert len(ended.path) <= PATH_POINTS
    assert records[1][0].active and records[1][0].exited is None  # the first record, at confirmation, is open


def test_someone_standing_in_the_middle_then_lost_there_leaves_in_view():
    frames = [(i * STEP, [person(0.5 + 0.001 * (i % 3))]) for i in range(20)]
    frames += [(10 + i * STEP, []) for i in range(6)]
    objects = final(run(Tracker("cam", DetectSettings()), frames))
    (o,) = objects.values()
    assert o.entered == o.exited == IN_VIEW and not o.moving


def test_a_car_parked_for_ten_minutes_is_one_still_object():
    """1200 frames at 2 fps: jitter, detector misses (a second now and then), people walking past hiding part of
    it for two frames (its box shrinks, its centre moves), car and truck labels in turn: one still vehicle."""
    rng = np.random.default_rng(7)
    base = np.array([0.55, 0.75, 0.85, 0.87])  # a long, low box: it may wander 0.06 (half its height) and be still
    frames = []
    for i in range(1200):
        t = i * STEP
        if i % 97 in (10, 11):  # missed for a second
            frames.append((t, []))
            continue
        box = base + rng.normal(0, 0.002, 4)
        if i % 53 in (20, 21):  # half hidden by someone walking past: its centre moves 0.075
            box[0] += 0.15
        label = "truck" if i % 3 == 0 else "car"
        frames.append((t, [Detection(label, tuple(float(v) for v in box), 0.7 + 0.1 * rng.random())]))
    records = run(Tracker("cam", DetectSettings(), first_id=5), frames)
    assert list(records) == [5]
    o = records[5][-1]
    assert o.label == "car" and not o.moving and o.entered == o.exited == IN_VIEW
    assert o.first_seen == 0.0 and o.last_seen == pytest.approx(599.5) and o.dwell > 599
    assert len(o.path) <= PATH_POINTS and not o.active
    # reported when confirmed, every few seconds of its life while in view (not every frame), and when it ended
    assert 20 <= len(records[5]) <= 200 and all(r.active for r in records[5][:-1])


def test_two_people_walking_side_by_side_keep_their_ids():
    """Close together (their boxes overlap), at 1.5 of their widths a frame: no box of one frame overlaps the next
    one of the same person until the filter knows their speed, so the nearer centre must decide."""
    upper = walk(0.1, 0.9, 0.12, y=0.45)
    lower = walk(0.1, 0.9, 0.12, y=0.55)
    frames = [(t, ds if i % 2 else ds[::-1]) for i, (t, ds) in enumerate(merge(upper, lower))]
    objects = final(run(Tracker("cam", DetectSettings()), frames))
    assert len(objects) == 2
    assert sorted(sorted({p.y for p in o.path}) for o in objects.values()) == [[0.45], [0.55]]


def test_a_parked_van_at_the_edge_of_the_picture_did_not_come_in_through_it():
    frames = [(i * STEP, [Detection("truck", (0.0, 0.6, 0.3, 1.0), 0.8)]) for i in range(40)]
    (o,) = final(run(Tracker("cam", DetectSettings()), frames)).values()
    assert not o.moving and o.entered == o.exited == IN_VIEW


@pytest.mark.parametrize("frames_seen", [1, 2])
def test_a_false_positive_in_one_or_two_frames_never_becomes_an_object(frames_seen):
    tracker = Tracker("cam", DetectSettings(track_min_hits=3))
    frames = [(i * STEP, [person(0.3, 0.3)] if 4 <= i < 4 + frames_seen else []) for i in range(20)]
    counts = []
    records: list[TrackedObject] = []
    for t, ds in frames:
        records += tracker.update(t, ds)
        counts.append(tracker.counts(t))
    records += tracker.finish(10.0)
    assert records == [] and all(c.counts == {} for c in counts)
    assert tracker.open_tracks == 0


@pytest.mark.parametrize(("gap", "ids"), [(1.5, [1]), (3.0, [1, 2])])
def test_a_gap_shorter_than_the_lost_time_keeps_the_id_a_longer_one_makes_a_new_one(gap, ids):
    """A person walking on, unseen for ``gap`` seconds (behind a pillar) with track_lost_seconds = 2."""
    seen = walk(0.1, 0.9, 0.05)
    frames = [(t, [d] if not 5.0 <= t < 5.0 + gap else []) for t, d in seen]
    records = run(Tracker("cam", DetectSettings(track_lost_seconds=2.0)), frames)
    assert sorted(records) == ids
    if len(ids) == 2:
        first, second = (records[i][-1] for i in ids)
        assert first.last_seen == pytest.approx(4.5) and second.first_seen == pytest.approx(5.0 + gap)
        assert first.exited == IN_VIEW  # lost in the middle of the picture


def test_ids_start_at_first_id_and_go_on_after_finish():
    tracker = Tracker("cam", DetectSettings(), first_id=41)
    first = run(tracker, merge(walk(0.1, 0.5, 0.05), walk(0.9, 0.5, 0.05, y=0.2)))
    assert sorted(first) == [41, 42]
    again = run(tracker, [(100 + t, [d]) for t, d in walk(0.2, 0.6, 0.05)])  # after a gap in a live stream
    assert sorted(again) == [43]
    with pytest.raises(ValueError, match="first_id"):
        Tracker("cam", DetectSettings(), first_id=0)


def test_a_fast_car_at_two_frames_a_second_keeps_one_id():
    """A car crossing the picture in 2.5 s: 0.2 of the picture (more than its own length) between two frames."""
    frames = [(i * STEP, [Detection("car", (x, 0.5, x + 0.15, 0.6), 0.8)])
              for i, x in enumerate(np.arange(0.0, 0.86, 0.2))]
    records = run(Tracker("cam", DetectSettings()), frames)
    assert list(records) == [1]
    assert records[1][-1].entered == "left" and records[1][-1].moving


def test_low_scores_keep_an_object_alive_but_never_start_one():
    settings = DetectSettings(track_high_score=0.6, min_score=0.3)
    seen = walk(0.1, 0.9, 0.05)
    frames = [(t, [Detection(d.label, d.box, 0.8 if t < 2 else 0.4)]) for t, d in seen]  # a poor view after 2 s
    records = run(Tracker("cam", settings), frames)
    assert list(records) == [1] and records[1][-1].last_seen == pytest.approx(seen[-1][0])
    low_only = [(t, [Detection(d.label, d.box, 0.4)]) for t, d in seen]
    assert run(Tracker("cam", settings), low_only) == {}


def test_counts_per_label_in_view():
    """Two people, a car and a truck (two vehicles: a group for matching, their own labels in counts); a person
    missed in one frame still counts; nothing is counted before it is confirmed."""
    tracker = Tracker("cam", DetectSettings(track_min_hits=3))
    samples = []
    for i in range(8):
        t = i * STEP
        dets = [Detection("car", (0.1, 0.6, 0.3, 0.8), 0.9), Detection("truck", (0.6, 0.6, 0.9, 0.9), 0.9),
                person(0.4 + 0.02 * i, 0.3)]
        if i != 5:
            dets.append(person(0.7 - 0.02 * i, 0.3))
        tracker.update(t, dets)
        samples.append(tracker.counts(t))
    assert [s.counts for s in samples[:2]] == [{}, {}]
    assert all(s.counts == {"person": 2, "car": 1, "truck": 1} for s in samples[2:])
    assert samples[5].time == 2.5
    tracker.finish(4.0)
    assert tracker.counts().counts == {}


def _figure(height=720, width=1280):
    """A grey street with a person (skin head, red shirt, blue trousers) and a red car with dark windows and
    wheels; the boxes a detector would give them."""
    frame = np.full((height, width, 3), 128, np.uint8)
    px0, py0, px1, py1 = 200, 200, 280, 440  # the person, 80 x 240 px
    frame[py0:py0 + 35, px0 + 25:px1 - 25] = (224, 172, 140)  # head
    frame[py0 + 35:py0 + 125, px0 + 5:px1 - 5] = (200, 20, 30)  # shirt
    frame[py0 + 125:py1 - 10, px0 + 12:px1 - 12] = (20, 40, 170)  # trousers
    frame[py1 - 10:py1, px0 + 12:px1 - 12] = (30, 30, 30)  # shoes
    cx0, cy0, cx1, cy1 = 600, 400, 1000, 560  # the car
    frame[cy0 + 50:cy1 - 30, cx0:cx1] = (180, 20, 20)  # body
    frame[cy0:cy0 + 50, cx0 + 60:cx1 - 80] = (20, 20, 25)  # windows
    frame[cy1 - 40:cy1, cx0 + 40:cx0 + 110] = (10, 10, 10)  # wheels
    frame[cy1 - 40:cy1, cx1 - 110:cx1 - 40] = (10, 10, 10)
    return frame, (px0 / width, py0 / height, px1 / width, py1 / height), (cx0 / width, cy0 / height, cx1 / width,
                                                                            cy1 / height)


def test_colours_of_a_red_shirt_over_blue_trousers_and_of_a_red_car_and_the_snapshot():
    frame, body, car = _figure()
    assert appearance.describe(frame, "person", body) == {"upper": "red", "lower": "blue"}
    assert appearance.describe(frame, "car", car) == {"colour": "red"}
    assert appearance.describe(frame, "dog", body) == {}
    stripes = np.zeros_like(frame)
    stripes[:] = np.array([(200, 20, 30), (20, 160, 40), (20, 40, 170), (220, 210, 30)], np.uint8)[
        np.arange(frame.shape[1]) % 4]  # four colours in equal shares: none is clearly the shirt's
    assert appearance.describe(stripes, "person", body) == {}

    frames = [(i * STEP, [Detection("person", body, 0.8), Detection("car", car, 0.9)]) for i in range(4)]
    objects = final(run(Tracker("cam", DetectSettings()), frames, frame_image=frame))
    by_label = {o.label: o for o in objects.values()}
    assert by_label["person"].attributes == {"upper": "red", "lower": "blue"}
    assert by_label["car"].attributes == {"colour": "red"}
    snapshot = by_label["person"].snapshot
    assert snapshot is not None and snapshot[:2] == b"\xff\xd8"
    picture = cv2.imdecode(np.frombuffer(snapshot, np.uint8), cv2.IMREAD_COLOR)
    assert max(picture.shape[:2]) == SNAPSHOT_SIDE
    assert by_label["person"].best_box == body and by_label["person"].best_time == 0.0

    quiet = final(run(Tracker("cam", DetectSettings(snapshots=False)), frames, frame_image=frame))
    assert all(o.snapshot is None and o.attributes for o in quiet.values())
    blind = final(run(Tracker("cam", DetectSettings()), frames))  # no pixels: no colours, no snapshot
    assert all(o.snapshot is None and o.attributes == {} for o in blind.values())


def test_the_best_view_is_the_largest_most_confident_one():
    frames = [(i * STEP, [person(0.5, 0.5, score=s, h=h, w=h / 3)])
              for i, (s, h) in enumerate([(0.6, 0.1), (0.9, 0.14), (0.5, 0.145), (0.7, 0.12)])]
    (o,) = final(run(Tracker("cam", DetectSettings()), frames)).values()
    assert o.best_time == 0.5 and o.score == 0.9


def test_bad_input_is_refused_or_left_out():
    tracker = Tracker("cam", DetectSettings())
    tracker.update(5.0, [])
    with pytest.raises(ValueError, match="go back"):
        tracker.update(4.0, [])
    with pytest.raises(ValueError, match="finite"):
        tracker.update(float("nan"), [])
    with pytest.raises(ValueError, match="uint8"):
        tracker.update(6.0, [], np.zeros((10, 10), np.uint8))
    odd = [Detection("person", (0.5, 0.5, 0.5, 0.7), 0.9), Detection("person", (float("nan"), 0, 0.1, 0.1), 0.9),
           Detection("person", (0.2, 0.2, 0.3, 0.4), float("nan")), Detection("person", (-0.5, -0.5, 0.1, 0.2), 0.9)]
    for i in range(4):
        tracker.update(6.0 + i * STEP, odd)
    (o,) = tracker.finish(10.0)  # only the box partly outside the picture, clipped to it
    assert o.best_box == (0.0, 0.0, 0.1, 0.2)


def test_path_simplification_keeps_turning_points():
    there_and_back = [PathPoint(i, x, 0.5) for i, x in enumerate([0.1, 0.3, 0.5, 0.7, 0.9, 0.7, 0.5, 0.3, 0.1])]
    assert [p.x for p in simplify(there_and_back, 0.02)] == [0.1, 0.9, 0.1]
    corner = [PathPoint(i, min(i, 5) * 0.1, max(0, i - 5) * 0.1) for i in range(11)]
    assert [(p.x, p.y) for p in simplify(corner, 0.02)] == [(0.0, 0.0), (0.5, 0.0), (0.5, 0.5)]


def test_someone_turning_a_corner_keeps_the_id():
    """Right at 2 of its widths a second for 5 s, then down at the same speed, in one frame's time."""
    frames = [(i * STEP, [person(0.2 + 0.08 * min(t, 5.0), 0.3 + 0.08 * max(0.0, t - 5.0))])
              for i, t in enumerate(np.arange(0, 10, STEP))]
    objects = final(run(Tracker("cam", DetectSettings()), frames))
    assert list(objects) == [1] and len(objects[1].path) >= 3  # the corner is on its path


# ------------------------------------------------------------------------------------ re-identification

GREY = (128, 128, 128)
LOOKS = {"red-blue": ((200, 20, 30), (20, 40, 170)), "green-black": ((30, 160, 40), (25, 25, 25)),
         "yellow-white": ((220, 210, 30), (235, 235, 235))}


def paint(people: list[tuple[Detection, str]], pillar: tuple[float, float] | None = None,
          size: tuple[int, int] = (360, 640)) -> np.ndarray:
    """A grey picture with each person's box painted as a figure (head, top, bottoms in their look) and a pillar
    (x0, x1, full height) in front of them."""
    height, width = size
    frame = np.full((height, width, 3), GREY, np.uint8)
    for det, look in people:
        x0, y0, x1, y1 = (round(v * n) for v, n in zip(det.box, (width, height, width, height), strict=True))
        top, bottoms = LOOKS[look]
        h = y1 - y0
        frame[y0:y0 + h // 6, x0 + (x1 - x0) // 4:x1 - (x1 - x0) // 4] = (224, 172, 140)
        frame[y0 + h // 6:y0 + h // 2, x0:x1] = top
        frame[y0 + h // 2:y1, x0:x1] = bottoms
    if pillar is not None:
        frame[:, round(pillar[0] * width):round(pillar[1] * width)] = (90, 70, 60)
    return frame


def scene(walks: list[tuple[list[tuple[float, Detection]], str]], pillar: tuple[float, float] | None = None):
    """(time, detections, picture) frames, every STEP from 0, of people walking in their looks; a person whose
    centre is behind the pillar is not detected (nor painted)."""
    last = max(t for steps, _ in walks for t, _ in steps)
    by_time: dict[float, list[tuple[Detection, str]]] = {round(i * STEP, 6): [] for i in range(round(last / STEP) + 1)}
    for steps, look in walks:
        for t, d in steps:
            hidden = pillar is not None and pillar[0] - 0.01 <= d.centre[0] <= pillar[1] + 0.01
            by_time.setdefault(round(t, 6), [])
            if not hidden:
                by_time[round(t, 6)].append((d, look))
    return [(t, [d for d, _ in people], paint(people, pillar)) for t, people in sorted(by_time.items())]


def track_scene(frames, settings: DetectSettings | None = None) -> dict[int, list[TrackedObject]]:
    tracker = Tracker("cam", settings or DetectSettings(faces=False), faces=None)
    records: dict[int, list[TrackedObject]] = {}
    for t, dets, picture in frames:
        for r in tracker.update(t, dets, picture):
            records.setdefault(r.track_id, []).append(r)
    for r in tracker.finish(frames[-1][0] + STEP):
        records.setdefault(r.track_id, []).append(r)
    return records


def big(cx: float, cy: float = 0.5) -> Detection:
    return person(cx, cy, w=0.06, h=0.3)


def stroll(x0: float, x1: float, speed: float, start: float = 0.0, y: float = 0.5):
    n = round(abs(x1 - x0) / speed * FPS) + 1
    step = math.copysign(speed * STEP, x1 - x0)
    return [(start + i * STEP, big(x0 + i * step, y)) for i in range(n)]


def test_someone_behind_a_pillar_for_four_seconds_is_the_same_object():
    """Walking at 0.05 of the picture a second behind a pillar 0.2 wide: unseen for 4 s (8 frames), longer than a
    prediction is trusted; known again by where they were heading and how they look."""
    frames = scene([(stroll(0.1, 0.9, 0.05), "red-blue")], pillar=(0.4, 0.6))
    unseen = [t for t, dets, _ in frames if not dets]
    assert len(unseen) >= 8
    records = track_scene(frames)
    assert list(records) == [1]
    o = records[1][-1]
    assert o.first_seen == 0.0 and o.last_seen == pytest.approx(frames[-1][0]) and o.moving
    assert o.path[0].x == pytest.approx(0.1) and o.path[-1].x == pytest.approx(0.9)
    assert o.attributes == {"upper": "red", "lower": "blue"}


@pytest.mark.parametrize(("missed", "ids"), [(3, [1]), (8, [1]), (11, [1]), (14, [1, 2])])
def test_a_person_standing_missed_for_n_frames_keeps_the_id_within_the_lost_time(missed, ids):
    """Standing (a little jitter), not detected for ``missed`` frames at 2 fps, then detected again: the same object
    while the gap is within track_lost_seconds (6 s), a new one after it."""
    settings = DetectSettings(faces=False, track_lost_seconds=6.0)
    frames = []
    for i in range(40):
        seen = not 10 <= i < 10 + missed
        d = big(0.5 + 0.002 * (i % 3))
        frames.append((i * STEP, [d] if seen else [], paint([(d, "green-black")] if seen else [])))
    records = track_scene(frames, settings)
    assert sorted(records) == ids
    assert not any(r.moving for rs in records.values() for r in rs)


def test_two_people_crossing_behind_a_pillar_come_out_with_their_own_ids():
    """One in red and blue walking right, one in green and black walking left, both behind the pillar at once
    (they cross there, unseen for 3 s): each is known again by their looks, not swapped."""
    right = stroll(0.1, 0.9, 0.05, y=0.5)
    left = stroll(0.9, 0.1, 0.05, y=0.52)
    frames = scene([(right, "red-blue"), (left, "green-black")], pillar=(0.42, 0.58))
    records = track_scene(frames)
    assert len(records) == 2
    by_look = {r[-1].attributes.get("upper"): r[-1] for r in records.values()}
    assert by_look["red"].path[0].x == pytest.approx(0.1) and by_look["red"].path[-1].x == pytest.approx(0.9)
    assert by_look["green"].path[0].x == pytest.approx(0.9) and by_look["green"].path[-1].x == pytest.approx(0.1)


def test_someone_else_coming_out_from_behind_the_pillar_is_a_new_object():
    """The person in red and blue walks behind the pillar and stays there; someone in yellow and white comes out of
    it just where and when the first would have, at the same pace: another person (their looks differ), though a
    prediction of where the first was going fits them exactly."""
    first = stroll(0.1, 0.5, 0.05)
    second = stroll(0.6, 0.9, 0.05, start=(0.6 - 0.1) / 0.05)
    frames = scene([(first, "red-blue"), (second, "yellow-white")], pillar=(0.4, 0.6))
    records = track_scene(frames, DetectSettings(faces=False, track_lost_seconds=6.0))
    assert len(records) == 2
    assert sorted(r[-1].attributes.get("upper") for r in records.values()) == ["red", "yellow"]


def test_someone_looking_alike_far_from_where_the_lost_one_was_is_a_new_object():
    """Two people dressed alike: one leaves at the left edge; 2 s later the other comes in at the right edge, far
    further than anyone walks in that time."""
    first = stroll(0.4, 0.03, 0.1)
    second = stroll(0.97, 0.6, 0.1, start=first[-1][0] + 2.0)
    frames = scene([(first, "red-blue"), (second, "red-blue")])
    records = track_scene(frames, DetectSettings(faces=False, track_lost_seconds=6.0))
    assert len(records) == 2
    assert [r[-1].entered for r in records.values()] == ["in view", "right"]


def _bicycle(cx: float, y1: float = 0.62) -> Detection:
    return Detection("bicycle", (cx - 0.04, y1 - 0.07, cx + 0.04, y1), 0.7)


def test_a_cyclist_is_a_person_riding_a_bicycle_and_a_walker_passing_a_parked_one_is_not():
    """A rider (their legs down in the bicycle's box) moving with it at 0.15 of the picture a second; a walker who
    passes a parked bicycle (0.05 of the picture a second), over it for 5 frames; a person standing beside another
    one."""
    frames = []
    for i in range(12):
        x = 0.1 + 0.075 * i  # the cyclist
        walker = 0.15 + 0.025 * i  # passes the parked bicycle at 0.3 at ~3 s, over it for 2.5 s
        dets = [person(x, 0.55, h=0.14), _bicycle(x), person(walker, 0.3, h=0.14), _bicycle(0.3, 0.37),
                person(0.8, 0.85, h=0.14), _bicycle(0.87, 0.92)]
        frames.append((i * STEP, dets))
    objects = final(run(Tracker("cam", DetectSettings(faces=False)), frames))
    riders = [o for o in objects.values() if o.attributes.get("riding") == "bicycle"]
    ridden = [o for o in objects.values() if o.attributes.get("ridden") == "person"]
    assert len(objects) == 6 and len(riders) == 1 and len(ridden) == 1
    assert riders[0].path[0].x == pytest.approx(0.1) and ridden[0].moving
    assert all(o.attributes == {} for o in objects.values() if o not in riders + ridden)


def test_someone_who_walked_out_of_the_picture_and_came_back_is_a_new_passer_by():
    """Out at the right edge, back in through it 4 s later, looking the same: a person who leaves and comes back is
    a walk-in again (only one hidden in the picture waits the lost time), and the first one ended soon after it left
    (the prediction's time), not after the lost time."""
    out = stroll(0.6, 0.97, 0.1)
    back = stroll(0.97, 0.6, 0.1, start=out[-1][0] + 4.0)
    frames = scene([(out, "red-blue"), (back, "red-blue")])
    tracker = Tracker("cam", DetectSettings(faces=False, track_lost_seconds=15.0), faces=None)
    ended_at = {}
    for t, dets, picture in frames:
        for r in tracker.update(t, dets, picture):
            if not r.active:
                ended_at[r.track_id] = t
    assert tracker.next_id == 3
    assert ended_at[1] - out[-1][0] <= 2.5 and [r.exited for r in tracker.finish(frames[-1][0])] == ["in view"]


def test_settled_counts_count_someone_from_their_first_frame_and_a_false_detection_never():
    """One walker from the first frame, a false detection in frames 4-5 only: the live count (counts) knows the
    walker from the frame that confirmed them, the settled counts from their first frame; the false one is in
    neither. A frame settles once its tentative tracks are known, so the newest frames wait."""
    tracker = Tracker("cam", DetectSettings(track_min_hits=3, faces=False))
    settled, live = [], []
    for i in range(12):
        dets = [person(0.1 + 0.05 * i)] + ([person(0.7, 0.2)] if i in (4, 5) else [])
        tracker.update(i * STEP, dets)
        live.append(tracker.counts().counts.get("person", 0))
        settled += tracker.settled_counts()
        if i == 0:
            assert settled == [] and tracker.pending_since() == 0.0  # the walker is still tentative
    assert live == [0, 0] + [1] * 10
    settled += tracker.settled_counts()
    tracker.finish(6.0)
    settled += tracker.settled_counts()
    assert [s.time for s in settled] == [i * STEP for i in range(12)]
    assert [s.counts for s in settled] == [{"person": 1}] * 12
    assert tracker.pending_since() is None


def test_settled_counts_count_a_person_seen_again_once():
    """Behind the pillar and out again: the frames of the track that turned out to be them count them once (and
    the first frame they were hidden in, as a detector's miss of one frame)."""
    frames = scene([(stroll(0.1, 0.9, 0.05), "red-blue")], pillar=(0.4, 0.6))
    tracker = Tracker("cam", DetectSettings(faces=False), faces=None)
    settled = []
    for t, dets, picture in frames:
        tracker.update(t, dets, picture)
        settled += tracker.settled_counts()
    tracker.finish(frames[-1][0] + STEP)
    settled += tracker.settled_counts()
    assert tracker.next_id == 2 and len(settled) == len(frames)
    shown = {s.time: s.counts.get("person", 0) for s in settled}
    hidden = [t for t, dets, _ in frames if not dets]
    assert all(shown[t] == (1 if dets or t == hidden[0] else 0) for t, dets, _ in frames)
