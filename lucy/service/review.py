"""What the review page draws along a stream's time, in one answer: where frames are stored and where they are
missing (gaps), where the original video is recorded (:mod:`lucy.ingest.recording`'s segments), the tracked
objects, the alerts, the on-screen text read, and the evidence of answered questions.

Every part is read with a bound (a ``LIMIT`` in SQL, a cap on the runs of stored frames and of segments), so a
day-long stream's timeline costs what the page can draw, never the whole stream; each part says when it was cut
(``truncated``). Texts are data read from video: the page shows them as text only. Blocking (memory and frame store
I/O): call in a worker thread.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

import numpy as np

from lucy.errors import StoreError
from lucy.ingest.segments import list_segments
from lucy.query.operators.lines import merge, sightings_in
from lucy.service import objects
from lucy.service.errors import NotFound
from lucy.service.state import Service
from lucy.watch.delivery import alert_json

MAX_RUNS = 2000  # runs of stored frames (coverage) and of recorded segments; the shortest gaps are closed past it
SEGMENT_JOIN_SECONDS = 0.5  # segments closer than this make one run of recording (a segment ends where the next begins)
MAX_OBJECTS = 1000
MAX_ALERTS = 1000
MAX_QUESTIONS = 200
MAX_TEXT_NODES = 2000  # coarse nodes read for on-screen text
MAX_TEXTS = 500
GAP_FRAMES = 5  # frames missing in a row that make a gap (a commit's jitter is less)
MIN_GAP_SECONDS = 2.5
THINNED_GAP_SECONDS = 60.0  # before thinned_before, retention left a frame every few seconds: only longer is a gap


def coverage(times: np.ndarray, fps: float, thinned_before: float, end: float) -> tuple[list[list[float]], bool]:
    """Runs ``[start, end]`` of stored frames (times of the frames kept, in order): a run ends where more than
    :data:`GAP_FRAMES` frames at ``fps`` are missing. Past :data:`MAX_RUNS` runs, the shortest gaps are closed
    (truncated: True)."""
    if len(times) == 0:
        return [], False
    step = 1.0 / fps
    allowed = np.where(times[:-1] < thinned_before, THINNED_GAP_SECONDS, max(GAP_FRAMES * step, MIN_GAP_SECONDS))
    gaps = np.flatnonzero(np.diff(times) > allowed)
    truncated = len(gaps) >= MAX_RUNS
    if truncated:  # keep the widest gaps
        widths = times[gaps + 1] - times[gaps]
        gaps = np.sort(gaps[np.argsort(widths)[::-1][:MAX_RUNS - 1]])
    starts = np.concatenate([[0], gaps + 1])
    ends = np.concatenate([gaps, [len(times) - 1]])
    runs = [[round(float(times[a]), 3), round(min(float(times[b]) + step, end), 3)]
            for a, b in zip(starts, ends, strict=True)]
    return runs, truncated


def recorded(svc: Service, name: str, end: float) -> tuple[list[list[float]], bool]:
    """Runs ``[start, end]`` of the stream's recorded segments (the one being written up to ``end``, the stored
    frames' end), at most :data:`MAX_RUNS` of them (truncated: the newest are left out). A local data directory's
    recordings only; none for a file stream (its source file is its recording) or with recording off."""
    runs: list[list[float]] = []
    for seg in list_segments(svc.settings.data, name, include_open=True):
        seg_end = seg.end if seg.end is not None else max(seg.start, end)
        if runs and seg.start <= runs[-1][1] + SEGMENT_JOIN_SECONDS:
            runs[-1][1] = max(runs[-1][1], round(seg_end, 3))
        elif len(runs) >= MAX_RUNS:
            return runs, True
        else:
            runs.append([round(seg.start, 3), round(seg_end, 3)])
    return runs, False


def _frames(svc: Service, name: str) -> dict[str, Any]:
    """The stored frames' part: coverage, recorded gaps, what retention deleted, the stream's time span."""
    try:
        store = svc.reader(name)
        info = store.info()
        times = store.times()
    except (NotFound, StoreError):
        return {"frames": 0, "first": None, "end": 0.0, "coverage": [], "coverage_truncated": False, "gaps": [],
                "expired_before": 0.0, "wall_start": None, "live": None}
    runs, truncated = coverage(np.asarray(times, dtype=np.float64), info.stored_fps, info.thinned_before,
                               info.media_seconds)
    return {"frames": int(len(times)), "first": info.first_time, "end": info.covered_seconds,
            "stored_fps": info.stored_fps, "coverage": runs, "coverage_truncated": truncated,
            "gaps": [{"start": g.start, "end": g.end, "reason": g.reason} for g in info.gaps[-MAX_RUNS:]],
            "expired_before": info.expired_before, "wall_start": info.wall_start, "live": info.live}


def _texts(svc: Service, name: str, start: float, end: float | None) -> tuple[list[dict[str, Any]], bool]:
    """On-screen text read in the window, as the coarse captions wrote it: one entry per showing of a text."""
    nodes = svc.memory.nodes(name, level="coarse", start=start, end=end, limit=MAX_TEXT_NODES + 1)
    truncated = len(nodes) > MAX_TEXT_NODES
    readings = [r for n in nodes[:MAX_TEXT_NODES] for r in sightings_in(n.text, n.level)]
    shown = [s for s in merge(readings) if s.last >= start and (end is None or s.first < end)]
    truncated = truncated or len(shown) > MAX_TEXTS
    return [{"text": s.text, "start": s.first, "end": s.last, "where": s.where, "colours": s.colours}
            for s in shown[:MAX_TEXTS]], truncated


def _questions(svc: Service, name: str, start: float, end: float | None) -> list[dict[str, Any]]:
    """The recent answered questions with evidence in the window, newest first, each with its evidence spans."""
    out = []
    for row in svc.memory.questions(name, MAX_QUESTIONS):
        answer = row.get("answer")
        if not isinstance(answer, dict):  # still running, or it failed
            continue
        spans = [{"start": float(e["start"]), "end": float(e["end"])} for e in answer.get("evidence") or []
                 if float(e["end"]) > start and (end is None or float(e["start"]) < end)]
        if spans:
            out.append({"id": row["id"], "question": row["question"], "asked": row["asked"],
                        "answer": answer.get("answer"), "confident": bool(answer.get("confident")),
                        "evidence": spans})
    return out


def timeline(svc: Service, name: str, start: float, end: float | None) -> dict[str, Any]:
    """Everything the review page draws over ``[start, end)`` of stream ``name`` (``end`` None: to its end)."""
    frames = _frames(svc, name)
    page = objects.objects_page(svc.memory, name, label=None, start=start if start > 0 else None, end=end,
                                limit=MAX_OBJECTS)
    # the window's alerts, read by their span in SQL: a stream's older alerts never crowd out a later window's
    alerts = [alert_json(a) for a in svc.memory.alerts(name, start=start, end=end, limit=MAX_ALERTS + 1)]
    alerts_truncated = len(alerts) > MAX_ALERTS
    alerts = alerts[:MAX_ALERTS]
    recordings, recordings_truncated = recorded(svc, name, frames["end"] or 0.0)
    texts, texts_truncated = _texts(svc, name, start, end)
    questions = _questions(svc, name, start, end)
    found_end = max([frames["end"] or 0.0, *(o["last_seen"] for o in page["objects"]),
                     *(a["end"] for a in alerts), *(t["end"] for t in texts)])
    span_end = end if end is not None else (found_end if math.isfinite(found_end) else 0.0)
    return {"stream": name, "from": start, "to": span_end, **frames,
            "recordings": recordings, "recordings_truncated": recordings_truncated,
            "objects": page["objects"], "objects_truncated": page["truncated"],
            "alerts": alerts, "alerts_truncated": alerts_truncated,
            "texts": texts, "texts_truncated": texts_truncated, "questions": questions,
            "clip_url": f"/v1/streams/{quote(name, safe='')}/clip", "frame_url": f"/v1/streams/"
                        f"{quote(name, safe='')}/frames"}
