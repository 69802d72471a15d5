"""How to run this ``lucy`` again from a shell: the hints that the CLI and the demo print name the very program
that runs, even when its virtual environment is not activated. Below the entry points (``lucy.cli``, the demo),
so that each can print them without importing the other."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path


def lucy_command() -> str:
    """How to run this ``lucy`` from a shell that has not activated its virtual environment: ``lucy`` when that
    name on PATH is this very program, else its full path (or ``python -m lucy``)."""
    argv0 = Path(sys.argv[0])
    script = argv0.absolute() if argv0.name == "lucy" and argv0.is_file() else Path(sys.executable).with_name("lucy")
    if not script.is_file():
        return f"{shlex.quote(sys.executable)} -m lucy"
    on_path = shutil.which("lucy")
    if on_path is not None and Path(on_path).resolve() == script.resolve():
        return "lucy"
    return shlex.quote(str(script))
