"""``python -m lucy.eval BENCHMARK ANNOTATIONS --videos DIR [...]``: the same as ``lucy eval``."""

from __future__ import annotations

import sys

from lucy.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
