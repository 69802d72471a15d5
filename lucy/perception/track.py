"""Detections over time become objects: a multi-object tracker after SORT and ByteTrack, and what it says of each.

Why our own code and not a library: the association itself is scipy's ``linear_sum_assignment`` (the Hungarian
method, BSD-3); the rest is ~the size of a wrapper around any of the libraries on PyPI, and none fits as it is.
supervision's ByteTrack (MIT) pulls matplotlib and more for a tracker that associates all classes at once, has no
per-track record of edges, path or stillness, and counts time in frames, not media seconds; norfair (BSD-3) matches
points by distance with its own filter and brings filterpy and rich; motpy has not been released since 2021. What
Lucy needs beyond association (media-time filtering at an uneven ~2 fps, ids that go on across runs, one record per
object with edges, path, stillness, colours and a snapshot) would be ours either way.

How it works, per detected frame (``update``):
- Every track has a constant-velocity Kalman filter over its box's centre and size, in fractions of the frame, with
  its noise scaled by the box's own width and height (a near car and a distant person move alike, in their own
  sizes) and its steps in media seconds, so frames that are half a second apart, or uneven, predict as far as they
  are apart.
- Association (ByteTrack's two stages): detections scoring at least ``track_high_score`` are matched first to the
  confirmed tracks, then the lower ones to the confirmed tracks still unmatched (they keep an object alive through a
  poor view, never start one), then the high ones left to the tentative tracks; the high ones left after that start
  tentative tracks. Only tracks and detections of one label group meet (every vehicle label is one group: a van
  comes out as car in one frame and truck in the next). The cost is 1 - IoU with the predicted box plus the
  Mahalanobis distance of the centres (share of the gate), and the gate is that distance under chi-square 99.9%
  for 2 degrees of freedom, or an IoU of 0.3: at 2 fps a walking person moves more than its own width between two
  frames, so IoU alone would lose everyone whose speed the filter does not know yet.
- A track's predicted box is trusted for :data:`PREDICT_SECONDS` after it was last seen (a detector's miss of a
  frame or three, a short occlusion); after that it is *lost*: where a person went behind a sign, or stopped, or
  turned, the filter can no longer say, and its gate would grow to take anyone.
- A tentative track becomes an object after ``track_min_hits`` matched frames, so a detection in one frame never
  becomes one. It is then first compared with the lost objects (and those missed in this frame) of its group, and
  when one fits it *is* that one again (re-identification, as DeepSORT and BoT-SORT do with appearance): it was last
  seen before the new track began, near enough that it could have walked there in the time between (from where it
  was last seen, or where its speed was taking it, by :data:`REID_REACH` of its own height plus :data:`REID_SPEED`
  heights a second, for :data:`REID_TRAVEL_SECONDS` at most), of a similar size, and it looks alike
  (:func:`appearance.distance` of their signatures, averaged over their clear views, at most
  :data:`REID_MAX_DISTANCE`). Each lost object is given to at most one new track, the best fitting (one
  assignment). Otherwise the new track gets its own id (``first_id`` on).
  A track not matched for ``track_lost_seconds`` ends (a confirmed one waits the ``track_min_hits`` frames more
  that a track begun just in time needs to be confirmed): that is how long an object may be hidden and still be
  known again. One last seen going out of the picture, and a tentative one, end after :data:`PREDICT_SECONDS`:
  someone who left and came back in later is a new passer-by.

What is said of an object: the edge it came in through and went out through (its box touched the edge, or was
heading through it at the speed the filter knows, one frame's interval on), else :data:`IN_VIEW`; whether it moved
at all (its centre left a radius of half its smaller side around where it was first seen, for more than a couple of
frames: someone walking past a parked van hides part of it, which moves its box's centre, and that van must stay one
still object all day); a path of at most :data:`PATH_POINTS` points (Ramer-Douglas-Peucker: first, last, turning
points); whether a person rode something (:data:`RIDDEN`: a bicycle or a motorcycle whose box their legs were in,
going its way at its speed, in most frames both were seen and at least ``track_min_hits``: the person is ``riding``
it, it is ``ridden``, so a cyclist is one passer-by with a bicycle, not two); its best view (largest, most confident
box) with the colours seen there (:mod:`lucy.perception.appearance`) and a JPEG snapshot of the frame shrunk to
:data:`SNAPSHOT_SIDE` px with the box drawn; for a person, whether a face was seen (BlazeFace in the head of the
box, :mod:`lucy.perception.faces`) at one of its best views.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from lucy.config.settings import DetectSettings
from lucy.perception import appearance
from lucy.perception.faces import FaceDetector, shared_face_detector
from lucy.perception.objects import (
    EDGES,
    IN_VIEW,
    PERSON,
    REPORT_SECONDS,
    RIDDEN,
    RIDDEN_BY,
    RIDING,
    VEHICLES,
    Box,
    CountSample,
    Detection,
    PathPoint,
    TrackedObject,
)

GATE = 13.82  # chi-square, 2 degrees of freedom, 99.9%: squared Mahalanobis distance of centres that may match
GATE_IOU = 0.3  # ... or an overlap with the predicted box this large (a sudden stop or turn the filter missed)
MAX_AREA_RATIO = 4.0  # a box this many times larger or smaller than the predicted one is another object
EDGE_MARGIN = 0.01  # a box this close to an edge of the picture (fraction of it) touches the edge
STILL_RADIUS = 0.5  # share of a box's smaller side its centre may wander and the object still be still ...
STILL_MIN_RADIUS = 0.01  # ... and at least this share of the picture (detector jitter on tiny boxes)
EXCURSION_HITS = 3  # an object has moved once it is outside that radius for this many matched frames in a row
PATH_POINTS = 12  # most points of a path summary
PATH_TOLERANCE = 0.02  # a path summary leaves out points this close (fraction of the picture) to its line
_PATH_COMPACT = 256  # raw path points kept before they are simplified (a day-long track must not grow for ever)
_PATH_COMPACT_TOLERANCE = 0.005
SNAPSHOT_SIDE = 480  # long side of a snapshot (px)
SNAPSHOT_QUALITY = 80
BETTER_VIEW = 1.15  # a view replaces the best one when its quality (area x score) is this many times larger
UPDATE_SECONDS = REPORT_SECONDS  # an object in view is reported again after this much of its life (media seconds)
PREDICT_SECONDS = 2.0  # a track unseen for longer is lost: matched again only by re-identification
REID_REACH = 0.5  # a lost object is known again within this many of its heights of where it was or was heading ...
REID_SPEED = 1.0  # ... plus this many heights per second it was out of sight (a walk is ~0.8 heights a second) ...
REID_TRAVEL_SECONDS = 3.0  # ... for this long at most (one hidden longer is most likely behind what hid it)
REID_MAX_SIZE_RATIO = 1.6  # ... at a height this many times its own at most (it may have come closer) ...
REID_MAX_DISTANCE = 0.25  # ... and looking at least this much alike (signatures' distance, 0 to 1)
REID_HEADING_SECONDS = 2.0  # how far on its last speed is trusted to take a lost object
LOOK_WEIGHT = 0.3  # weight of the newest clear view in a track's signature (an average of its views)
CROWDED = 0.3  # a view is not clear when this share of its box is another detection's box too
# A rider and what they ride differ in speed by this many of the person's heights a second at most (the filter's
# estimates; a walk is ~0.8 heights a second, so a walker passing a parked bicycle does not ride it).
RIDE_SPEED_DIFFERENCE = 0.35
# A person's head is looked at for a face (a few ms) when its best view changes, at most once in this much media
# time: a walker coming closer improves their view every frame or two, and the face is seen or not in all of them.
FACE_SECONDS = 2.0

# Kalman noise, in the box's own width (x, w) and height (y, h) per second: what a detector's box jitters by, how
# fast an unknown object may be going when first seen (a person walks ~3 widths a second, a car ~2 lengths), and
# how quickly its velocity changes: 1 width / 0.5 height a second each second keeps someone turning a corner at a
# walk (tests/perception/test_track.py) and, on a simulated crowd of 50, halves the id swaps
# of 2 / 1, whose velocity the filter never came to trust.
_MEASURE_STD = np.array([0.05, 0.05, 0.1, 0.1])
_INITIAL_VELOCITY_STD = np.array([3.0, 1.5, 0.5, 0.5])
_ACCELERATION_STD = np.array([1.0, 0.5, 0.5, 0.5])
_MIN_SIZE = 0.002
_H = np.hstack([np.eye(4), np.zeros((4, 4))])  # the filter sees the box, not its velocity


def group_of(label: str) -> str:
    """The label group detections are associated within: "vehicle" for every label of :data:`VEHICLES`."""
    return "vehicle" if label in VEHICLES else label


def _box_state(box: Box) -> np.ndarray:
    x0, y0, x1, y1 = box
    return np.array([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0])


def _state_box(z: np.ndarray) -> Box:
    cx, cy, w, h = (float(v) for v in z[:4])
    w, h = max(w, _MIN_SIZE), max(h, _MIN_SIZE)
    return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2


def _scale(mean: np.ndarray) -> np.ndarray:
    w, h = max(float(mean[2]), _MIN_SIZE), max(float(mean[3]), _MIN_SIZE)
    return np.array([w, h, w, h])


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (N x 4) with every box of ``b`` (M x 4): N x M."""
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-12)


