"""One writer per stream: a second writer (another process, or another ingestor) is refused at once, naming the
first; a writer killed with SIGKILL leaves nothing behind that stops the next one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.ingest.lock import FileLock, Holder, LockHeld, probe, read_holder, read_record, serve_lock, stream_lock
from lucy.synth import write_video
from lucy.testing import child_env
from lucy.testing.waiting import stop_process, wait_for
from lucy.wiring import open_frames


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video(tmp_path_factory.mktemp("videos") / "v.mp4", duration=20, fps=10, width=320, height=240)


def test_a_second_lock_is_refused_with_its_holder(tmp_path: Path) -> None:
    first = stream_lock(tmp_path, "cam", Holder.this_process("lucy test", pid=4321)).acquire()
    with pytest.raises(LockHeld) as refused:
        stream_lock(tmp_path, "cam").acquire()  # flock: two opens conflict inside one process too
    assert str(refused.value) == (f"stream 'cam' is being written by pid 4321 (lucy test) on "
                                  f"{socket.gethostname()}; stop it first")
    assert refused.value.holder is not None and refused.value.holder.pid == 4321
    with pytest.raises(LockHeld):
        probe(stream_lock(tmp_path, "cam"))
    stream_lock(tmp_path, "other").acquire().release()  # other streams are not affected
    first.release()
    assert read_holder(first.path) is None  # a released lock names nobody
    probe(stream_lock(tmp_path, "cam"))  # free now, and the probe does not keep it
    with stream_lock(tmp_path, "cam") as again:
        assert again.held and read_holder(again.path).pid == os.getpid()
    assert not again.held


def test_the_holder_tells_what_it_does_in_its_record(tmp_path: Path) -> None:
    """Facts told beside the holder (for other processes' view of the stream's state), each telling replacing the
    last, the record whole at every moment; a released lock tells nothing."""
    with stream_lock(tmp_path, "cam", Holder.this_process("lucy ingest", pid=4321)) as lock:
        assert read_record(lock.path)["pid"] == 4321 and "down" not in read_record(lock.path)
        lock.tell(live=True, paced=False, down=True)
        assert read_record(lock.path) | {"since": 0} == {"pid": 4321, "host": socket.gethostname(),
                                                          "command": "lucy ingest", "since": 0, "live": True,
                                                          "paced": False, "down": True}
        lock.tell(live=True)  # shorter than before: nothing of the old record is left behind
        assert read_record(lock.path)["live"] is True and "down" not in read_record(lock.path)
        assert read_holder(lock.path).pid == 4321
    assert read_record(lock.path) is None
    with pytest.raises(RuntimeError, match="not held"):
        lock.tell(down=False)


def test_an_ingestor_tells_its_lock_whether_it_paces_a_file(tmp_path: Path, video: Path) -> None:
    settings = load_settings(data=tmp_path / "data")
    told: list[dict] = []

    def look(store: object, stats: object) -> None:
        told.append(read_record(stream_lock(settings.data, "cam").path))

    Ingestor(settings, str(video), "cam", frames=open_frames(settings), realtime=False, on_commit=look).run()
    assert told and all(r["live"] is False and r["paced"] is False and r["down"] is False for r in told), told


def test_the_serve_lock_is_not_a_stream_lock(tmp_path: Path) -> None:
    with (serve_lock(tmp_path), stream_lock(tmp_path, "serve"),  # a stream may be named "serve"
          pytest.raises(LockHeld, match=r"data directory '.*' is being served by pid \d+")):
        serve_lock(tmp_path).acquire()


def test_a_bad_stream_name_never_reaches_the_file_system(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="stream name"):
        stream_lock(tmp_path, "../escape")
    assert not (tmp_path.parent / "escape.lock").exists()


def test_an_ingestor_is_refused_while_another_writes(tmp_path: Path, video: Path) -> None:
    settings = load_settings(data=tmp_path / "data")
    with (FileLock(stream_lock(settings.data, "cam").path, "stream 'cam'",
                   holder=Holder.this_process("lucy serve", pid=99)),
          pytest.raises(LockHeld, match=r"being written by pid 99 \(lucy serve\)")):
        Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run()
    assert not (settings.data / "frames.zarr" / "cam").exists()  # refused before creating the store
    assert Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run().complete


def _ingest(data: Path, video: Path, *args: str) -> subprocess.Popen[str]:
    env = child_env()
    return subprocess.Popen([sys.executable, "-m", "lucy", "ingest", str(video), "--stream", "cam", "--data",
                             str(data), "--captioner", "none", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_a_second_ingest_process_is_refused_and_a_killed_owner_is_taken_over(tmp_path: Path, video: Path,
                                                                             run_lucy) -> None:
    data = tmp_path / "data"
    owner = _ingest(data, video, "--realtime")
    try:
        lock_file = data / "locks" / "cam.lock"
        wait_for(lambda: (h := read_holder(lock_file)) is not None and h.pid == owner.pid, 60,
                 "the first ingest to hold the stream")
        holder = read_holder(lock_file)
        assert holder.command == "lucy ingest" and holder.host == socket.gethostname()
        wait_for(lambda: (data / "frames.zarr" / "cam" / "zarr.json").is_file()
                 and ZarrFrameStore.open(data, "cam").committed() >= 4, 60, "the first ingest to commit frames")

        second = run_lucy("ingest", str(video), "--stream", "cam", "--data", str(data), "--captioner", "none",
                          timeout=60)
        assert second.returncode == 1, second.stderr
        assert (f"lucy: error: stream 'cam' is being written by pid {owner.pid} (lucy ingest) on "
                f"{socket.gethostname()}; stop it first") in second.stderr
        assert owner.poll() is None  # the owner writes on

        os.kill(owner.pid, signal.SIGKILL)  # a crash: no clean-up runs, the kernel drops the lock
        owner.wait(timeout=30)
        before = ZarrFrameStore.open(data, "cam").committed()
        assert 4 <= before < 40
    finally:
        stop_process(owner, signal.SIGKILL)

    third = run_lucy("ingest", str(video), "--stream", "cam", "--data", str(data), "--captioner", "none",
                     "--json", timeout=120)
    assert third.returncode == 0, third.stderr
    times = ZarrFrameStore.open(data, "cam").times()
    assert np.all(np.diff(times) > 0)  # resumed after the last committed frame: never backwards
    assert len(times) == 40 and times[-1] == pytest.approx(19.5, abs=0.11)
    assert read_holder(data / "locks" / "cam.lock") is None


def test_a_holder_is_gone_once_its_process_has_ended() -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert Holder.this_process("lucy serve", pid=int(ended.stdout)).gone()
    assert not Holder.this_process("lucy serve").gone()  # this process
    assert not Holder(pid=int(ended.stdout), host="elsewhere.invalid", command="lucy serve").gone()  # unknowable
