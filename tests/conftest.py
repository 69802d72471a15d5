"""Shared fixtures: generated videos, isolated data directories and a way to run the `lucy` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lucy.config import LucySettings, load_settings


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
