"""Shared fixtures: isolated data directories, a way to run the `lucy` CLI, and the real servers several test
folders use (PostgreSQL, a SeaweedFS S3 server), one each per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lucy.config import LucySettings, load_settings
from lucy.testing.waiting import ServerUnavailable


@pytest.fixture(autouse=True)
def _isolated_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's lucy.toml or LUCY_* variables."""
    for key in list(os.environ):
        if key.startswith("LUCY_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def settings(tmp_path: Path) -> LucySettings:
    return load_settings(data=tmp_path / "data")


def _run_lucy(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}
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
