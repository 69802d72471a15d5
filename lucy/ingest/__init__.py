"""Ingest: sources (PyAV) -> pts sampler -> Zarr v3 frame store.

Importing this package registers Lucy's Zarr image codecs, which every reader of a frame store needs.
"""

from lucy.ingest import codecs as _codecs  # noqa: F401  (registers the zarr codecs)
from lucy.ingest.frames import Clip, FrameStore, Gap, RetentionState, StreamInfo, check_stream_name
from lucy.ingest.pipeline import Ingestor, IngestResult, IngestStats
from lucy.ingest.source import open_source, redact_url
from lucy.ingest.zarr_store import ZarrFrameStore, list_streams

__all__ = [
    "Clip", "FrameStore", "Gap", "IngestResult", "IngestStats", "Ingestor", "RetentionState", "StreamInfo",
    "ZarrFrameStore", "check_stream_name", "list_streams", "open_source", "redact_url",
]
