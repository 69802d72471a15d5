"""Each stream ingests in a worker process of its own: at low priority, restarted alone when killed, ending with
the server."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lucy.config import load_settings
from lucy.ingest import ZarrFrameStore
from lucy.ingest.lock import LOCKS_DIR, Holder, read_holder, stream_lock
from lucy.metrics import CaptionCall, StreamProgress
from lucy.runtime.messages import BusEvent, RunEnd, StateChange, StreamState
from lucy.runtime.registry import StreamSpec
from lucy.runtime.streams import RestartBackoff
from lucy.runtime.worker import StreamRun, _Pipe
from lucy.testing.waiting import free_port
from lucy.wiring import open_worker_stores
from tests.service.conftest import LucyServer, wait_for


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (index 0 is the state), or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return text[text.rindex(")") + 2:].split()


def _gone(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is None or stat[0] in ("Z", "X")  # exited (a zombie waits for a reaper that may never come)


def test_restart_waits_double_to_their_cap_and_start_over_after_a_healthy_run() -> None:
    backoff = RestartBackoff(1.0, 60.0)
    assert [backoff.next(ran_seconds=0.5) for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff.next(ran_seconds=60.0) == 1  # it had run healthily
    assert backoff.next(ran_seconds=3.0) == 2


def test_a_worker_reports_in_typed_messages(tmp_path: Path, videos: dict[str, Path]) -> None:
    """The worker's side of the pipe, in this process: typed messages only, each state just after the progress
    record that goes with it, and a file's end told with every span counted (its last, partial one too)."""
    dead = f"http://127.0.0.1:{free_port()}/v1"  # the captioner is down: nothing listens there
    settings = load_settings(data=tmp_path / "data", **{
        "captioner.backend": "openai", "captioner.openai.base_url": dead, "captioner.openai.max_retries": 0,
        "memory.retry_initial_seconds": 0.05, "memory.retry_max_seconds": 0.2})
    spec = StreamSpec(name="street", source=str(videos["a"]), preset=settings.preset, captioner="openai")
    sent: list[object] = []

    class Connection:
        def send(self, message: object) -> None:
            sent.append(message)
            # Once the file has ended and the captioner was tried, stop: the captions would wait for it forever.
            if StateChange(StreamState.FINISHED) in sent and any(isinstance(m, CaptionCall) for m in sent):
                threading.Thread(target=run.stop).start()

    run = StreamRun(spec, settings, _Pipe(Connection()), open_worker_stores)  # type: ignore[arg-type]
    end = run.run()
    assert end == RunEnd(StreamState.STOPPED)  # stopped while its captions were still pending
    assert all(isinstance(m, StreamProgress | CaptionCall | BusEvent | StateChange) for m in sent)
    states = [(i, m.state) for i, m in enumerate(sent) if isinstance(m, StateChange)]
    assert [state for _, state in states] == [StreamState.RECORDING, StreamState.FINISHED]
    for i, _ in states:
        assert isinstance(sent[i - 1], StreamProgress)
    at_end = sent[states[1][0] - 1]
    assert isinstance(at_end, StreamProgress) and at_end.ingest.ingested_until > 149
    assert at_end.caption is not None and at_end.caption.pending == 3 and at_end.caption.captioned_until == 0
    calls = [m for m in sent if isinstance(m, CaptionCall)]
    assert calls and not any(call.ok for call in calls)


