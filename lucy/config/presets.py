"""Memory-hierarchy presets: span length and sampling rate of each memory level.

The VideoLucy paper sets three depths per benchmark: coarse spans of T_c seconds, fine spans of T_f and
ultra-fine spans of T_uf, each captioned from frames sampled at its own rate (1 / 2 / 2 fps for most
benchmarks; 0.25 / 0.5 / 1 fps with T = 800 / 80 / 8 s for the day-long egocentric EgoMem videos).
Span lengths grow with the benchmark's video durations so that a video has a few dozen coarse spans at most.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lucy.config.names import Level


class LevelSpec(BaseModel):
    """How one memory level looks at the video."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    span_seconds: float = Field(gt=0, le=86_400, description="Length of one span of this level (T).")
    fps: float = Field(gt=0, le=30, description="Frames per second a captioner sees at this level.")


class Preset(BaseModel):
    """A named coarse / fine / ultra-fine table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    coarse: LevelSpec
    fine: LevelSpec
    ultra_fine: LevelSpec

    @model_validator(mode="after")
    def _nested(self) -> Preset:
        c, f, u = self.coarse.span_seconds, self.fine.span_seconds, self.ultra_fine.span_seconds
        if not c > f > u:
            raise ValueError(f"spans must shrink with depth (coarse {c} > fine {f} > ultra_fine {u})")
        for outer, inner in ((c, f), (f, u)):
            if abs(outer / inner - round(outer / inner)) > 1e-9:
                raise ValueError(f"a {outer} s span is not a whole number of {inner} s sub-spans")
        return self

    def level(self, level: Level) -> LevelSpec:
        return getattr(self, level.value)

    @property
    def finest_fps(self) -> float:
        """The rate ingest must keep so that every level can be read back at its own rate."""
        return max(self.level(level).fps for level in Level)


def _preset(description: str, spans: tuple[float, float, float], fps: tuple[float, float, float]) -> Preset:
    c, f, u = (LevelSpec(span_seconds=s, fps=r) for s, r in zip(spans, fps, strict=True))
    return Preset(description=description, coarse=c, fine=f, ultra_fine=u)


_STANDARD_FPS = (1.0, 2.0, 2.0)

PRESETS: dict[str, Preset] = {
    "live": _preset("Default for live streams: a coarse caption every minute, cheap enough to keep up.",
                    (60, 10, 2), (0.5, 1.0, 2.0)),
    "mlvu-short": _preset("MLVU, videos up to ~10 min.", (60, 10, 2), _STANDARD_FPS),
    "mlvu-medium": _preset("MLVU, 10-30 min.", (120, 20, 4), _STANDARD_FPS),
    "mlvu-long": _preset("MLVU, 30-60 min.", (240, 40, 4), _STANDARD_FPS),
    "mlvu-extra-long": _preset("MLVU, over an hour.", (480, 60, 6), _STANDARD_FPS),
    "videomme-short": _preset("Video-MME short, under 2 min.", (60, 10, 2), _STANDARD_FPS),
    "videomme-medium": _preset("Video-MME medium, 4-15 min.", (120, 20, 4), _STANDARD_FPS),
    "videomme-long": _preset("Video-MME long, 30-60 min.", (240, 40, 4), _STANDARD_FPS),
    "lvbench-short": _preset("LVBench, up to ~40 min.", (180, 30, 5), _STANDARD_FPS),
    "lvbench-medium": _preset("LVBench, ~40-80 min.", (360, 60, 6), _STANDARD_FPS),
    "lvbench-long": _preset("LVBench, over ~80 min.", (720, 80, 8), _STANDARD_FPS),
    "egomem": _preset("EgoMem day-long egocentric video (paper: T = 800 / 80 / 8 s at 0.25 / 0.5 / 1 fps).",
                      (800, 80, 8), (0.25, 0.5, 1.0)),
}
