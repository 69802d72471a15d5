"""Synthetic videos with known content, for the demo, the tests and the benchmarks."""

from lucy.synth.speech import Speech, speak, speech_track, spoken_spans, write_audio
from lucy.synth.video import PALETTE, Overlay, Scene, Shape, cached_video, cut_scenes, write_video

__all__ = ["PALETTE", "Overlay", "Scene", "Shape", "Speech", "cached_video", "cut_scenes", "speak", "speech_track",
           "spoken_spans", "write_audio", "write_video"]