def simplify(points: Sequence[PathPoint], tolerance: float) -> list[PathPoint]:
    """Ramer-Douglas-Peucker over (x, y): the points that stray more than ``tolerance`` from the line through their
    neighbours kept, first and last always (a path that comes back to its start keeps its farthest point)."""
    if len(points) <= 2:
        return list(points)
    xy = np.array([(p.x, p.y) for p in points])
    keep = np.zeros(len(points), dtype=bool)
    keep[0] = keep[-1] = True
    stack = [(0, len(points) - 1)]
    while stack:
        first, last = stack.pop()
        if last - first < 2:
            continue
        a, b = xy[first], xy[last]
        inner = xy[first + 1:last]
        chord = b - a
        length = math.hypot(*chord)
        if length < 1e-9:
            dist = np.hypot(*(inner - a).T)
        else:
            dist = np.abs(chord[0] * (inner[:, 1] - a[1]) - chord[1] * (inner[:, 0] - a[0])) / length
        i = int(np.argmax(dist))
        if dist[i] > tolerance:
            keep[first + 1 + i] = True
            stack += [(first, first + 1 + i), (first + 1 + i, last)]
    return [p for p, k in zip(points, keep, strict=True) if k]


def _summary(points: Sequence[PathPoint]) -> tuple[PathPoint, ...]:
    tolerance = PATH_TOLERANCE
    out = simplify(points, tolerance)
    while len(out) > PATH_POINTS:
        tolerance *= 1.5
        out = simplify(out, tolerance)
    return tuple(out)