def test_a_killed_worker_is_restarted_alone(lucy_server: Callable[..., LucyServer], videos: dict[str, Path]) -> None:
    server = lucy_server(service={"ingest_nice": 10})
    with server.client() as c:
        for name, video in (("doomed", videos["a"]), ("steady", videos["short"])):
            c.post("/v1/streams", json={"name": name, "source": str(video), "realtime": True}).raise_for_status()
        doomed = wait_for(lambda: (s := server.stream("doomed"))["state"] == "recording" and s["worker_pid"] and s,
                          60, "the doomed stream to run")
        pid = doomed["worker_pid"]
        assert pid != server.proc.pid and pid != server.stream("steady")["worker_pid"] and doomed["restarts"] == 0
        # Forked from the server's fork server (one process that imported the worker's modules once), not spawned
        # afresh: both workers have it as their parent, whose parent is the server. The stream's writer lock names
        # the server, the process to stop, not the fork server.
        steady = wait_for(lambda: server.stream("steady")["worker_pid"], 60, "the steady stream's worker")
        parents = {int(stat[1]) for stat in (_proc_stat(pid), _proc_stat(steady)) if stat is not None}
        assert len(parents) == 1 and server.proc.pid not in parents
        (fork_server,) = parents
        assert int(_proc_stat(fork_server)[1]) == server.proc.pid
        assert "forkserver" in Path(f"/proc/{fork_server}/cmdline").read_text()
        holder = read_holder(Path(server.data) / LOCKS_DIR / "doomed.lock")
        assert holder is not None and holder.pid == server.proc.pid
        stat = _proc_stat(pid)
        assert stat is not None and int(stat[16]) == 10  # niceness: field 19 of /proc/PID/stat
        if hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE

        os.kill(pid, signal.SIGKILL)  # as the OS's OOM killer, or a decoder crashing in native code, would end it
        back = wait_for(lambda: (s := server.stream("doomed"))["state"] == "recording"
                        and s["worker_pid"] not in (None, pid) and s, 60, "the worker to be restarted")
        assert back["restarts"] == 1 and back["error"] is None
        assert "stream doomed: its worker process died (exit code -9); restarting it in 1 s" in server.log()
        assert c.get("/healthz").status_code == 200
        metrics = c.get("/metrics").text
        assert 'lucy_stream_worker_restarts_total{stream="doomed"} 1.0' in metrics
        assert 'lucy_stream_worker_restarts_total{stream="steady"} 0.0' in metrics

        # The new worker resumed after the last committed frame: stored times never run backwards.
        frames = back["frames"]
        wait_for(lambda: server.stream("doomed")["frames"] >= frames + 4, 60, "the restarted worker to store frames")
        times = ZarrFrameStore.open(server.data, "doomed").times()
        assert len(times) >= frames + 4 and np.all(np.diff(times) > 0)
        server.wait_captioned("steady", timeout=120)  # the other stream never noticed
        assert server.stream("steady")["restarts"] == 0

        # Asked to stop, it stops for good (restarts only replace a worker that died on its own).
        stopped = c.delete("/v1/streams/doomed").json()
        assert stopped["state"] == "stopped" and stopped["restarts"] == 1 and stopped["worker_pid"] is None


def test_a_worker_that_ends_its_run_is_not_restarted(lucy_server: Callable[..., LucyServer], tmp_path: Path) -> None:
    server = lucy_server(service={"worker_restart_initial_seconds": 0.2})
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42 and then nothing a decoder could use" * 8)
    with server.client() as c:
        c.post("/v1/streams", json={"name": "broken", "source": str(broken)}).raise_for_status()
        failed = wait_for(lambda: (s := server.stream("broken"))["state"] == "failed" and s, 60, "the stream to fail")
    assert failed["error"] and "worker process died" not in failed["error"]
    time.sleep(1.0)  # five restart waits
    again = server.stream("broken")
    assert again["state"] == "failed" and again["restarts"] == 0 and again["worker_pid"] is None


def test_workers_end_with_the_server(lucy_server: Callable[..., LucyServer], videos: dict[str, Path]) -> None:
    server = lucy_server()
    with server.client() as c:
        c.post("/v1/streams", json={"name": "paced", "source": str(videos["a"]), "realtime": True}).raise_for_status()
    pid = wait_for(lambda: server.stream("paced")["worker_pid"], 60, "the stream's worker")
    wait_for(lambda: server.stream("paced")["state"] == "recording", 60, "the stream to run")
    dead_server = server.proc.pid
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL  # no clean shutdown: the worker sees its pipe close
    wait_for(lambda: _gone(pid), 30, "the orphaned worker to exit")

    # A server started again at once may find the orphan still writing: it waits for it, then resumes the stream
    # (the orphan is played here by a lock that names the killed server, released after a while).
    orphan = stream_lock(server.data, "paced", Holder.this_process("lucy serve, stream worker 1", pid=dead_server))
    orphan.acquire()
    threading.Timer(3.0, orphan.release).start()
    server.start()
    assert not orphan.held
    resumed = wait_for(lambda: (s := server.stream("paced"))["state"] == "recording" and s, 60, "the stream to resume")
    assert resumed["error"] is None and resumed["worker_pid"] not in (None, pid)
    frames = resumed["frames"]
    wait_for(lambda: server.stream("paced")["frames"] >= frames + 4, 60, "the resumed stream to store frames")
    assert np.all(np.diff(ZarrFrameStore.open(server.data, "paced").times()) > 0)
