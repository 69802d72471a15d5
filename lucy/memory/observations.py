"""How the SQL memory stores keep what the detect stage observed (:mod:`lucy.perception.objects`): the checks and
clean-up every write goes through, the columns both stores read, and the records made from a row of them.

A track is one row of ``object_tracks`` (key: stream and track id), its path and attributes JSON, its best box four
numbers and its snapshot a blob that only :meth:`object_track` reads (it can be tens of kilobytes; a list of a day's
tracks must not carry them). Counts are one row per detected frame of ``object_counts`` (key: stream and time) with
the frame's counts as one JSON object: "the counts in [start, end)" is one range of the key, "the most people in
view" one aggregate over that range, and a frame in which nothing was seen is still a row (``{}``), so "0-3 people"
can be told from "not observed". SQLite and PostgreSQL share all of this; only their SQL differs
(:mod:`lucy.memory.sqlite_observations`, :mod:`lucy.memory.postgres_observations`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from lucy.perception.objects import VEHICLES, CountSample, Observations, PathPoint, TrackedObject
from lucy.untrusted import strip_nul

VEHICLE = "vehicle"  # the label filter that keeps every one of VEHICLES, as memory names them in one word

# Read in this order by every track query; the snapshot is read apart (object_track only).
TRACK_COLUMNS = ("stream, track_id, label, first_seen, last_seen, score, entered, exited, moving, path, attributes, "
                 "best_time, best_x0, best_y0, best_x1, best_y1, active")
TRACK_INSERT_COLUMNS = f"{TRACK_COLUMNS}, snapshot"
TRACK_LIST_COLUMNS = f"{TRACK_COLUMNS}, snapshot IS NOT NULL"  # a list says whether there is one, without its bytes
MAX_TRACK_ID = 2**63 - 1  # a 64-bit signed integer in every backend (as MemoryStore's ids)


def track_upsert(placeholder: str, json_placeholder: str | None = None) -> str:
    """The statement that inserts a track or replaces the stored one of its (stream, id), keeping the stored snapshot
    when the new record has none; ``placeholder`` is the driver's parameter mark (``?`` or ``%s``), and
    ``json_placeholder`` the one of the JSON columns (PostgreSQL's ``%s::jsonb``). Both engines read it alike
    (``ON CONFLICT ... DO UPDATE``, ``excluded``)."""
    columns = [c.strip() for c in TRACK_INSERT_COLUMNS.split(",")]
    marks = [(json_placeholder or placeholder) if c in ("path", "attributes") else placeholder for c in columns]
    updated = [f"{c} = excluded.{c}" for c in columns if c not in ("stream", "track_id", "snapshot")]
    return (f"INSERT INTO object_tracks ({TRACK_INSERT_COLUMNS}) VALUES ({', '.join(marks)}) "
            f"ON CONFLICT (stream, track_id) DO UPDATE SET {', '.join(updated)}, "
            f"snapshot = coalesce(excluded.snapshot, object_tracks.snapshot)")


def labels_for(label: str) -> list[str]:
    """The stored labels a label filter keeps: ``"vehicle"`` is each of :data:`VEHICLES`, any other label itself."""
    return sorted(VEHICLES) if label == VEHICLE else [label]


def _finite(value: float, what: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, not {value!r}")
    return number


def _text(value: str) -> str:
    return strip_nul(str(value))


def _clean_track(stream: str, track: TrackedObject) -> TrackedObject:
    if track.stream != stream:
        raise ValueError(f"track {track.track_id} is of stream {track.stream!r}, not {stream!r}")
    if not 1 <= int(track.track_id) <= MAX_TRACK_ID:
        raise ValueError(f"track id {track.track_id} is out of range (1 to {MAX_TRACK_ID})")
    first, last = _finite(track.first_seen, "first_seen"), _finite(track.last_seen, "last_seen")
    if last < first:
        raise ValueError(f"track {track.track_id} was last seen ({last}) before it was first seen ({first})")
    label = _text(track.label)
    if not label:
        raise ValueError(f"track {track.track_id} has no label")
    path = tuple(PathPoint(_finite(p.time, "a path time"), _finite(p.x, "a path x"), _finite(p.y, "a path y"))
                 for p in track.path)
    box = tuple(_finite(v, "best_box") for v in track.best_box)
    if len(box) != 4:
        raise ValueError(f"track {track.track_id}: best_box needs 4 numbers, not {len(box)}")
    return replace(track, track_id=int(track.track_id), label=label, first_seen=first, last_seen=last,
                   score=_finite(track.score, "score"), entered=_text(track.entered),
                   exited=None if track.exited is None else _text(track.exited), path=path,
                   attributes={_text(k): _text(v) for k, v in track.attributes.items()},
                   best_time=_finite(track.best_time, "best_time"), best_box=box,  # type: ignore[arg-type]
                   snapshot=bytes(track.snapshot) if track.snapshot else None)


def _clean_counts(sample: CountSample) -> CountSample:
    counts: dict[str, int] = {}
    for label, count in sample.counts.items():
        if int(count) < 0:
            raise ValueError(f"a count of {label!r} at {sample.time} is negative ({count})")
        if int(count) > 0:  # labels with 0 are left out, as the records say
            counts[_text(label)] = counts.get(_text(label), 0) + int(count)
    return CountSample(time=_finite(sample.time, "a count's time"), counts=counts)


def clean_observations(observations: Observations) -> Observations:
    """``observations`` as they are stored: NUL taken out of every text (as the store does for all text), labels of
    0 left out of the counts, one record per track id (the last given wins) and per count time. Raises ValueError,
    before anything is written, for what cannot be stored: a track of another stream, one last seen before it was
    first seen, an id out of range, an empty label, a time or score that is not a finite number, a negative count."""
    stream = observations.stream
    tracks = {t.track_id: t for t in (_clean_track(stream, t) for t in observations.tracks)}
    counts = {c.time: c for c in (_clean_counts(c) for c in observations.counts)}
    return Observations(stream=stream, until=_finite(observations.until, "until"),
                        counts=[counts[t] for t in sorted(counts)], tracks=[tracks[i] for i in sorted(tracks)])


def track_values(track: TrackedObject) -> tuple[Any, ...]:
    """The values of :data:`TRACK_INSERT_COLUMNS` for a track (cleaned by :func:`clean_observations`)."""
    path = json.dumps([[p.time, p.x, p.y] for p in track.path], allow_nan=False)
    attributes = json.dumps(dict(track.attributes), allow_nan=False, sort_keys=True)
    x0, y0, x1, y1 = track.best_box
    return (track.stream, track.track_id, track.label, track.first_seen, track.last_seen, track.score,
            track.entered, track.exited, bool(track.moving), path, attributes, track.best_time, x0, y0, x1, y1,
            bool(track.active), track.snapshot)


def counts_json(sample: CountSample) -> str:
    """A sample's counts as stored (one JSON object, labels sorted)."""
    return json.dumps(dict(sample.counts), sort_keys=True)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value  # PostgreSQL's jsonb comes parsed


def track_of(row: Sequence[Any], snapshot: bytes | None = None) -> TrackedObject:
    """A track from a row of :data:`TRACK_COLUMNS` (with ``snapshot`` when it was read), or of
    :data:`TRACK_LIST_COLUMNS`."""
    (stream, track_id, label, first_seen, last_seen, score, entered, exited, moving, path, attributes, best_time,
     x0, y0, x1, y1, active) = row[:17]
    return TrackedObject(
        stream=stream, track_id=int(track_id), label=label, first_seen=float(first_seen), last_seen=float(last_seen),
        score=float(score), entered=entered, exited=exited, moving=bool(moving),
        path=tuple(PathPoint(float(t), float(x), float(y)) for t, x, y in _json(path)),
        attributes=dict(_json(attributes)), best_time=float(best_time),
        best_box=(float(x0), float(y0), float(x1), float(y1)),
        snapshot=None if snapshot is None else bytes(snapshot), active=bool(active),
        snapshot_stored=snapshot is None and len(row) > 17 and bool(row[17]))


def counts_of(time: float, counts: str | Mapping[str, int]) -> CountSample:
    """A count sample from a row's time and counts (JSON text, or PostgreSQL's parsed jsonb)."""
    return CountSample(time=float(time), counts={str(k): int(v) for k, v in _json(counts).items()})
