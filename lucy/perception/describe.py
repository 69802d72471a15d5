"""What the detector saw in one span of a stream, as a person's notes: counts in view, who and what passed and how.

The detect stage stores tracked objects and per-frame counts with the stream (:mod:`lucy.perception.objects`);
memory is written from them. A span's notes say how many of each kind were in view over the span ("3-7 in view,
usually 5"), the distinct objects that passed, grouped by the way they went ("8 walked left to right, 3 right to
left"), those that stayed ("1 white truck parked at the top centre throughout"), the colours the tracker noted,
places in thirds of the picture, how many people faced the camera (the tracker saw their face), and exact times where
there are few of a kind. A person the tracker saw riding a bicycle or motorcycle is one passer-by with it ("1 person
on a bicycle rode left to right"); what they rode is counted in its own line but not as another passer-by ("1
ridden by a person"). Identical things are counted, never listed: a parked van is one line however long the span,
and a busy minute stays within ``max_chars`` (the text is written again with less detail until it fits).

Pure functions over the records, so the embedded captioner writes these notes as its caption lines and a
vision-language captioner gets the same text as the detector's findings (:mod:`lucy.memory.captioners`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lucy.config import Level
from lucy.perception.objects import (
    ANIMALS,
    EDGES,
    IN_VIEW,
    PERSON,
    REPORT_SECONDS,
    RIDDEN_BY,
    RIDING,
    VEHICLES,
    CountSample,
    ObservationStore,
    TrackedObject,
)

VEHICLE = "vehicle"  # one word for every label of VEHICLES in counts
_EPS = 0.75  # seconds: a track seen this close to a span's bound counts as there at that bound
# An open track (still followed when the span was read) last seen longer than this before the span's end was not seen
# at its end: the tracker writes a record of an object it sees every REPORT_SECONDS, and keeps one it lost (hidden,
# or gone) open for a while in case it is seen again.
_OPEN_STALE = REPORT_SECONDS + 1.0
_MOVED = 0.15  # share of the picture a track's centre must travel (between path points) to have gone somewhere
_STOPPED_SECONDS = 5.0  # a moving object whose last path points stay put this long stopped there
_STILL = 0.04  # ... within this share of the picture
_PLURALS = {PERSON: "people", "bus": "buses", "knife": "knives", "mouse": "mice", "sheep": "sheep",
            "skis": "skis", "scissors": "scissors", "sports ball": "balls", "wine glass": "wine glasses"}
_OPPOSITE = {"left": "right", "right": "left", "top": "bottom", "bottom": "top"}
_FRAME_TIME = "{:.1f} s"  # how memory writes a media time (the pixels captioner's "seen 75.0-88.0 s")
FACE_SEEN = "seen"  # a person's attributes["face"] once the tracker found a face at one of its best views


@dataclass(frozen=True)
class SpanObservations:
    """The tracks seen in ``[start, end)`` of a stream and the count samples of its detected frames.

    ``until`` is how far the detect stage had got (``end`` or more when the whole span was observed): a caption
    of a span observed in part says so.
    """

    start: float
    end: float
    tracks: Sequence[TrackedObject] = ()
    counts: Sequence[CountSample] = ()
    until: float | None = None

    @property
    def complete(self) -> bool:
        return self.until is None or self.until >= self.end - 1e-6


def read_observations(store: object, stream: str, start: float, end: float, *,
                      limit: int = 1000) -> SpanObservations | None:
    """The observations of ``[start, end)`` from ``store`` (a memory store, which keeps them), or None where the
    detect stage never saw that part of the stream (detection off, a data directory from before it, a span the
    detector has not reached yet, a store that keeps no observations): then a captioner describes the span as it
    would without a detector. Blocking (store I/O): call it in a thread."""
    if not isinstance(store, ObservationStore):
        return None
    until = store.observed_until(stream)
    if until is None or until <= start:
        return None
    return SpanObservations(start, end, store.object_tracks(stream, start=start, end=end, limit=limit),
                            store.object_counts(stream, start, end), until)


def kind_of(label: str) -> str:
    """The word counts use for a label: every vehicle is "vehicle" (a van comes out as car or truck)."""
    return VEHICLE if label in VEHICLES else label


def plural(label: str, n: int = 2) -> str:
    """``label`` for ``n`` of them: "person" / "people", "bus" / "buses"."""
    if n == 1:
        return label
    if label in _PLURALS:
        return _PLURALS[label]
    return label + ("es" if label.endswith(("s", "x", "ch", "sh")) else "s")


def place(x: float, y: float) -> str:
    """A place in the picture by thirds: "top left", "bottom centre", "centre" (the middle third both ways)."""
    row = "top" if y < 1 / 3 else ("bottom" if y > 2 / 3 else "middle")
    col = "left" if x < 1 / 3 else ("right" if x > 2 / 3 else "centre")
    return "centre" if (row, col) == ("middle", "centre") else f"{row} {col}"


def _at(t: float) -> str:
    return _FRAME_TIME.format(t)


def _times(first: float, last: float) -> str:
    return _at(first) if abs(last - first) < 0.05 else f"{first:.1f}-{last:.1f} s"


# ------------------------------------------------------------------------------------------- counts

@dataclass(frozen=True, slots=True)
class _InView:
    low: int
    high: int
    usual: int
    most_at: float  # the first time ``high`` were in view


def counts_in_view(counts: Sequence[CountSample]) -> dict[str, _InView]:
    """Per kind (:func:`kind_of`), how many were in view over the samples: fewest, most, the median and when the
    most were first seen. A sample that leaves a kind out saw none of it."""
    if not counts:
        return {}
    per: dict[str, list[int]] = {}
    for sample in counts:
        merged: Counter[str] = Counter()
        for label, n in sample.counts.items():
            merged[kind_of(label)] += int(n)
        for kind in merged:
            per.setdefault(kind, [])
    for kind, series in per.items():
        for sample in counts:
            series.append(sum(int(n) for label, n in sample.counts.items() if kind_of(label) == kind))
    out = {}
    for kind, series in per.items():
        high = max(series)
        out[kind] = _InView(min(series), high, round(statistics.median(series)),
                            float(counts[series.index(high)].time))
    return out


def _in_view_words(kind: str, seen: _InView, *, times: bool) -> str:
    if seen.low == seen.high:
        return f"{seen.high} in view throughout"
    words = f"{seen.low}-{seen.high} in view"
    if seen.high - seen.low >= 2 and seen.usual not in (seen.low, seen.high):
        words += f", usually {seen.usual}"
    if times:
        words += f" (most at {_at(seen.most_at)})"
    return words


# ------------------------------------------------------------------------------------------- tracks

@dataclass(frozen=True, slots=True)
class _Way:
    """How one object went within the span: the words a group of such objects shares, and when."""

    kind: str  # "stayed", "through", "arrived", "left", "moved"
    words: str  # "left to right", "at the top centre throughout", "from the left and stopped at the centre"
    time: float  # when it was first seen in the span (the order of a group's times)
    when: str  # the time worth naming: an arrival, a departure, the seconds it was in view
    band: str | None = None  # for objects that went across: the part of the picture they crossed


def _local_path(track: TrackedObject, start: float, end: float) -> list[tuple[float, float, float]]:
    points = [(p.time, p.x, p.y) for p in track.path if start - _EPS <= p.time < end + _EPS]
    if not points and track.path:  # a long track whose summary has no point inside this span
        before = [p for p in track.path if p.time < start]
        p = before[-1] if before else track.path[0]
        points = [(p.time, p.x, p.y)]
    if not points:  # no path at all: where its best view was (the middle when that is not known either)
        x0, y0, x1, y1 = track.best_box
        centre = ((x0 + x1) / 2, (y0 + y1) / 2) if x1 > x0 and y1 > y0 else (0.5, 0.5)
        points = [(track.best_time, *centre)]
    return points


def _heading(points: list[tuple[float, float, float]]) -> str | None:
    (_, ax, ay), (_, bx, by) = points[0], points[-1]
    dx, dy = bx - ax, by - ay
    if max(abs(dx), abs(dy)) < _MOVED:
        return None
    if abs(dx) >= abs(dy):
        return "left to right" if dx > 0 else "right to left"
    return "from the top to the bottom" if dy > 0 else "from the bottom to the top"


def _band(points: list[tuple[float, float, float]], across: bool) -> str:
    """The third of the picture a crossing kept to: "the upper part" for one going left to right near the top."""
    mean = statistics.fmean(p[2] if across else p[1] for p in points)
    if across:
        return "the upper part" if mean < 1 / 3 else ("the lower part" if mean > 2 / 3 else "the middle")
    return "the left side" if mean < 1 / 3 else ("the right side" if mean > 2 / 3 else "the centre")


def _stopped(points: list[tuple[float, float, float]]) -> bool:
    """Whether the object's last path points stayed in one place for a while (a car that parked)."""
    t_end, x_end, y_end = points[-1]
    still_since = t_end
    for t, x, y in reversed(points):
        if max(abs(x - x_end), abs(y - y_end)) > _STILL:
            break
        still_since = t
    return t_end - still_since >= _STOPPED_SECONDS


