"""Ingest: sources (PyAV) -> pts sampler -> frame store (Zarr v3 today).

Callers know the :class:`FrameStores` catalogue and the :class:`FrameStore` of a stream, handed to them by the
composition root (:func:`lucy.wiring.open_frames` is the one place the backend is chosen). Importing this package
registers Lucy's Zarr image codecs, which every reader of a Zarr frame store needs.
"""

import importlib
from typing import TYPE_CHECKING, Any

from lucy.ingest import codecs as _codecs  # noqa: F401  (registers the zarr codecs)
from lucy.ingest.frames import (
    AUDIO_RATE,
    AudioClip,
    Clip,
    FrameStore,
    FrameStores,
    Gap,
    RetentionState,
    StreamInfo,
    check_stream_name,
)
from lucy.ingest.zarr_store import ZarrFrameStore, ZarrFrameStores, list_streams

if TYPE_CHECKING:
    from lucy.ingest.pipeline import Ingestor, IngestResult, IngestStats
    from lucy.ingest.source import open_source

# Decoding (PyAV) is imported when first named: a reader of frames and memory (lucy ask, lucy memory) needs none.
_LAZY = {"Ingestor": "pipeline", "IngestResult": "pipeline", "IngestStats": "pipeline", "open_source": "source"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"lucy.ingest.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'lucy.ingest' has no attribute {name!r}")

__all__ = [
    "AUDIO_RATE", "AudioClip", "Clip", "FrameStore", "FrameStores", "Gap", "IngestResult", "IngestStats", "Ingestor",
    "RetentionState",
    "StreamInfo", "ZarrFrameStore", "ZarrFrameStores", "check_stream_name", "list_streams",
    "open_source",
]
