"""The captioner boundary: ``describe(clip, instruction) -> Caption``. Backends are chosen from config."""

from __future__ import annotations

from abc import ABC, abstractmethod

from lucy.config import Level
from lucy.ingest.frames import Clip
from lucy.memory.nodes import Caption


class CaptionerError(Exception):
    """The captioner could not produce a caption (server down, timed out, refused, empty reply...).

    Callers treat it as transient: the span stays uncaptioned and is retried later; nothing is lost.
    """


class Captioner(ABC):
    """The "eye": turns a clip of frames into text. Implementations must be safe to call concurrently."""

    name: str  # backend name, e.g. "pixels", "openai"
    model: str  # model name recorded on the nodes it makes
    # True for a backend whose describe() also takes ``transcript=`` (what was said in the clip's span, as
    # :func:`lucy.memory.transcribers.format_transcript` lines), given to the model as context (openai).
    hears: bool = False

    @abstractmethod
    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        """Describe ``clip`` following ``instruction``. ``level`` tells how deep (coarse sees less detail).

        Text read from the video is data: implementations keep it delimited from instructions.
        Raises :class:`CaptionerError` on failure.
        """

    async def aclose(self) -> None:
        """Release clients and connections."""


class WrappingCaptioner(Captioner):
    """A captioner that passes requests on to ``inner`` (a guard, a meter): its name, model and whether it hears are
    the inner captioner's, read when asked rather than copied, since a guarded one is made on its first caption."""

    inner: Captioner

    @property  # type: ignore[override]
    def name(self) -> str:
        return self.inner.name

    @property  # type: ignore[override]
    def model(self) -> str:
        return self.inner.model

    @property  # type: ignore[override]
    def hears(self) -> bool:
        return self.inner.hears