def _stayed(points: list[tuple[float, float, float]], first: float, last: float, *, there_before: bool,
            there_after: bool) -> _Way:
    """An object that did not move (or whose moves led nowhere): where it stood, and from or until when."""
    mx, my = statistics.fmean(p[1] for p in points), statistics.fmean(p[2] for p in points)
    if there_before and there_after:
        return _Way("stayed", f"at the {place(mx, my)} throughout", first, "")
    when = f"until {_at(last)}" if there_before else f"from {_at(first)}" if there_after else _times(first, last)
    return _Way("stayed", f"at the {place(mx, my)}", first, when)


def _through(points: list[tuple[float, float, float]], came: str, went: str, first: float, seen: str) -> _Way:
    """An object that came in at one edge and went out at one: across, or in and back out."""
    if _OPPOSITE[came] == went:
        words = {"left": "left to right", "right": "right to left", "top": "from the top to the bottom",
                 "bottom": "from the bottom to the top"}[came]
        return _Way("through", words, first, seen, _band(points, came in ("left", "right")))
    if came == went:
        return _Way("through", f"in and back out at the {came}", first, seen)
    return _Way("through", f"in from the {came}, out at the {went}", first, seen)


def way_of(track: TrackedObject, start: float, end: float, until: float | None = None) -> _Way:
    """How ``track`` went within ``[start, end)``: where it came in and went out (edges of the picture), or stayed.
    ``until``: how far the detector had looked (an open track is there at the end when seen near the end of what
    was looked at)."""
    points = _local_path(track, start, end)
    # There when the span began: seen before it, or there (not coming in at an edge) from its first moment.
    there_before = track.first_seen < start - _EPS or (track.first_seen <= start + _EPS and track.entered == IN_VIEW)
    looked = end if until is None else min(end, until)
    there_after = track.last_seen >= end - _EPS or (
        (track.active or track.exited is None) and track.last_seen >= looked - _OPEN_STALE)
    came = None if there_before or track.entered not in EDGES else track.entered
    went = None if there_after or track.exited not in EDGES else track.exited
    first, last = max(track.first_seen, start), min(track.last_seen, end)
    x, y = points[-1][1], points[-1][2]
    heading = _heading(points)
    if not track.moving or (heading is None and came is None and went is None):
        return _stayed(points, first, last, there_before=there_before, there_after=there_after)
    seen = _times(first, last)
    if came and went:
        return _through(points, came, went, first, seen)
    if came:
        end_words = f"stopped at the {place(x, y)}" if _stopped(points) else (
            f"was still in view at the {place(x, y)}" if there_after else f"was last seen at the {place(x, y)}")
        return _Way("arrived", f"from the {came} and {end_words}", first, _at(first))
    if went:
        sx, sy = points[0][1], points[0][2]
        return _Way("left", f"off to the {went} from the {place(sx, sy)}", first, _at(last))
    if there_before and there_after:  # in view all along, moving: its times are the span's, not worth naming
        seen = ""
    if heading is not None:
        return _Way("moved", heading, first, seen, _band(points, heading in ("left to right", "right to left")))
    return _Way("moved", f"about at the {place(x, y)}", first, seen)


