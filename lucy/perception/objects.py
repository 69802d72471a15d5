"""What the detect stage sees, as records: detections in one frame, tracked objects over time, counts in view.

These are the boundary between the parts that make observations and those that keep and read them, after
Frigate's detect → track → events: a :class:`Detector` turns one full-resolution frame into :class:`Detection` s,
the tracker (:mod:`lucy.perception.track`) turns detections over time into :class:`TrackedObject` s, and an
:class:`ObservationStore` (the memory store of a data directory, SQLite or PostgreSQL) keeps the tracks and the
per-frame counts with the stream, where the captioners, the API and standing questions read them.

Boxes are fractions of the frame (x0, y0, x1, y1), so they mean the same at every resolution a frame is stored or
detected at. Labels are COCO's names ("person", "car", "truck", "bicycle", "dog", ...) whatever the detector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 as fractions of the frame

PERSON = "person"
# Vehicles share one non-maximum suppression (a van comes out as car and truck at once) and one word in memory.
VEHICLES = frozenset({"car", "truck", "bus", "motorcycle", "train", "boat", "airplane"})
ANIMALS = frozenset({"bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe"})

# A person riding one of these is one passer-by with it: the tracker marks the person ``riding`` (the label) and what
# they rode ``ridden`` (by "person") in their attributes.
RIDDEN = frozenset({"bicycle", "motorcycle"})
RIDING, RIDDEN_BY = "riding", "ridden"

# An object in view has its record written again after this much of its life (media seconds): an open record's
# last_seen is at most this (and a frame) old while the tracker still sees it.
REPORT_SECONDS = 5.0

EDGES = ("left", "right", "top", "bottom")
IN_VIEW = "in view"  # where an object was when it was first or last seen, if not at an edge of the picture


@dataclass(frozen=True, slots=True)
class Detection:
    """One object a detector found in one frame."""

    label: str
    box: Box
    score: float

    @property
    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.box
        return (x0 + x1) / 2, (y0 + y1) / 2

    @property
    def area(self) -> float:
        x0, y0, x1, y1 = self.box
        return max(0.0, x1 - x0) * max(0.0, y1 - y0)


@runtime_checkable
class Detector(Protocol):
    """A detector backend (:func:`lucy.perception.detect.open_detector` picks one from settings)."""

    name: str
    labels: frozenset[str]  # what it can name at all: "nothing seen" means something only for these

    def detect(self, frame: np.ndarray) -> list[Detection]:
        """Objects in one frame: ``frame`` is H x W x 3 uint8 RGB at the resolution it was decoded at."""
        ...


@dataclass(frozen=True, slots=True)
class PathPoint:
    time: float
    x: float  # centre of the box, fractions of the frame
    y: float


@dataclass(frozen=True)
class TrackedObject:
    """One object followed over time: a person who walked through, a van parked all day (one object, not thousands).

    ``track_id`` is unique within its stream, across runs (a resumed ingest goes on from the highest id stored).
    ``entered`` / ``exited`` are an edge of the picture (:data:`EDGES`) or :data:`IN_VIEW` (there when first seen,
    or still there / lost in the middle of the picture when last seen); ``exited`` is None while the object is
    still tracked (``active``). ``attributes`` holds what a person would say of it: ``colour`` (a vehicle's),
    ``upper`` / ``lower`` (a person's clothes), ``face`` ("seen" or absent). ``snapshot`` is a JPEG of the best
    frame (largest, most confident view) with the object's box drawn, or None.
    """

    stream: str
    track_id: int
    label: str
    first_seen: float
    last_seen: float
    score: float  # the detector's best score for it
    entered: str
    exited: str | None
    moving: bool  # False: it stayed in (about) one place for all its life
    path: tuple[PathPoint, ...] = ()  # a summary of where it went (a few points, first and last included)
    attributes: Mapping[str, str] = field(default_factory=dict)
    best_time: float = 0.0
    best_box: Box = (0.0, 0.0, 0.0, 0.0)
    snapshot: bytes | None = None
    active: bool = False
    snapshot_stored: bool = False  # in a list of stored tracks (which leaves snapshots' bytes out): it has one

    @property
    def has_snapshot(self) -> bool:
        return self.snapshot is not None or self.snapshot_stored

    @property
    def dwell(self) -> float:
        return self.last_seen - self.first_seen


@dataclass(frozen=True, slots=True)
class CountSample:
    """How many objects of each label were in view in one detected frame (labels with 0 left out)."""

    time: float
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Observations:
    """What one detect pass over [start, until) of a stream produced: the counts of each detected frame and the
    tracks that changed (new, updated or ended). Written together, so a reader never sees counts without tracks."""

    stream: str
    until: float  # media time up to which the stream has been observed
    counts: Sequence[CountSample] = ()
    tracks: Sequence[TrackedObject] = ()


@runtime_checkable
class ObservationStore(Protocol):
    """Where observations are kept and read (the memory store implements it for SQLite and PostgreSQL)."""

    def record_observations(self, observations: Observations) -> None:
        """Add the counts, insert or replace the tracks (by stream and id) and move the stream's observed-until
        mark, in one transaction."""
        ...

    def observed_until(self, stream: str) -> float | None:
        """Media time up to which the stream's frames have been through the detect stage; None if never."""
        ...

    def next_track_id(self, stream: str) -> int:
        """One more than the highest track id stored for the stream (1 for a new stream)."""
        ...

    def object_tracks(self, stream: str, *, label: str | None = None, start: float | None = None,
                      end: float | None = None, limit: int = 1000) -> list[TrackedObject]:
        """Tracks of the stream seen at any time in [start, end) (overlapping it), oldest first, without their
        snapshots; ``label`` keeps one label (``"vehicle"`` keeps every one of :data:`VEHICLES`)."""
        ...

    def object_track(self, stream: str, track_id: int) -> TrackedObject | None:
        """One track with its snapshot, or None."""
        ...

    def object_counts(self, stream: str, start: float, end: float) -> list[CountSample]:
        """The count samples of detected frames in [start, end), oldest first."""
        ...
