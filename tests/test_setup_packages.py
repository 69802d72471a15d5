"""What the README's shell examples run is what set-up installs: each program of a Debian package that an example
calls (``mosquitto_sub``, ``curl`` ...) has its package in scripts/setup.sh's APT_PACKAGES. A user who follows the
README after ``make demo`` has every command it shows (the broker alone, without its clients, was once all of it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHELL_BLOCK = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```", re.DOTALL | re.MULTILINE)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
# What the README runs that is not a Debian package of set-up: Lucy itself and its Makefile, and the optional
# Python packages of its extras (installed with pip, as the README says where it uses them).
NOT_DEBIAN = {"lucy", "make", "ray", "vllm", ".venv/bin/lucy", ".venv/bin/python", "."}


def setup_packages() -> set[str]:
    text = (ROOT / "scripts" / "setup.sh").read_text()
    block = re.search(r"^APT_PACKAGES=\((.*?)^\)", text, re.DOTALL | re.MULTILINE)
    assert block is not None, "scripts/setup.sh has no APT_PACKAGES=( ... )"
    return set(block.group(1).split())


def readme_commands() -> set[str]:
    commands = set()
    for block in SHELL_BLOCK.findall((ROOT / "README.md").read_text()):
        for line in block.splitlines():
            words = line.split("#", 1)[0].split()
            while words and ASSIGNMENT.match(words[0]):  # VAR=value command ...
                words = words[1:]
            if words and not words[0].startswith(("-", "{", "}", "|", "\\")) and not line.startswith((" ", "\t")):
                commands.add(words[0])
    return commands


def test_every_debian_program_the_readme_runs_is_installed_by_setup() -> None:
    if shutil.which("dpkg") is None:
        pytest.skip("not a Debian system: dpkg says which package holds a program")
    packages = setup_packages()
    commands = readme_commands() - NOT_DEBIAN
    assert {"mosquitto_sub", "mosquitto_pub", "curl"} <= commands  # what the README showed when this was written
    missing = {}
    for command in sorted(commands):
        path = shutil.which(command)
        assert path is not None, f"the README runs {command!r}, which is not installed here (set-up should)"
        owner = subprocess.run(["dpkg", "-S", str(Path(path).resolve())], capture_output=True, text=True, check=False)
        package = owner.stdout.split(":", 1)[0].strip() if owner.returncode == 0 else None
        if package is None or package not in packages:
            missing[command] = package
    assert not missing, f"programs the README runs whose package scripts/setup.sh does not install: {missing}"