def _edge(box: Box, velocity: tuple[float, float], ahead: float, *, leaving: bool) -> str:
    """The edge an object went out through (``leaving``) or came in through, or :data:`IN_VIEW`: an edge its box
    touches, or one it crosses when moved ``ahead`` seconds on (back, when coming in) at ``velocity``; of several,
    the one it is heading through fastest."""
    vx, vy = velocity
    sign = 1.0 if leaving else -1.0
    x0, y0, x1, y1 = box
    dx, dy = sign * vx * ahead, sign * vy * ahead
    reach = {"left": -(x0 + dx), "right": x1 + dx - 1, "top": -(y0 + dy), "bottom": y1 + dy - 1}
    touched = {"left": x0, "right": 1 - x1, "top": y0, "bottom": 1 - y1}
    # how fast it heads out through each edge (leaving) or came in through it
    outward = {"left": -vx * sign, "right": vx * sign, "top": -vy * sign, "bottom": vy * sign}
    candidates = [e for e in EDGES if touched[e] <= EDGE_MARGIN or reach[e] >= -EDGE_MARGIN]
    if not candidates:
        return IN_VIEW
    return max(candidates, key=lambda e: (outward[e], -EDGES.index(e)))


_SERIAL = itertools.count()


@dataclass(eq=False)
class _Track:
    group: str
    mean: np.ndarray
    cov: np.ndarray
    first_seen: float
    last_seen: float
    first_box: Box
    last_box: Box
    score: float
    labels: Counter[str] = field(default_factory=Counter)
    hits: int = 1
    track_id: int | None = None  # given when confirmed
    entered: str = IN_VIEW
    anchor: tuple[float, float] = (0.0, 0.0)
    radius: float = STILL_MIN_RADIUS
    outside: int = 0  # matched frames in a row outside the still radius
    moved: bool = False
    points: list[PathPoint] = field(default_factory=list)
    best_quality: float = -1.0
    best_time: float = 0.0
    best_box: Box = (0.0, 0.0, 0.0, 0.0)
    attributes: dict[str, str] = field(default_factory=dict)
    view: np.ndarray | None = None  # the best frame, shrunk, without the box (shared by tracks seen in that frame)
    view_box: Box = (0.0, 0.0, 0.0, 0.0)
    snapshot: bytes | None = None  # encoded from view, when reported
    snapshot_stale: bool = False
    last_report: float = -math.inf
    matched: bool = True  # matched in the frame just tracked
    face: bool = False  # a face was found in the head of one of its best views (once seen, it stays seen)
    face_checked: float = -math.inf  # media time a best view was last looked at for a face
    look: np.ndarray | None = None  # its signature (appearance.signature), averaged over its clear views
    look_clear: bool = False  # look is of clear views (until there is one, of views crowded by others)
    serial: int = field(default_factory=lambda: next(_SERIAL))  # unique in the process (a key for other tracks)
    together: Counter[int] = field(default_factory=Counter)  # a person: frames riding each ride track (by serial)
    apart: Counter[int] = field(default_factory=Counter)  # ... and frames both were seen, not riding it
    ride: str | None = None  # a person: the label of what they rode; a ridden object: who rode it
    into: _Track | None = None  # a tentative track that was a lost object seen again: that object
    dropped: bool = False  # a tentative track forgotten (it never became an object)

    @property
    def label(self) -> str:
        return self.labels.most_common(1)[0][0]

    @property
    def velocity(self) -> tuple[float, float]:
        return float(self.mean[4]), float(self.mean[5])

    # ---------------------------------------------------------------------------------------------- Kalman

    def predict(self, dt: float) -> None:
        if dt <= 0:
            return
        f = np.eye(8)
        f[range(4), range(4, 8)] = dt
        q = (_ACCELERATION_STD * _scale(self.mean)) ** 2
        cov_q = np.zeros((8, 8))
        cov_q[range(4), range(4)] = q * dt**3 / 3
        cov_q[range(4), range(4, 8)] = cov_q[range(4, 8), range(4)] = q * dt**2 / 2
        cov_q[range(4, 8), range(4, 8)] = q * dt
        self.mean = f @ self.mean
        self.mean[2:4] = np.maximum(self.mean[2:4], _MIN_SIZE)
        self.cov = f @ self.cov @ f.T + cov_q

    def innovation(self) -> np.ndarray:
        """The covariance of the predicted centre as a detection would see it (2 x 2)."""
        return self.cov[:2, :2] + np.diag((_MEASURE_STD[:2] * _scale(self.mean)[:2]) ** 2)

    def correct(self, z: np.ndarray) -> None:
        r = np.diag((_MEASURE_STD * _scale(self.mean)) ** 2)
        s = _H @ self.cov @ _H.T + r
        gain = np.linalg.solve(s, _H @ self.cov).T
        self.mean = self.mean + gain @ (z - _H @ self.mean)
        self.mean[2:4] = np.maximum(self.mean[2:4], _MIN_SIZE)
        cov = (np.eye(8) - gain @ _H) @ self.cov
        self.cov = (cov + cov.T) / 2

    # ------------------------------------------------------------------------------------------- what it is

    def still_check(self, centre: tuple[float, float]) -> None:
        if self.moved:
            return
        if math.dist(centre, self.anchor) > self.radius:
            self.outside += 1
            self.moved = self.outside >= EXCURSION_HITS
        else:
            self.outside = 0


