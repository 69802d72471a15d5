"""The stream runtime behind one protocol: the service knows only :class:`lucy.runtime.protocol.StreamRuntime`, the
runtime raises domain errors that only the service turns into HTTP statuses, and the service, the runtime and the
cluster import one another one way only (runtime below both; the service never imports the cluster)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import lucy
from lucy.config import LucySettings, load_settings
from lucy.errors import InvalidStream, StreamConflict, StreamNotFound
from lucy.ingest import FrameStores
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.memory.store import MemoryStore
from lucy.runtime.events import EventBus
from lucy.runtime.protocol import RetentionAges, StreamRuntime
from lucy.runtime.streams import StreamManager
from lucy.service.errors import Conflict, InvalidRequest, NotFound, domain_error, in_band_error
from lucy.wiring import open_frames, open_worker_stores

PACKAGE = Path(lucy.__file__).parent


def _imports(folder: str) -> dict[str, set[str]]:
    """For each file under ``lucy/<folder>``, the ``lucy`` modules it imports (at the top, inside functions, or
    for type checking alike)."""
    out: dict[str, set[str]] = {}
    for path in (PACKAGE / folder).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        out[str(path.relative_to(PACKAGE))] = {n for n in names if n == "lucy" or n.startswith("lucy.")}
    return out


@pytest.mark.parametrize(("folder", "forbidden"), [
    ("service", ("lucy.cluster",)),
    ("runtime", ("lucy.service", "lucy.cluster")),
    ("cluster", ("lucy.service",)),
])
def test_the_service_the_runtime_and_the_cluster_import_one_way(folder: str, forbidden: tuple[str, ...]) -> None:
    wrong = {file: sorted(n for n in names if n.startswith(forbidden))
             for file, names in _imports(folder).items()}
    assert {file: names for file, names in wrong.items() if names} == {}


def test_the_stream_runtime_modules_left_the_service() -> None:
    """No forwarding shims: the registry, worker, messages, manager, status and event bus live in lucy/runtime."""
    for name in ("registry", "worker", "messages", "streams", "status", "events"):
        assert not (PACKAGE / "service" / f"{name}.py").exists()
        assert (PACKAGE / "runtime" / f"{name}.py").exists()


def test_the_runtime_refuses_with_domain_errors(tmp_path: Path) -> None:
    settings = load_settings(data=tmp_path / "data")
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)
    assert isinstance(manager, StreamRuntime)
    with pytest.raises(StreamNotFound):
        manager.require("nowhere")
    with pytest.raises(StreamNotFound):
        manager.status("nowhere")
    with pytest.raises(InvalidStream):
        manager.require("../up")
    with pytest.raises(InvalidStream, match="unknown preset"):
        manager.add("cam", "/x.mp4", preset="no-such-preset")
    with pytest.raises(InvalidStream, match="keep_seconds"):  # the runtime's own ages type, validated
        manager.add("cam", str(_video(tmp_path)), retention=RetentionAges(full_seconds=600.0, keep_seconds=60.0))
    assert manager.names() == []


def _video(tmp_path: Path) -> Path:
    from lucy.synth import write_video

    return write_video(tmp_path / "v.mp4", duration=2, fps=5, width=64, height=48, seed=1)


def test_domain_errors_become_statuses_only_in_the_service() -> None:
    assert isinstance(domain_error(StreamNotFound("no stream named 'x'")), NotFound)
    assert isinstance(domain_error(StreamConflict("already running")), Conflict)
    found = domain_error(InvalidStream("bad name"))
    assert isinstance(found, InvalidRequest) and str(found) == "bad name"
    assert domain_error(ValueError("not ours")) is None
    # An error met after an SSE reply started (a question about a stream removed meanwhile) keeps its status.
    assert in_band_error(StreamNotFound("no stream named 'x'"), "question")[0] == 404


class _Recorded(StreamManager):
    """The local runtime, counting how often the app built one."""

    built: list[LucySettings] = []

    def __init__(self, settings: LucySettings, memory: MemoryStore, bus: EventBus, *,
                 frames: FrameStores | None = None) -> None:
        super().__init__(settings, memory, bus, frames=frames)
        type(self).built.append(settings)


def test_the_app_runs_on_the_runtime_it_is_handed(tmp_path: Path) -> None:
    from lucy.service.app import create_app

    settings = load_settings(data=tmp_path / "data")
    _Recorded.built.clear()
    with TestClient(create_app(settings, runtime=_Recorded), base_url="http://127.0.0.1") as client:
        assert isinstance(client.app.state.svc.manager, _Recorded)  # type: ignore[attr-defined]
        assert client.get("/v1/streams").json() == {"streams": []}
        missing: Any = client.get("/v1/streams/nowhere")
        assert missing.status_code == 404 and "nowhere" in missing.json()["detail"]
        assert client.get("/v1/streams/..%2Fup").status_code in (404, 422)
        bad = client.post("/v1/streams", json={"name": "cam", "source": "/x.mp4", "preset": "no-such-preset"})
        assert bad.status_code == 422 and "unknown preset" in bad.json()["detail"]
        watched = client.get("/v1/streams/nowhere/watches")  # watches of a stream not started yet: 404
        assert watched.status_code == 404
    assert len(_Recorded.built) == 1
