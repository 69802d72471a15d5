"""The section names of the embedded (pixels) captioner's captions, one place for the writer and its readers.

:class:`lucy.memory.captioners.pixels.PixelsCaptioner` writes a caption as sections ("Scenes:", "On-screen text (read
by OCR; ...):", "Objects: ..."), and the embedded reasoner's check agent reads back the section a statement stands in
to know how it was measured (:mod:`lucy.query.reasoners.lexical_watch`). Both take the names from here, so a section
renamed by the writer is renamed for the reader too.
"""

from __future__ import annotations

SCENES = "Scenes"
PEOPLE = "People"
ON_SCREEN_TEXT = "On-screen text"
OBJECTS = "Objects"
MOTION = "Motion"
MOVING_THINGS = "Moving things"


def header(section: str, note: str | None = None) -> str:
    """A section's opening: ``"Objects:"``, or with a note on how it was measured ``"Objects (note):"``."""
    return f"{section}:" if note is None else f"{section} ({note}):"
