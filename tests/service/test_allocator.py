"""A server and its stream workers run on jemalloc (glibc's per-thread arenas let a long-running server's memory
grow with every question: lucy/allocator.py), unless ``service.allocator = "system"``; the choice re-executes the
command once, keeping its process id."""

from __future__ import annotations

from pathlib import Path

from lucy.allocator import jemalloc_conf, jemalloc_path
from lucy.testing.waiting import wait_for


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text(errors="replace")


def test_the_server_and_its_workers_run_on_jemalloc(lucy_server, videos):
    assert jemalloc_path() is not None, "scripts/setup.sh installs libjemalloc2"
    server = lucy_server(service={"allowed_source_roots": [str(videos["a"].parent)]})
    assert "libjemalloc" in _maps(server.proc.pid)  # the same process the harness started: re-executed in place
    with server.client() as c:
        r = c.post("/v1/streams", json={"name": "cam", "source": str(videos["a"]), "realtime": True})
        assert r.status_code == 201, r.text
        pid = wait_for(lambda: c.get("/v1/streams/cam").json().get("worker_pid"), 60, "a stream worker")
    assert "libjemalloc" in _maps(pid)
    for process in (server.proc.pid, pid):  # with Lucy's options (fewer arenas, freed pages handed back sooner)
        environ = Path(f"/proc/{process}/environ").read_bytes().split(b"\0")
        assert f"MALLOC_CONF={jemalloc_conf()}".encode() in environ
    assert "allocator jemalloc" in server.log() and "jemalloc is not installed" not in server.log()


def test_the_system_allocator_is_kept_when_asked_for(lucy_server):
    server = lucy_server(service={"allocator": "system"})
    assert "libjemalloc" not in _maps(server.proc.pid) and "allocator system" in server.log()
