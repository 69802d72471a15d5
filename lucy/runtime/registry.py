"""The server's list of streams, kept in ``<data>/service/streams.json`` so that a restart resumes them.

The file holds each stream's source as given (a camera URL may carry credentials, which a resumed ingest
needs), so it is written owner-readable only (0600), atomically (temporary file + rename), and nothing read
from it is shown without :func:`lucy.redaction.redact_url`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lucy.config import CaptionerBackend
from lucy.errors import StoreError

FORMAT_VERSION = 1


@dataclass(frozen=True)
class StreamSpec:
    """How a stream was asked for (``POST /v1/streams``)."""

    name: str
    source: str  # as given: may hold credentials; show only through redact_url
    preset: str
    captioner: CaptionerBackend
    realtime: bool = False
    created: float = field(default_factory=time.time)
    # the stream's own retention ages (None: the server's retention.full_seconds / keep_seconds)
    retention_full_seconds: float | None = None
    retention_keep_seconds: float | None = None
    recording: bool | None = None  # keep the stream's original video (None: the server's recording.enabled)


class StreamRegistry:
    """Streams the server runs. ``active`` ones are (re)started when the server starts."""

    def __init__(self, data: Path) -> None:
        self.path = Path(data) / "service" / "streams.json"
        self._lock = threading.RLock()  # put/remove read and write under one hold

    def load(self) -> list[StreamSpec]:
        """The registered streams, oldest first."""
        with self._lock:
            try:
                raw = json.loads(self.path.read_text())
            except FileNotFoundError:
                return []
            except (OSError, ValueError) as err:
                raise StoreError(f"cannot read the stream list {self.path}: {err}") from None
        if raw.get("format") != FORMAT_VERSION:
            raise StoreError(f"{self.path} is not a Lucy stream list of format {FORMAT_VERSION}")
        return [StreamSpec(**entry) for entry in raw["streams"]]

    def _save(self, specs: list[StreamSpec]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        body = json.dumps({"format": FORMAT_VERSION, "streams": [asdict(s) for s in specs]}, indent=2)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # a .tmp that a crash left behind keeps the mode it was made with
        with os.fdopen(fd, "w") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def put(self, spec: StreamSpec) -> None:
        """Add or replace a stream."""
        with self._lock:
            self._save([*(s for s in self.load() if s.name != spec.name), spec])

    def remove(self, name: str) -> None:
        with self._lock:
            self._save([s for s in self.load() if s.name != name])
