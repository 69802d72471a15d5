"""Metrics: plain stats objects filled by the pipeline, one progress record per stream, and the exporter that maps
them onto Prometheus.

The exporter's names are imported on first use, so that ``lucy ingest`` (which fills stats but exports nothing)
never imports prometheus_client.
"""

from typing import TYPE_CHECKING, Any

from lucy.metrics.progress import CaptionProgress, IngestProgress, StreamProgress
from lucy.metrics.stats import (
    CaptionCall,
    CaptionCallObserver,
    CaptionCallStats,
    QuestionRecord,
    QuestionStats,
    RetentionStats,
    StreamSample,
)

if TYPE_CHECKING:
    from lucy.metrics.exporter import CONTENT_TYPE, STATE_CODES, MetricsExporter

__all__ = ["CONTENT_TYPE", "STATE_CODES", "CaptionCall", "CaptionCallObserver", "CaptionCallStats",
           "CaptionProgress", "IngestProgress", "MetricsExporter", "QuestionRecord", "QuestionStats",
           "RetentionStats", "StreamProgress", "StreamSample"]

_EXPORTER_NAMES = ("CONTENT_TYPE", "STATE_CODES", "MetricsExporter")


def __getattr__(name: str) -> Any:
    if name in _EXPORTER_NAMES:
        from lucy.metrics import exporter

        return getattr(exporter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
