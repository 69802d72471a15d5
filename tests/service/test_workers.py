"""Each stream ingests in a worker process of its own: at low priority, failing alone, ending with the server."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

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


def test_a_dead_worker_fails_its_stream_alone(lucy_server: Callable[..., LucyServer],
                                              videos: dict[str, Path]) -> None:
    server = lucy_server(service={"ingest_nice": 10})
    with server.client() as c:
        for name, video in (("doomed", videos["a"]), ("steady", videos["short"])):
            c.post("/v1/streams", json={"name": name, "source": str(video), "realtime": True}).raise_for_status()
        doomed = wait_for(lambda: (s := server.stream("doomed"))["state"] == "running" and s["worker_pid"] and s,
                          60, "the doomed stream to run")
        pid = doomed["worker_pid"]
        assert pid != server.proc.pid and pid != server.stream("steady")["worker_pid"]
        stat = _proc_stat(pid)
        assert stat is not None and int(stat[16]) == 10  # niceness: field 19 of /proc/PID/stat
        if hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE

        os.kill(pid, signal.SIGKILL)  # as a decoder crashing in native code would end it
        failed = wait_for(lambda: (s := server.stream("doomed"))["state"] == "failed" and s, 30, "doomed to fail")
        assert "worker process died" in failed["error"] and failed["worker_pid"] is None
        assert c.get("/healthz").status_code == 200
        server.wait_captioned("steady", timeout=120)  # the other stream never noticed

        # Started again, the stream resumes after its last committed frame and finishes.
        c.post("/v1/streams", json={"name": "doomed", "source": str(videos["a"])}).raise_for_status()
        done = server.wait_captioned("doomed", timeout=180)
        assert done["ingested_until"] >= 149 and done["frames"] > 0


def test_workers_end_with_the_server(lucy_server: Callable[..., LucyServer], videos: dict[str, Path]) -> None:
    server = lucy_server()
    with server.client() as c:
        c.post("/v1/streams", json={"name": "paced", "source": str(videos["a"]), "realtime": True}).raise_for_status()
    pid = wait_for(lambda: server.stream("paced")["worker_pid"], 60, "the stream's worker")
    wait_for(lambda: server.stream("paced")["state"] == "running", 60, "the stream to run")
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL  # no clean shutdown: the worker sees its pipe close
    wait_for(lambda: _gone(pid), 30, "the orphaned worker to exit")
