"""Shared fixtures: isolated data directories, a way to run the `lucy` CLI, and the real servers several test
folders use (PostgreSQL, a SeaweedFS S3 server), one each per test session (per xdist worker under `make test`).

It also sorts the suite into two lanes: a test that starts servers, browsers, a Ray cluster or child processes is
marked ``services`` here, by the folder it is in, the fixtures it uses or the harnesses its module imports, so that
``make test-fast`` (``-m "not services"``) is the unit and pipeline tests without anyone having to remember a marker.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

# A suite started in the background by a shell without job control (`make test &`, a CI runner's `nohup ... &`) has
# SIGINT ignored, and an ignored signal stays ignored in every child: the tests that press Ctrl-C on a `lucy`
# command would wait for ever. Handled here, it is back to its default in each child the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from lucy.config import LucySettings, load_settings
from lucy.testing import SUITE_ENV, child_env
from lucy.testing.waiting import ServerUnavailable

# Folders whose every test runs real servers (lucy serve, RTSP, mosquitto, PostgreSQL, SeaweedFS, Ray, Chromium).
SERVICE_FOLDERS = frozenset({"service", "live", "cluster"})
# Fixtures (used directly or through other fixtures) that start a server or a child process.
SERVICE_FIXTURES = frozenset({"postgres_server", "postgres_dsn", "weed", "rtsp_available", "mosquitto", "lucy_server",
                              "shared_server", "run_lucy", "live"})
# Harnesses whose name in a test module (imported at the top or inside a function) means its tests start servers or
# child processes themselves.
SERVICE_HARNESSES = re.compile(r"\b(subprocess|ScriptedOpenAIServer|PostgresServer|Weed|LocalCluster|webdriver|"
                               r"_run_lucy|free_port)\b")
TESTS = Path(__file__).resolve().parent
# Files whose tests each run several servers or processes at full tilt (a Ray cluster with PostgreSQL and SeaweedFS,
# many streams and questions at once, a hung captioner beside live streams): under xdist they run one after another
# on one worker, so that two of them never share the two cores and outwait their limits (`--dist loadgroup`); every
# other file is a group of its own, as with `--dist loadfile`.
HEAVY_FILES = frozenset({"service/test_cluster.py", "service/test_isolation.py", "service/test_concurrency.py"})


@dataclass(frozen=True)
class Lane:
    """Where one collected test went (kept before ``-m`` deselects any), for tests/test_lanes.py."""

    nodeid: str
    path: str
    services: bool
    fixtures: tuple[str, ...]
    group: str  # the xdist group (``--dist loadgroup``)


_LANES = pytest.StashKey[list[Lane]]()


@functools.cache
def _module_starts_services(path: Path) -> bool:
    return SERVICE_HARNESSES.search(path.read_text(errors="replace")) is not None


def _starts_services(item: pytest.Item) -> bool:
    path = Path(str(item.fspath)).resolve()
    folder = path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""
    if folder in SERVICE_FOLDERS or SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    return path.suffix == ".py" and _module_starts_services(path)


def _group(item: pytest.Item) -> str:
    """The xdist group of a test: ``heavy`` for :data:`HEAVY_FILES`, else its file (a module's servers start once)."""
    return xdist_group(item.nodeid)


def xdist_group(nodeid: str) -> str:
    """The group of a node id (``tests/<file>::<test>``): ``heavy`` for :data:`HEAVY_FILES`, else its file."""
    relative = nodeid.split("::", 1)[0].removeprefix("tests/")
    return "heavy" if relative in HEAVY_FILES else relative


class FileGroups(LoadScopeScheduling):
    """``--dist loadgroup`` for this suite: each group (:func:`xdist_group`) goes whole to one worker, in collection
    order. xdist's own loadgroup reads ``xdist_group`` marks from a suffix its workers write into the node ids,
    which pytest 9.2 no longer lets a plugin rewrite (every test was scheduled alone, so a module's servers started
    on each worker); this scheduler takes the group from the node id's path instead."""

    def _split_scope(self, nodeid: str) -> str:
        return xdist_group(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> FileGroups | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    # Groups are handed out in collection order (pytest_collection_modifyitems: the heavy group, then files with
    # servers), not xdist's default of the groups with the most tests first, which started parametrised unit files
    # first and left the heavy group for after a minute.
    config.option.loadscopereorder = False
    return FileGroups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``services`` tests, and put the heavy group, then files with such tests first (each file stays in one
    piece): under xdist the long files start early instead of being the last ones left running on one worker."""
    files_with_services: set[str] = set()
    for item in items:
        explicit = item.get_closest_marker("services") or item.get_closest_marker("fast_lane")
        if explicit is None and _starts_services(item):
            item.add_marker(pytest.mark.services)
        if item.get_closest_marker("services") is not None:
            files_with_services.add(str(item.fspath))
    items.sort(key=lambda item: (_group(item) != "heavy", str(item.fspath) not in files_with_services))  # stable
    config.stash[_LANES] = [Lane(item.nodeid, str(item.fspath), item.get_closest_marker("services") is not None,
                                 tuple(getattr(item, "fixturenames", ())), _group(item)) for item in items]


@pytest.fixture
def collected_lanes(request: pytest.FixtureRequest) -> list[Lane]:
    """Every collected test with its lane, in the order the suite runs."""
    return request.config.stash[_LANES]


@pytest.fixture(autouse=True)
def _isolated_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's lucy.toml or LUCY_* variables; the suite's own defaults (lucy.testing.SUITE_ENV:
    no detect stage unless a test turns it on) hold for the test and the children it starts."""
    for key in list(os.environ):
        if key.startswith("LUCY_"):
            monkeypatch.delenv(key)
    for key, value in SUITE_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def settings(tmp_path: Path) -> LucySettings:
    return load_settings(data=tmp_path / "data")


def _run_lucy(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = child_env()
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "lucy", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd)


@pytest.fixture
def run_lucy():
    """Run the real ``lucy`` CLI in a child process: ``run_lucy("streams", "--json", timeout=60)``."""
    return _run_lucy


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the test session, stopped at its end. Fails (never skips) without PostgreSQL."""
    from lucy.testing.postgres import PostgresServer

    root = Path(tempfile.mkdtemp(prefix="lucy-pg-"))
    try:
        server = PostgresServer(root)
        server.start()
    except ServerUnavailable as err:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(str(err), pytrace=False)
    try:
        yield server
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_dsn(postgres_server):
    """The DSN of an empty database of its own on the session's server (dropped afterwards)."""
    dsn = postgres_server.create_database()
    yield dsn
    postgres_server.drop_database(dsn)


@pytest.fixture(scope="session")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One SeaweedFS S3 server (``weed mini``) for the test session. Fails (never skips) without it."""
    from lucy.testing.seaweedfs import Weed

    try:
        server = Weed(tmp_path_factory.mktemp("seaweedfs"))
        server.start()
    except ServerUnavailable as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