class Tracker:
    """Follows one stream's objects across its detected frames (see the module); not thread-safe (one per stream,
    fed by its detect stage). After :meth:`finish` (the end of a file, a live source's gap) it goes on with new
    tracks and ids."""

    def __init__(self, stream: str, settings: DetectSettings, first_id: int = 1, *,
                 update_seconds: float = UPDATE_SECONDS, faces: FaceDetector | None = None) -> None:
        """``faces`` looks for people's faces when ``settings.faces`` is on (default: the shipped BlazeFace, one
        session per process; :class:`~lucy.errors.ModelFileError` if its file is missing or damaged)."""
        if first_id < 1:
            raise ValueError(f"first_id must be at least 1, not {first_id}")
        self.stream = stream
        self.settings = settings
        self.next_id = first_id
        self.update_seconds = update_seconds
        self._faces = (faces or shared_face_detector()) if settings.faces else None
        self._tracks: list[_Track] = []
        self._time: float | None = None
        self._interval = 1.0 / settings.fps  # between detected frames, as measured
        self._counts = CountSample(0.0, {})
        # Each frame's tracks in view, confirmed or not yet: counted when every tentative one of them has become an
        # object or been forgotten (settled_counts).
        self._pending: deque[tuple[float, list[_Track]]] = deque()
        self._aspect = 16 / 9  # width / height of the pictures tracked (distances in pixels for re-identification)

    # ------------------------------------------------------------------------------------------------ API

    def update(self, time: float, detections: Sequence[Detection], frame: np.ndarray | None = None
               ) -> list[TrackedObject]:
        """Track one detected frame at media ``time`` (seconds; never earlier than the last): the objects that
        changed, as records — confirmed in this frame, reported again (every :data:`UPDATE_SECONDS` of an object's
        life in view) and ended (lost for ``track_lost_seconds``). ``frame`` (H x W x 3 uint8 RGB, what was
        detected on) gives the objects' colours and snapshots."""
        dt = self._advance(time, frame)
        out = self._expire(time)
        for track in self._tracks:
            track.predict(dt)
            track.matched = False
        dets = _clean(detections)
        crowded = _crowded(dets)
        pairs, high_left = self._match(dets, time)
        shrunk: list[np.ndarray | None] = [None]  # the frame shrunk for snapshots, made once if any track needs it
        confirming: list[_Track] = []
        for track, det in pairs:
            self._hit(track, det, time, frame, shrunk, clear=id(det) not in crowded)
            if track.track_id is None and track.hits >= self.settings.track_min_hits:
                confirming.append(track)
        newly = self._identify(confirming)
        for det in high_left:
            self._start(det, time, frame, shrunk, clear=id(det) not in crowded)
        self._pair_riders()
        out += [self._record(track, active=True) for track in self._tracks
                if track.track_id is not None and track.matched
                and (track in newly or time - track.last_report >= self.update_seconds)]
        self._counts = self._count(time)
        self._pending.append((time, [t for t in self._tracks if (t.track_id is None and t.matched) or self._shown(t)]))
        return out

    def counts(self, time: float | None = None) -> CountSample:
        """How many objects of each label were in view in the frame last tracked: the confirmed ones matched in it,
        and those missed in it alone (a detector misses a frame now and then) whose predicted centre is still in
        the picture."""
        return self._counts if time is None or time == self._counts.time else CountSample(time, self._counts.counts)

    def settled_counts(self) -> list[CountSample]:
        """The counts of the frames tracked so far whose objects are known, oldest first, each frame once: how many
        objects of each label were in view in each (as :meth:`counts` has it), those that were still tentative then
        included once they became objects (someone walking in is in view from their first frame, not from the
        frame that confirmed them), those that were forgotten left out (a false detection never counts). A frame
        waits for its tentative tracks (``track_min_hits`` frames, :data:`PREDICT_SECONDS` at most); after
        :meth:`finish`, every frame is settled."""
        out = []
        while self._pending:
            time, tracks = self._pending[0]
            objects = {id(o): o for o in (_object(t) for t in tracks) if o is not None}
            if any(o.track_id is None for o in objects.values()):
                break  # a track of that frame is still tentative
            self._pending.popleft()
            out.append(CountSample(time, dict(Counter(o.label for o in objects.values()))))
        return out

    def pending_since(self) -> float | None:
        """The time of the oldest frame whose counts are not settled yet (None: every one is)."""
        return self._pending[0][0] if self._pending else None

    def finish(self, time: float) -> list[TrackedObject]:
        """End every open track at media ``time`` (the end of a file, a gap in a live source): the records of the
        confirmed ones (tentative ones are forgotten). Tracking may go on after it, with new ids."""
        out = []
        for track in self._tracks:
            if track.track_id is None:
                track.dropped = True
            else:
                # seen in the last frame or so: still there when the picture ended, not gone out through an edge
                there = time - track.last_seen <= 1.5 * self._interval
                out.append(self._record(track, active=False, exited=IN_VIEW if there else None))
        self._tracks = []
        self._counts = CountSample(time, {})
        if self._time is not None and time > self._time:
            self._time = time
        return out

    @property
    def open_tracks(self) -> int:
        """Tracks being followed, tentative ones included."""
        return len(self._tracks)

    # --------------------------------------------------------------------------------------------- stages

    def _advance(self, time: float, frame: np.ndarray | None) -> float:
        """Refuse a frame out of order or of the wrong shape; move the clock to ``time``. The seconds it moved."""
        if not math.isfinite(time):
            raise ValueError(f"frame time must be a finite number of seconds, not {time}")
        if self._time is not None and time < self._time:
            raise ValueError(f"frame times must not go back: {time:.3f} s after {self._time:.3f} s")
        if frame is not None and (frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8):
            raise ValueError(f"frame must be H x W x 3 uint8, not {frame.shape} {frame.dtype}")
        if frame is not None and frame.shape[0] > 0:
            self._aspect = frame.shape[1] / frame.shape[0]
        if self._time is not None and time > self._time:
            # a pause in the frames (longer than a prediction is trusted) says nothing of the detect rate
            self._interval = 0.8 * self._interval + 0.2 * min(time - self._time, self.settings.track_lost_seconds,
                                                              PREDICT_SECONDS)
        dt = 0.0 if self._time is None else time - self._time
        self._time = time
        return dt

    def _match(self, dets: list[Detection], time: float) -> tuple[list[tuple[_Track, Detection]], list[Detection]]:
        """ByteTrack's two rounds: confident detections to the confirmed tracks, the weak ones to the confirmed
        tracks left, then the confident ones left to the tentative tracks. The pairs, and the confident detections
        no track took (each a new track)."""
        high = [d for d in dets if d.score >= self.settings.track_high_score]
        low = [d for d in dets if d.score < self.settings.track_high_score]
        # lost ones (unseen for longer than the prediction is trusted) only by re-identification, in _identify
        confirmed = [t for t in self._tracks if t.track_id is not None and time - t.last_seen <= PREDICT_SECONDS]
        tentative = [t for t in self._tracks if t.track_id is None]
        pairs, confirmed_left, high_left = self._associate(confirmed, high)
        more, _, _ = self._associate(confirmed_left, low)
        pairs += more
        more, _, high_left = self._associate(tentative, high_left)
        return pairs + more, high_left

    def _expire(self, time: float) -> list[TrackedObject]:
        lost = self.settings.track_lost_seconds
        out, kept = [], []
        # A lost object waits, beyond the lost time, for a track begun within it to be confirmed (and so be it); one
        # that went out of the picture, and a tentative track, only as long as their prediction is trusted.
        wait = lost + self.settings.track_min_hits * self._interval
        short = min(lost, PREDICT_SECONDS)
        for track in self._tracks:
            if time - track.last_seen > (wait if track.track_id is not None and not self._gone(track) else short):
                if track.track_id is not None:
                    out.append(self._record(track, active=False))
                else:
                    track.dropped = True
            else:
                kept.append(track)
        self._tracks = kept
        return out

    def _gone(self, track: _Track) -> bool:
        """Whether a moving object was last seen going out of the picture (at an edge, or heading through one)."""
        return track.moved and _edge(track.last_box, track.velocity, self._interval, leaving=True) != IN_VIEW

    def _associate(self, tracks: list[_Track], dets: list[Detection]
                   ) -> tuple[list[tuple[_Track, Detection]], list[_Track], list[Detection]]:
        """One stage: the cheapest one-to-one matches within the gate; the tracks and detections left over."""
        if not tracks or not dets:
            return [], tracks, dets
        predicted = np.array([_state_box(t.mean) for t in tracks])
        boxes = np.array([d.box for d in dets])
        overlap = _iou(predicted, boxes)
        centres = np.array([d.centre for d in dets])
        diff = centres[None, :, :] - np.array([t.mean[:2] for t in tracks])[:, None, :]  # T x D x 2
        inverse = np.linalg.inv(np.array([t.innovation() for t in tracks]))  # T x 2 x 2
        mahalanobis = np.einsum("tdi,tij,tdj->td", diff, inverse, diff)
        area_p = (predicted[:, 2] - predicted[:, 0]) * (predicted[:, 3] - predicted[:, 1])
        area_d = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        ratio = area_d[None, :] / np.maximum(area_p[:, None], 1e-12)
        same = np.array([[t.group == group_of(d.label) for d in dets] for t in tracks])
        feasible = (same & (ratio <= MAX_AREA_RATIO) & (ratio >= 1 / MAX_AREA_RATIO)
                    & ((mahalanobis <= GATE) | (overlap >= GATE_IOU)))
        cost = np.where(feasible, 1.0 - overlap + np.minimum(mahalanobis, GATE) / GATE, 1e6)
        rows, cols = linear_sum_assignment(cost)
        pairs = [(tracks[r], dets[c]) for r, c in zip(rows, cols, strict=True) if feasible[r, c]]
        used_t = {id(t) for t, _ in pairs}
        used_d = {id(d) for _, d in pairs}
        return pairs, [t for t in tracks if id(t) not in used_t], [d for d in dets if id(d) not in used_d]

    def _identify(self, confirming: list[_Track]) -> list[_Track]:
        """Tentative tracks that have been matched often enough become objects: a lost one they are (see the
        module: one assignment, cheapest first), or new ones. The tracks to report as confirmed or found again."""
        if not confirming:
            return []
        lost = [t for t in self._tracks if t.track_id is not None and not t.matched and t.look is not None]
        found: dict[int, _Track] = {}  # id(new track) -> the lost track it is
        if lost:
            cost = np.array([[self._reid_cost(old, new) for old in lost] for new in confirming])
            rows, cols = linear_sum_assignment(np.where(np.isfinite(cost), cost, 1e6))
            for r, c in zip(rows, cols, strict=True):
                if math.isfinite(cost[r, c]):
                    found[id(confirming[r])] = lost[c]
        out = []
        for track in confirming:
            old = found.get(id(track))
            if old is None:
                self._confirm(track)
                out.append(track)
            else:
                self._absorb(old, track)
                out.append(old)
        return out

    def _pair_riders(self) -> None:
        """Count, for each person and each bicycle or motorcycle seen in this frame, whether the person is on it (as
        :func:`_riding` has it, and moving with it); pair them once they were together in ``track_min_hits`` frames
        and in twice as many as apart."""
        seen = [t for t in self._tracks if t.track_id is not None and t.matched]
        rides = [t for t in seen if t.label in RIDDEN and t.ride is None]
        if not rides:
            return
        for person in (t for t in seen if t.group == PERSON and t.ride is None):
            height = max(person.last_box[3] - person.last_box[1], _MIN_SIZE)
            for ride in rides:
                # going the same way at the same speed (a walker passing a parked bicycle is over it for a while)
                dvx, dvy = (a - b for a, b in zip(person.velocity, ride.velocity, strict=True))
                along = math.hypot(dvx * self._aspect, dvy) <= RIDE_SPEED_DIFFERENCE * height
                if along and _riding(person.last_box, ride.last_box):
                    person.together[ride.serial] += 1
                elif ride.serial in person.together:
                    person.apart[ride.serial] += 1
            best = max((r for r in rides if r.ride is None), default=None, key=lambda r: person.together[r.serial])
            if best is None:
                continue
            n = person.together[best.serial]
            if n >= self.settings.track_min_hits and n >= 2 * person.apart[best.serial]:
                person.ride, best.ride = best.label, PERSON

    def _reid_cost(self, old: _Track, new: _Track) -> float:
        """How well new track ``new`` fits lost object ``old`` (see the module), lower is better; inf: it cannot be
        that object."""
        if old.group != new.group or old.look is None or new.look is None or not new.points:
            return math.inf
        gap = new.first_seen - old.last_seen
        if not 0 < gap <= self.settings.track_lost_seconds:  # seen at the same time: another object
            return math.inf
        height = max(old.last_box[3] - old.last_box[1], _MIN_SIZE)
        size = (new.first_box[3] - new.first_box[1]) / height
        if not 1 / REID_MAX_SIZE_RATIO <= size <= REID_MAX_SIZE_RATIO:
            return math.inf
        looks = appearance.distance(old.look, new.look)
        if looks > REID_MAX_DISTANCE:
            return math.inf
        # from where it was last seen, or anywhere on the way its last speed was taking it; in picture heights
        x0, y0, x1, y1 = old.last_box
        scale = np.array([self._aspect, 1.0])
        a = np.array([(x0 + x1) / 2, (y0 + y1) / 2]) * scale
        b = a + np.array(old.velocity) * scale * min(gap, REID_HEADING_SECONDS)
        p = np.array([new.points[0].x, new.points[0].y]) * scale
        along = b - a
        share = float(np.clip(np.dot(p - a, along) / max(float(np.dot(along, along)), 1e-12), 0.0, 1.0))
        off = float(np.linalg.norm(p - (a + share * along)))
        reach = height * (REID_REACH + REID_SPEED * min(gap, REID_TRAVEL_SECONDS))
        if off > reach:
            return math.inf
        return looks / REID_MAX_DISTANCE + off / reach

    def _absorb(self, old: _Track, new: _Track) -> None:
        """Lost object ``old`` was seen again as tentative track ``new``: ``old`` goes on from ``new``'s state and
        views, and ``new`` is no more."""
        old.mean, old.cov = new.mean, new.cov
        old.last_seen, old.last_box, old.matched = new.last_seen, new.last_box, new.matched
        old.hits += new.hits
        old.score = max(old.score, new.score)
        old.labels.update(new.labels)
        for p in new.points:
            old.points.append(p)
            old.still_check((p.x, p.y))
        if len(old.points) > _PATH_COMPACT:
            old.points = simplify(old.points, _PATH_COMPACT_TOLERANCE)
            if len(old.points) > _PATH_COMPACT // 2:
                old.points = list(_summary(old.points))
        if new.look is not None and old.look is not None:
            if new.look_clear == old.look_clear:
                old.look = (1 - LOOK_WEIGHT) * old.look + LOOK_WEIGHT * new.look
            elif new.look_clear:
                old.look, old.look_clear = new.look, True
        if new.best_quality >= old.best_quality * BETTER_VIEW:
            old.best_quality, old.best_time, old.best_box = new.best_quality, new.best_time, new.best_box
            old.attributes = new.attributes
            if new.view is not None:
                old.view, old.view_box, old.snapshot_stale = new.view, new.view_box, True
        new.into = old
        old.face = old.face or new.face
        old.together.update(new.together)
        old.apart.update(new.apart)
        old.face_checked = max(old.face_checked, new.face_checked)
        self._tracks.remove(new)

    def _start(self, det: Detection, time: float, frame: np.ndarray | None, shrunk: list, *, clear: bool) -> None:
        z = _box_state(det.box)
        scale = _scale(z)
        cov = np.diag(np.concatenate([(2 * _MEASURE_STD * scale) ** 2, (_INITIAL_VELOCITY_STD * scale) ** 2]))
        track = _Track(group=group_of(det.label), mean=np.concatenate([z, np.zeros(4)]), cov=cov, first_seen=time,
                       last_seen=time, first_box=det.box, last_box=det.box, score=det.score)
        track.labels[det.label] += det.score
        track.points.append(PathPoint(time, *det.centre))
        self._view(track, det, time, frame, shrunk)
        _see(track, det, frame, clear=clear)
        self._tracks.append(track)

    def _hit(self, track: _Track, det: Detection, time: float, frame: np.ndarray | None, shrunk: list, *,
             clear: bool) -> None:
        track.correct(_box_state(det.box))
        track.matched = True
        track.hits += 1
        track.last_seen = time
        track.last_box = det.box
        track.score = max(track.score, det.score)
        track.labels[det.label] += det.score
        track.points.append(PathPoint(time, *det.centre))
        if len(track.points) > _PATH_COMPACT:
            track.points = simplify(track.points, _PATH_COMPACT_TOLERANCE)
            if len(track.points) > _PATH_COMPACT // 2:  # a path that winds a lot: keep its shape, not every point
                track.points = list(_summary(track.points))
        if track.track_id is not None:
            track.still_check(det.centre)
        self._view(track, det, time, frame, shrunk)
        _see(track, det, frame, clear=clear)

    def _confirm(self, track: _Track) -> None:
        track.track_id = self.next_id
        self.next_id += 1
        # where it was first seen and how far it may wander from there and still be still
        first = track.points[: self.settings.track_min_hits]
        track.anchor = (first[0].x, first[0].y)
        x0, y0, x1, y1 = track.first_box
        track.radius = max(STILL_MIN_RADIUS, STILL_RADIUS * min(x1 - x0, y1 - y0))
        for p in first:
            track.still_check((p.x, p.y))
        # the filter knows its speed by now: where it came from, one frame's interval before it was first seen
        track.entered = _edge(track.first_box, track.velocity, self._interval, leaving=False)

    def _view(self, track: _Track, det: Detection, time: float, frame: np.ndarray | None, shrunk: list) -> None:
        """Keep this view as the object's best if it is clearly better (larger and more confident)."""
        quality = det.area * det.score
        if quality < track.best_quality * BETTER_VIEW:
            return
        track.best_quality, track.best_time, track.best_box = quality, time, det.box
        if frame is None:
            return
        track.attributes = appearance.describe(frame, det.label, det.box)
        if (self._faces is not None and det.label == PERSON and not track.face
                and time - track.face_checked >= FACE_SECONDS):
            track.face_checked = time
            track.face = bool(self._faces.in_head(frame, det.box))
        if self.settings.snapshots:
            if shrunk[0] is None:
                shrunk[0] = _shrink(frame)
            track.view, track.view_box, track.snapshot_stale = shrunk[0], det.box, True

    # -------------------------------------------------------------------------------------------- records

    def _record(self, track: _Track, *, active: bool, exited: str | None = None) -> TrackedObject:
        assert track.track_id is not None
        track.last_report = track.last_seen
        if track.snapshot_stale and track.view is not None:
            track.snapshot, track.snapshot_stale = _encode(track.view, track.view_box), False
            if not active:
                track.view = None
        if active:
            exited = None
        elif not track.moved:
            exited = IN_VIEW
        elif exited is None:
            exited = _edge(track.last_box, track.velocity, self._interval, leaving=True)
        return TrackedObject(
            stream=self.stream, track_id=track.track_id, label=track.label, first_seen=track.first_seen,
            last_seen=track.last_seen, score=round(track.score, 4),
            entered=track.entered if track.moved else IN_VIEW, exited=exited, moving=track.moved,
            path=_summary(track.points), attributes=_attributes(track), best_time=track.best_time,
            best_box=track.best_box, snapshot=track.snapshot, active=active)

    def _shown(self, track: _Track) -> bool:
        """Whether a confirmed object counts as in view in the frame just tracked: matched in it, or missed in it
        alone (a detector misses a frame now and then) with its predicted centre still in the picture."""
        if track.track_id is None or self._time is None:
            return False
        inside = 0 <= track.mean[0] <= 1 and 0 <= track.mean[1] <= 1
        return track.matched or (inside and self._time - track.last_seen <= 1.5 * self._interval)

    def _count(self, time: float) -> CountSample:
        return CountSample(time, dict(Counter(t.label for t in self._tracks if self._shown(t))))


