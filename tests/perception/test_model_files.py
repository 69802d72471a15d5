"""scripts/setup.sh's check of the shipped model files: every line of SHA256SUMS, and a line for every .onnx file.

The check is the ``check_models`` function of setup.sh itself, cut out and run on a copy of lucy/perception/models, so
that what is tested is what set-up runs (the rest of setup.sh installs packages)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "lucy" / "perception" / "models"


def check(root: Path) -> subprocess.CompletedProcess[str]:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    block = re.search(r"^check_models\(\) \(.*?^fi$", setup, re.S | re.M)
    assert block, "scripts/setup.sh has no check_models block"
    script = f"set -euo pipefail\ncd {root}\n{block.group(0)}\necho checked\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(MODELS, tmp_path / "lucy" / "perception" / "models")
    return tmp_path / "lucy" / "perception" / "models"


def test_the_shipped_files_pass(copy: Path) -> None:
    result = check(copy.parents[2])
    assert result.returncode == 0 and "checked" in result.stdout, result.stderr


def test_every_line_is_checked(copy: Path) -> None:
    lines = (copy / "SHA256SUMS").read_text().splitlines()
    assert len(lines) >= 2
    last = lines[-1].split("  ")[1]
    (copy / last).write_bytes((copy / last).read_bytes()[:-1])  # the last line's file damaged
    result = check(copy.parents[2])
    assert result.returncode == 1 and f"{last}: FAILED" in result.stderr


def test_a_file_without_a_line_or_a_garbled_line_fails(copy: Path) -> None:
    (copy / "extra.onnx").write_bytes(b"x")
    result = check(copy.parents[2])
    assert result.returncode == 1 and "extra.onnx has no line in SHA256SUMS" in result.stderr
    (copy / "extra.onnx").unlink()
    with (copy / "SHA256SUMS").open("a") as sums:
        sums.write("not a checksum line\n")
    result = check(copy.parents[2])
    assert result.returncode == 1 and "improperly formatted" in result.stderr
    (copy / "SHA256SUMS").write_text("")
    result = check(copy.parents[2])
    assert result.returncode == 1 and "SHA256SUMS is missing or empty" in result.stderr
