"""What the detect stage saw in a span, as a section of memory a watch is checked on: one statement per tracked
object ("car 4 (vehicle): arrives 70.0 s, stops and stays (stationary, parked) until 118.0 s, colour white").

So a standing question about a kind of object ("alert me when a person appears", "tell me when a car stops") is
answered by the tracks themselves as soon as the span that holds them is checked, not only by what a caption
happened to say. The section is headed "Objects", which the check agent counts as measured (read off the pixels):
a track of the label asked for is a yes. Each statement is one line without "; " (the agent splits on it) and
without a word of negation (a statement that says something was not there shows nothing): it says what the
object did in the words a person asks with (a stationary vehicle "stops" and is "parked", a moving person "walks").
"""

from __future__ import annotations

from collections.abc import Sequence

from lucy.memory.captioners import sections
from lucy.perception.objects import ANIMALS, IN_VIEW, PERSON, VEHICLES, TrackedObject

MAX_TRACKS = 40  # statements per span: a busy minute has more tracks than a check needs to read


def _where(edge: str) -> str:
    return "in view" if edge == IN_VIEW else f"at the {edge}"


def track_statement(track: TrackedObject) -> str:
    """One tracked object as a statement of memory, with its times (the check's evidence)."""
    kind = " (vehicle)" if track.label in VEHICLES else " (animal)" if track.label in ANIMALS else ""
    if not track.moving:
        did = "stops and stays (stationary, parked)" if track.label in VEHICLES else "stays (stationary)"
    else:
        did = "walks (moving)" if track.label == PERSON else "drives (moving)" if track.label in VEHICLES else \
            "moves"
    # "arrives" whether it came in at an edge or first showed in view (from behind something, or at the start)
    came = "arrives in view" if track.entered == IN_VIEW else f"arrives, enters from the {track.entered}"
    went = "still in view" if track.exited is None else \
        "lost in view" if track.exited == IN_VIEW else f"leaves {_where(track.exited)}"
    seen = f"{track.first_seen:.1f}-{track.last_seen:.1f} s"
    attributes = "".join(f", {name} {value}" for name, value in sorted(track.attributes.items()))
    return f"- {track.label} {track.track_id}{kind}: {came}, {did}, {went}, seen {seen}{attributes}"


def objects_section(tracks: Sequence[TrackedObject]) -> str:
    """The tracked objects of a span as an "Objects" section ('' when there are none): the longest seen first, at
    most :data:`MAX_TRACKS` of them, then in the order they appeared."""
    if not tracks:
        return ""
    kept = sorted(sorted(tracks, key=lambda t: (-t.dwell, -t.score))[:MAX_TRACKS], key=lambda t: t.first_seen)
    more = len(tracks) - len(kept)
    note = "tracked by the detector" + (f", the {len(kept)} seen longest of {len(tracks)}" if more else "")
    return "\n".join([sections.header(sections.OBJECTS, note), *(track_statement(t) for t in kept)])