def _attributes(track: _Track) -> dict[str, str]:
    """What its best view looked like, ``face: seen`` once a face was found at one of its best views, and
    ``riding: <label>`` for a person on a bicycle or motorcycle / ``ridden: person`` for what they rode."""
    out = dict(track.attributes)
    if track.face:
        out["face"] = "seen"
    if track.ride is not None:
        out[RIDING if track.group == PERSON else RIDDEN_BY] = track.ride
    return out


def _object(track: _Track) -> _Track | None:
    """The object a track of a past frame turned out to be: itself once confirmed, the lost object it was seen
    again as, None if it was forgotten; itself while still tentative (track_id None: not known yet)."""
    if track.into is not None:
        return track.into
    return None if track.dropped else track


def _clean(detections: Sequence[Detection]) -> list[Detection]:
    """The detections a tracker can use: finite scores, boxes clipped to the picture with some area left."""
    out = []
    for d in detections:
        if not math.isfinite(d.score) or not all(math.isfinite(v) for v in d.box):
            continue
        x0, y0, x1, y1 = (min(1.0, max(0.0, v)) for v in d.box)
        if x1 - x0 < _MIN_SIZE or y1 - y0 < _MIN_SIZE:
            continue
        out.append(d if (x0, y0, x1, y1) == d.box else Detection(d.label, (x0, y0, x1, y1), d.score))
    return out