_VERBS = {  # (kind of object, way) -> verb; others: "went" / "stayed"
    (PERSON, "through"): "walked", (PERSON, "arrived"): "came in", (PERSON, "left"): "walked",
    (PERSON, "moved"): "walked", (PERSON, "stayed"): "stayed",
    (VEHICLE, "through"): "drove", (VEHICLE, "arrived"): "arrived", (VEHICLE, "left"): "drove",
    (VEHICLE, "moved"): "drove", (VEHICLE, "stayed"): "parked",
}


def _verb(kind: str, way: str) -> str:
    verb = _VERBS.get((kind, way))
    if verb is not None:
        return verb
    return {"stayed": "stayed", "arrived": "came in"}.get(way, "went")


def _word(value: object) -> str:
    """An attribute's value as one short run of words: it is written into memory, so no line breaks or odd
    characters, whatever a store held."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(value)).split())[:30]


def looks(track: TrackedObject) -> str:
    """What the tracker noted of how it looked: "red top and blue bottoms" for a person, "white" for a vehicle."""
    a = {k: _word(v) for k, v in track.attributes.items()}
    if track.label == PERSON:
        parts = [f"{a['upper']} top" if a.get("upper") else "", f"{a['lower']} bottoms" if a.get("lower") else ""]
        return " and ".join(p for p in parts if p)
    return a.get("colour", "")


# ------------------------------------------------------------------------------------------- text

@dataclass(frozen=True, slots=True)
class _Detail:
    groups: int  # groups of one kind shown; the rest are folded into "n more ..."
    times_upto: int  # groups of at most this many objects get their times
    looks: int  # looks (colours) named per group
    in_view_times: bool
    broad: bool = False  # group by the kind of way alone ("walked through"), not by edges ("left to right")


# From most to least detailed: the first that fits the budget is written.
_DETAILS = (_Detail(8, 3, 4, True), _Detail(5, 2, 2, True), _Detail(4, 1, 1, False), _Detail(4, 0, 0, False, True),
            _Detail(3, 0, 0, False, True), _Detail(2, 0, 0, False, True))
_BROAD = {"through": "through", "arrived": "and stayed", "left": "off", "moved": "about"}  # by _Way.kind
_TITLES = {PERSON: "People", VEHICLE: "Vehicles"}
DEFAULT_MAX_CHARS = {Level.COARSE: 900, Level.FINE: 1400, Level.ULTRA_FINE: 1400}


def _order(kind: str) -> tuple[int, str]:
    return (0 if kind == PERSON else 1 if kind == VEHICLE else 2 if kind in ANIMALS else 3, kind)


def _subject(kind: str, noun: str, members: list[tuple[TrackedObject, _Way]], detail: _Detail) -> str:
    """"3 people (2 in red top, 1 in blue top)", "1 white car": how many, and how they looked."""
    n = len(members)
    seen = Counter(filter(None, (looks(t) for t, _ in members)))
    worn = kind == PERSON  # a person's looks are clothes ("in red top"), a vehicle's its colour ("red")
    if len(seen) == 1 and (n == 1 or (detail.looks and seen.total() == n)):  # one look, short: always worth it
        look = next(iter(seen))
        return f"{n} {noun} in {look}" if worn else f"{n} {look} {noun}"
    subject = f"{n} {noun}"
    if seen and detail.looks:
        named = seen.most_common(detail.looks)
        subject += " (" + ", ".join(f"{c} in {k}" if worn else f"{c} {k}" for k, c in named) + \
                   (", ..." if len(seen) > len(named) else "") + ")"
    return subject


def _group_words(kind: str, way: str, words: str, members: list[tuple[TrackedObject, _Way]], detail: _Detail,
                 band: str | None, ride: str = "") -> str:
    n = len(members)
    labels = Counter(t.label for t, _ in members)
    noun = plural(kind if kind != VEHICLE else labels.most_common(1)[0][0], n) if len(labels) == 1 else plural(kind)
    if way == RIDDEN_BY:  # counted here, described with their riders
        return f"{n} ridden by {'a person' if n == 1 else 'people'}"

    subject = _subject(kind, noun, members, detail)
    if ride:
        subject += f" on a {ride}" if n == 1 else f" on {plural(ride)}"
    if n > 1:
        words = words.replace(" was ", " were ")
    verb = "rode" if ride and way in ("through", "left", "moved") else _verb(kind, way)
    text = " ".join(w for w in (subject, verb, words) if w)
    if band is not None:
        text += f" across {band}" if way != "moved" or "right" in words else f" on {band}"
    whens = [w.when for _, w in sorted(members, key=lambda m: m[1].time) if w.when]
    if whens and n <= detail.times_upto:
        text += " (" + ", ".join(whens) + ")"
    return text


def _kind_line(kind: str, tracks: list[TrackedObject], seen: _InView | None, start: float, end: float,
               until: float, detail: _Detail) -> str:
    title = _TITLES.get(kind, plural(kind).capitalize())
    parts: list[str] = []
    if seen is not None and seen.high > 0:
        parts.append(_in_view_words(kind, seen, times=detail.in_view_times))
    if tracks:
        groups: dict[tuple[str, str, str], list[tuple[TrackedObject, _Way]]] = {}
        for track in tracks:
            way = way_of(track, start, end, until)
            words = _BROAD.get(way.kind, way.words) if detail.broad else way.words
            ride = _word(track.attributes.get(RIDING, "")) if kind == PERSON else ""
            if kind != PERSON and track.attributes.get(RIDDEN_BY):
                way, words = _Way(RIDDEN_BY, "", way.time, way.when), ""
            groups.setdefault((way.kind, words, ride), []).append((track, way))
        # What stayed all along first (a parked van is what a person notes), then the most objects; ties in a fixed
        # order, so the same observations always give the same text.
        ranked = sorted(groups.items(), key=lambda g: (not g[0][1].endswith("throughout"), -len(g[1]), g[0]))
        shown = []
        for (way, words, ride), members in ranked[:detail.groups]:
            bands = {None} if detail.broad else {w.band for _, w in members}
            shown.append(_group_words(kind, way, words, members, detail, bands.pop() if len(bands) == 1 else None,
                                      ride))
        rest = sum(len(m) for _, m in ranked[detail.groups:])
        if rest:
            shown.append(f"{rest} more in other ways")
        n = len(tracks)
        parts.append(f"{n} different: " + "; ".join(shown) if n > 1 else "; ".join(shown))
        # Whose face the camera saw (the tracker's face check at a person's best views): who could be recognised.
        faced = sum(1 for t in tracks if kind == PERSON and t.attributes.get("face") == FACE_SEEN)
        if faced:
            parts.append("face seen" if n == 1 else f"face seen: {faced} of them faced the camera")
    return f"{title} (detector): " + "; ".join(parts) + "."


def describe_observations(observed: SpanObservations, *, level: Level | str = Level.COARSE,
                          max_chars: int | None = None) -> str:
    """The span's observations as caption lines, one per kind of object (people, vehicles, each animal, others),
    at most ``max_chars`` long (default by level: :data:`DEFAULT_MAX_CHARS`)."""
    level = Level(level)
    budget = max_chars if max_chars is not None else DEFAULT_MAX_CHARS[level]
    start, end = observed.start, observed.end
    looked = end if observed.until is None else min(end, observed.until)  # how far the detector had looked
    by_kind: dict[str, list[TrackedObject]] = {}
    for track in observed.tracks:
        if track.last_seen >= start and track.first_seen < end:
            by_kind.setdefault(kind_of(track.label), []).append(track)
    for tracks in by_kind.values():
        tracks.sort(key=lambda t: (t.first_seen, t.track_id))
    in_view = counts_in_view(observed.counts)
    kinds = sorted(set(by_kind) | {k for k, v in in_view.items() if v.high > 0}, key=_order)
    note = "" if observed.complete or observed.until is None else \
        f"Detector: this span was looked at only up to {_at(observed.until)}."
    if not kinds:
        checked = f" in the {len(observed.counts)} frames it checked" if observed.counts else ""
        return f"Detector: nothing detected{checked}." + (f"\n{note}" if note else "")
    text = ""
    # A coarse look starts with less: its caption of a busy span must leave room for the rest of the caption.
    for detail in _DETAILS[1 if level is Level.COARSE else 0:]:
        lines = [_kind_line(kind, by_kind.get(kind, []), in_view.get(kind), start, end, looked, detail)
                 for kind in kinds]
        if note:
            lines.append(note)
        text = "\n".join(lines)
        if len(text) <= budget:
            return text
    return _clip(text, budget)


def _clip(text: str, budget: int) -> str:
    """``text`` cut at a word before ``budget`` characters, marked as cut."""
    if len(text) <= budget:
        return text
    cut = text[:max(0, budget - 2)].rsplit(" ", 1)[0]
    return cut + " …"
