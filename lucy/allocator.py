"""The memory allocator of a long-running server: jemalloc when it is installed, glibc's malloc otherwise.

Why: a ``lucy serve`` process answers questions on many threads (the question runner, the captioners' pools, the
HTTP server), and each thread's native allocations (OCR and embedding runtimes, image codecs, SQLite) land in
glibc's per-thread arenas, which keep the freed memory fragmented instead of giving it back. Measured with
``bench/soak.py --memory-budget`` on stored streams, the server grew from 709 MiB after warm-up to 1002 MiB over 300
distinct questions with glibc while its Python heap (tracemalloc) stayed flat; with jemalloc it stayed at its warm-up
figure. jemalloc is chosen the only way a process can choose its allocator: preloaded before the interpreter starts,
so the command re-executes itself once with ``LD_PRELOAD`` set. The stream workers it spawns inherit it.

Only the standard library here: this runs before anything else is imported.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

# Where Debian's libjemalloc2 (and most distributions' packages) put the library.
JEMALLOC_PATHS = ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                  "/usr/lib64/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2", "/usr/local/lib/libjemalloc.so.2")
_MARK = "LUCY_ALLOCATOR_CHOSEN"  # set on the re-executed process: choose once, never loop


def jemalloc_conf() -> str:
    """jemalloc's options for a Lucy process, unless ``MALLOC_CONF`` says otherwise: one arena per CPU (jemalloc's
    default is four per CPU, and each arena keeps freed pages of its own) and freed pages handed back after a second
    instead of ten. Measured with a server's app in-process on two stored streams, 250 distinct questions: 533 MiB
    after warm-up instead of 596, and the same growth after it (session 39's note; bench/soak.py --memory-budget
    for a live server)."""
    return f"narenas:{max(2, os.cpu_count() or 2)},dirty_decay_ms:1000,muzzy_decay_ms:0"


def jemalloc_path() -> str | None:
    """The installed jemalloc library, or None."""
    return next((p for p in JEMALLOC_PATHS if Path(p).is_file()), None)


def in_use() -> str:
    """The allocator this process runs on: "jemalloc" when the library is mapped, else "system"."""
    try:
        maps = Path("/proc/self/maps").read_text(errors="replace")
    except OSError:
        return "system"
    return "jemalloc" if "libjemalloc" in maps else "system"


def choose(allocator: str, argv: list[str] | None = None) -> None:
    """Re-execute this command on jemalloc when ``allocator`` is "jemalloc", the library is installed and not in
    use yet; otherwise return (and say once why not, when jemalloc was asked for and is missing). Call it before
    any thread starts: ``execv`` keeps the process id, so a supervisor watching it sees one process."""
    if allocator != "jemalloc" or os.environ.get(_MARK) or in_use() == "jemalloc" or sys.platform != "linux":
        return
    path = jemalloc_path()
    if path is None:
        log.warning("jemalloc is not installed (Debian: apt install libjemalloc2); the server runs on the system "
                    "allocator, whose memory grows with the questions it answers (service.allocator = 'system' "
                    "silences this)")
        return
    env = dict(os.environ)
    env[_MARK] = "1"
    env["LD_PRELOAD"] = " ".join(p for p in (path, env.get("LD_PRELOAD", "")) if p)
    env.setdefault("MALLOC_CONF", jemalloc_conf())  # the stream workers inherit it
    args = argv if argv is not None else [sys.executable, "-m", "lucy", *sys.argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(args[0], args, env)