def _riding(person: Box, ride: Box) -> bool:
    """Whether a person's box sits on a bicycle's or motorcycle's as a rider's does: above it, over it (half the
    narrower of the two), with the legs reaching down into it, and of sizes that go together."""
    px0, py0, px1, py1 = person
    rx0, ry0, rx1, ry1 = ride
    ph, rh = py1 - py0, ry1 - ry0
    over = min(px1, rx1) - max(px0, rx0)
    return (over >= 0.5 * min(px1 - px0, rx1 - rx0) and py0 < ry0 and ry0 + 0.3 * rh <= py1 <= ry1 + 0.25 * rh
            and 0.2 * ph <= rh <= 1.2 * ph)


def _crowded(dets: Sequence[Detection]) -> set[int]:
    """The ids of the detections whose box is shared with another's by :data:`CROWDED` of its area or more: their
    pixels are partly someone else's."""
    if len(dets) < 2:
        return set()
    boxes = np.array([d.box for d in dets])
    ix = np.clip(np.minimum(boxes[:, None, 2], boxes[None, :, 2]) - np.maximum(boxes[:, None, 0], boxes[None, :, 0]),
                 0, None)
    iy = np.clip(np.minimum(boxes[:, None, 3], boxes[None, :, 3]) - np.maximum(boxes[:, None, 1], boxes[None, :, 1]),
                 0, None)
    shared = ix * iy
    np.fill_diagonal(shared, 0.0)
    area = np.maximum((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]), 1e-12)
    return {id(dets[i]) for i in np.flatnonzero(shared.max(axis=1) / area >= CROWDED)}


