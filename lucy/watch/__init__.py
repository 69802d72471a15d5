"""Watches: standing questions on a stream, checked as each coarse span closes, and the alerts they raise."""

from __future__ import annotations

from lucy.watch.model import VERDICTS, Alert, AlertLevel, Verdict, Watch, WatchStats

__all__ = ["VERDICTS", "Alert", "AlertLevel", "Verdict", "Watch", "WatchStats"]
