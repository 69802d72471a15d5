"""Metrics: plain stats objects filled by the pipeline, and the exporter that maps them onto Prometheus."""

from lucy.metrics.exporter import CONTENT_TYPE, STATE_CODES, MetricsExporter
from lucy.metrics.stats import CaptionCallStats, QuestionRecord, QuestionStats, RetentionStats, StreamFigures

__all__ = ["CONTENT_TYPE", "STATE_CODES", "CaptionCallStats", "MetricsExporter", "QuestionRecord",
           "QuestionStats", "RetentionStats", "StreamFigures"]