def _see(track: _Track, det: Detection, frame: np.ndarray | None, *, clear: bool) -> None:
    """Add this view to the track's signature: a clear one to the average of its clear views; a crowded one only
    while it has no clear one (something to know it by is better than nothing)."""
    if frame is None or (track.look_clear and not clear):
        return
    sig = appearance.signature(frame, det.label, det.box)
    if sig is None:
        return
    if track.look is None or (clear and not track.look_clear):
        track.look, track.look_clear = sig, clear
    else:
        track.look = (1 - LOOK_WEIGHT) * track.look + LOOK_WEIGHT * sig


def _shrink(frame: np.ndarray) -> np.ndarray:
    height, width = frame.shape[:2]
    scale = SNAPSHOT_SIDE / max(height, width)
    if scale >= 1:
        return frame.copy()
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(frame, size, interpolation=cv2.INTER_LINEAR)  # INTER_AREA costs ~8 ms a 1080p frame


def _encode(view: np.ndarray, box: Box) -> bytes | None:
    """A JPEG of ``view`` (RGB) with ``box`` drawn."""
    height, width = view.shape[:2]
    picture = cv2.cvtColor(view, cv2.COLOR_RGB2BGR)
    x0, y0, x1, y1 = box
    thickness = max(1, round(max(height, width) / 240))
    cv2.rectangle(picture, (round(x0 * width), round(y0 * height)), (round(x1 * width), round(y1 * height)),
                  (0, 255, 0), thickness)
    ok, data = cv2.imencode(".jpg", picture, [cv2.IMWRITE_JPEG_QUALITY, SNAPSHOT_QUALITY])
    return data.tobytes() if ok else None
