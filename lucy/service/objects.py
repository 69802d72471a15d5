"""Tracked objects as events (after Frigate's ``/api/events``): one JSON shape for a tracked object, shared by the
objects routes, ``lucy objects --json`` and the MQTT bridge, and the pages the routes show.

A track is an event: one per object followed over time (a person who walked through, a van parked all day), with
its times, where it entered and left the picture, its attributes and a snapshot of its best frame. The shape is
made here once, so the API, the command line and MQTT never disagree on a field.

The page functions block (memory store I/O): call them in a worker thread.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from lucy.ingest.clips import clip_url
from lucy.perception.objects import ObservationStore, TrackedObject

MAX_OBJECTS = 5000
# A tracked object's clip: its whole life, or the first minute of one that stayed longer (a van parked all day is
# seen arriving), well within the clip route's longest clip (recording.max_clip_seconds, 300 s by default).
OBJECT_CLIP_SECONDS = 60.0
# A label as the API takes it: COCO's names are lower-case words ("person", "sports ball", "cell phone"), and
# "vehicle" stands for every vehicle class.
LABEL = re.compile(r"^[a-z][a-z ]{0,39}$")
VEHICLE = "vehicle"


def snapshot_url(stream: str, track_id: int) -> str:
    """The snapshot route of a track (relative to the server; GET it with the API token)."""
    return f"/v1/streams/{quote(stream, safe='')}/objects/{track_id}/snapshot.jpg"


def object_json(track: TrackedObject) -> dict[str, Any]:
    """A tracked object as the API, ``lucy objects --json`` and MQTT show it. Times are media seconds, rounded to
    milliseconds; ``path`` points and ``best_box`` are fractions of the frame."""
    return {
        "id": track.track_id, "stream": track.stream, "label": track.label,
        "first_seen": round(track.first_seen, 3), "last_seen": round(track.last_seen, 3),
        "dwell": round(track.dwell, 3), "entered": track.entered, "exited": track.exited, "moving": track.moving,
        "attributes": dict(track.attributes), "score": round(track.score, 4),
        "path": [{"time": round(p.time, 3), "x": round(p.x, 4), "y": round(p.y, 4)} for p in track.path],
        "best_time": round(track.best_time, 3), "best_box": [round(v, 4) for v in track.best_box],
        "active": track.active,
        "snapshot_url": snapshot_url(track.stream, track.track_id) if track.has_snapshot else None,
        "clip_url": clip_url(track.stream, track.first_seen,
                             min(track.last_seen, track.first_seen + OBJECT_CLIP_SECONDS)),
    }


def check_label(label: str | None) -> str | None:
    """``label`` as the store filters by it (lower case, single spaces), or None for every label; a ValueError
    for one that cannot be a label."""
    if label is None:
        return None
    wanted = " ".join(label.split()).lower()
    if not LABEL.match(wanted):
        raise ValueError(f"not a label: {label[:60]!r} (COCO's names, e.g. person, car, dog, or {VEHICLE} for any "
                         "vehicle)")
    return wanted


def objects_page(store: ObservationStore, stream: str, *, label: str | None, start: float | None,
                 end: float | None, limit: int) -> dict[str, Any]:
    """The stream's tracked objects seen in ``[start, end)``, oldest first: the first ``limit`` of them, and whether
    there were more (one more is read to tell)."""
    tracks = store.object_tracks(stream, label=label, start=start, end=end, limit=limit + 1)
    return {"stream": stream, "label": label, "start": start, "end": end,
            "objects": [object_json(t) for t in tracks[:limit]], "truncated": len(tracks) > limit}


def snapshot(store: ObservationStore, stream: str, track_id: int) -> bytes | None:
    """The JPEG of a track's best frame, or None (no such track, or none was kept)."""
    track = store.object_track(stream, track_id)
    return None if track is None else track.snapshot
