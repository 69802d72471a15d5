"""Synthetic videos with known content, for the demo, the tests and the benchmarks."""

from lucy.synth.video import PALETTE, Overlay, Scene, Shape, cached_video, write_video

__all__ = ["PALETTE", "Overlay", "Scene", "Shape", "cached_video", "write_video"]
