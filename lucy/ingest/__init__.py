"""Ingest: sources (PyAV) -> pts sampler -> frame store (Zarr v3 today).

Callers know the :class:`FrameStores` catalogue and the :class:`FrameStore` of a stream; :func:`open_frames` is the
one place the backend is chosen. Importing this package registers Lucy's Zarr image codecs, which every reader
of a Zarr frame store needs.
"""

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
from lucy.ingest.pipeline import Ingestor, IngestResult, IngestStats
from lucy.ingest.source import open_source, redact_url
from lucy.ingest.zarr_store import ZarrFrameStore, ZarrFrameStores, list_streams, open_frames

__all__ = [
    "AUDIO_RATE", "AudioClip", "Clip", "FrameStore", "FrameStores", "Gap", "IngestResult", "IngestStats", "Ingestor", "RetentionState",
    "StreamInfo", "ZarrFrameStore", "ZarrFrameStores", "check_stream_name", "list_streams", "open_frames",
    "open_source", "redact_url",
]
