"""Lucy: a streaming video memory engine (VideoLucy-style coarse-to-fine memory over live video)."""

__version__ = "0.1.0"
