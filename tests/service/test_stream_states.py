"""One vocabulary of stream states (:class:`lucy.runtime.messages.StreamState`): ``lucy streams``, the API and the
metrics say the same word for a stream, whichever process writes it. A stream that no server runs reads as its
frame store and its writer lock tell: written now (``lucy ingest`` in another process) it is ``recording`` or
``catching_up``, never ``stopped``; a live ingest ended with Ctrl-C is ``stopped``; a file read to its end
``finished``."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.ingest.lock import stream_lock
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.metrics import StreamProgress
from lucy.metrics.progress import IngestProgress
from lucy.runtime.events import EventBus
from lucy.runtime.messages import RunEnd, StateChange, StreamState, WorkerExit, stored_state
from lucy.runtime.registry import StreamSpec
from lucy.runtime.streams import ManagedStream, StreamManager
from lucy.wiring import open_frames, open_worker_stores


@pytest.mark.parametrize("live, complete, lost, writing, expected", [
    (True, False, None, True, StreamState.RECORDING),  # lucy ingest rtsp://... running now
    (False, False, None, True, StreamState.CATCHING_UP),  # lucy ingest FILE running now
    (False, True, None, True, StreamState.CATCHING_UP),  # written again (resumed): what the lock says wins
    (True, False, None, False, StreamState.STOPPED),  # a live ingest ended with Ctrl-C
    (False, False, None, False, StreamState.STOPPED),  # a file ingest interrupted
    (False, True, None, False, StreamState.FINISHED),
    (False, False, "source ends early", False, StreamState.FINISHED),  # as far as a damaged file goes
    (True, True, None, False, StreamState.FINISHED),  # a live broadcast that ended (HLS ENDLIST)
    (True, False, "stream down for over 60 s", False, StreamState.FAILED),
])
def test_the_state_of_a_stored_stream(live: bool, complete: bool, lost: str | None, writing: bool,
                                      expected: StreamState) -> None:
    assert stored_state(live=live, complete=complete, lost=lost, writing=writing) is expected


@pytest.mark.parametrize("live, paced, down, expected", [
    (True, False, True, StreamState.RECONNECTING),  # lucy ingest rtsp://... while the camera is down
    (False, True, False, StreamState.RECORDING),  # lucy ingest FILE --realtime: paced, as the server's realtime
    (False, False, True, StreamState.CATCHING_UP),  # a file is never reconnected
])
def test_what_the_writer_tells_decides_the_state_while_it_writes(live: bool, paced: bool, down: bool,
                                                                 expected: StreamState) -> None:
    assert stored_state(live=live, complete=False, lost=None, writing=True, paced=paced, down=down) is expected
    # told by a writer that is gone: not read
    assert stored_state(live=live, complete=False, lost=None, writing=False, paced=paced, down=down) is \
        StreamState.STOPPED


def _store(frames, name: str, *, live: bool, complete: bool | None = None) -> None:
    source = "rtsp://user:pw@cam/1" if live else f"/videos/{name}.mp4"
    store = frames.create(name, source=source, live=live, width=48, height=32, stored_fps=2.0, codec="zstd",
                          quality=90)
    times = np.arange(0, 4, 0.5)
    store.append(np.full((len(times), 32, 48, 3), 90, np.uint8), times)
    if complete is not None:
        store.mark_finished(complete=complete, lost=None)


def test_streams_written_elsewhere_read_the_same_in_lucy_streams_and_the_api(tmp_path: Path, run_lucy) -> None:
    settings = load_settings(data=tmp_path / "data")
    frames = open_frames(settings)
    _store(frames, "porch", live=True)
    _store(frames, "clip", live=False, complete=True)
    _store(frames, "half", live=False, complete=False)
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)

    def cli() -> dict[str, str]:
        done = run_lucy("streams", "--json", "--data", str(settings.data))
        assert done.returncode == 0, done.stderr
        return {row["stream"]: row["state"] for row in json.loads(done.stdout)}

    def api() -> dict[str, str]:
        return {status["name"]: status["state"] for status in manager.statuses()}

    def metrics() -> dict[str, str]:
        return {sample.stream: sample.state for sample in manager.figures()}

    # held as `lucy ingest` holds them while it writes (the CLI is another process: it sees the locks)
    with stream_lock(settings.data, "porch"), stream_lock(settings.data, "half"):
        writing = {"porch": "recording", "half": "catching_up", "clip": "finished"}
        assert cli() == writing and api() == writing and metrics() == writing
    # what the writer tells in its lock's record: a live source down (being reconnected), a file paced
    with stream_lock(settings.data, "porch") as porch, stream_lock(settings.data, "half") as half:
        porch.tell(live=True, paced=False, down=True)
        half.tell(live=False, paced=True, down=False)
        told = {"porch": "reconnecting", "half": "recording", "clip": "finished"}
        assert cli() == told and api() == told and metrics() == told
        porch.tell(live=True, paced=False, down=False)  # back
        assert cli()["porch"] == api()["porch"] == "recording"
    ended = {"porch": "stopped", "half": "stopped", "clip": "finished"}
    assert cli() == ended and api() == ended and metrics() == ended
    table = run_lucy("streams", "--data", str(settings.data)).stdout
    assert "stopped" in table and "finished" in table and " live " not in table and "complete" not in table


class _Reading:
    """A stream worker that has started reading its source (a file) and reads until told to stop."""

    pid = None  # no process of its own

    def __init__(self, spec: StreamSpec, settings: object, stores: object = None) -> None:
        self.spec = spec
        self._stop = threading.Event()

    def messages(self):
        yield StreamProgress(live=False, ingest=IngestProgress(committed=4, media_start=0.0, ingested_until=2.0))
        yield StateChange(StreamState.RECORDING)
        self._stop.wait(30)
        yield RunEnd(StreamState.STOPPED)
        yield WorkerExit(0)

    def stop(self) -> None:
        self._stop.set()


@pytest.mark.parametrize("realtime, expected", [(False, StreamState.CATCHING_UP), (True, StreamState.RECORDING)])
def test_a_file_the_server_reads_is_catching_up_unless_paced(tmp_path: Path, realtime: bool,
                                                             expected: StreamState) -> None:
    video = tmp_path / "v.mp4"
    video.write_bytes(b"only the path is checked here")
    settings = load_settings(data=tmp_path / "data")
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)
    manager.stream_type = type("ReadingStream", (ManagedStream,), {"worker_type": _Reading})
    stream = manager.add("cam", str(video), realtime=realtime)
    try:
        deadline = time.monotonic() + 10
        while stream.state is StreamState.STARTING and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stream.state is expected and stream.status()["state"] == expected.value
    finally:
        stream.stop(10)
    assert stream.state is StreamState.STOPPED


class _Dropping(_Reading):
    """A stream worker whose live source delivers frames, then drops (as the ingest reports it: ``down``)."""

    def messages(self):
        frames = IngestProgress(frames_decoded=8, committed=8, media_start=0.0, ingested_until=4.0)
        yield StreamProgress(live=True, ingest=frames)
        yield StateChange(StreamState.RECORDING)
        yield StreamProgress(live=True, ingest=dataclasses.replace(frames, down=True))
        self._stop.wait(30)
        yield RunEnd(StreamState.STOPPED)
        yield WorkerExit(0)


def test_a_live_source_that_drops_is_reconnecting_as_soon_as_the_worker_says_so(tmp_path: Path) -> None:
    """Not only once its frames have stopped for a while: here that while (3 commit intervals) is three minutes."""
    settings = load_settings(data=tmp_path / "data", **{"ingest.commit_every_seconds": 60})
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)
    manager.stream_type = type("DroppingStream", (ManagedStream,), {"worker_type": _Dropping})
    stream = manager.add("door", "rtsp://127.0.0.1:9/x")
    try:
        deadline = time.monotonic() + 10
        while not stream.progress.ingest.down and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stream.progress.ingest.down
        assert stream.state is StreamState.RECONNECTING and stream.status()["state"] == "reconnecting"
    finally:
        stream.stop(10)
    assert stream.state is StreamState.STOPPED
