"""The ruff rule set pinned in pyproject.toml holds for the whole tree: a finding fails the suite (and the fast lane),
so a style slip shows where the change is made, not in a later clean-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.fast_lane  # ruff is a short child process, not a service: this belongs to the inner loop


def test_ruff_finds_nothing() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           "lucy", "tests", "bench"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          check=False)
    assert done.returncode == 0, f"ruff found problems (rules: [tool.ruff.lint] in pyproject.toml):\n{done.stdout}" \
                                 f"{done.stderr}"


def test_ruff_reads_the_pinned_rule_set(tmp_path: Path) -> None:
    """The check above means something: with this tree's configuration ruff does report a known violation."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x):\n    try:\n        return x\n    except:\n        return None\n")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           "--config", str(ROOT / "pyproject.toml"), str(bad)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1
    for code in ("F401", "E722"):
        assert code in done.stdout
