"""Small helpers for tests and benchmarks that start real servers: a free port, and polling with a deadline."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ServerUnavailable(RuntimeError):
    """A real server a test or benchmark needs could not be installed, found or started (the message says why)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.1,
             tolerate: tuple[type[BaseException], ...] = ()) -> T:
    """Poll ``condition`` until it returns something truthy (returned), or fail after ``timeout`` seconds.

    Exceptions of the ``tolerate`` types (a server still starting, say) count as "not yet"; one raised by the last
    poll is named in the failure. Polling instead of sleeping keeps tests fast on a quiet machine and patient on a
    busy one.
    """
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value, last = condition(), None
        except tolerate as err:
            value, last = None, err  # type: ignore[assignment]
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}"
                                 + (f" (last error: {last!r})" if last else ""))
        time.sleep(interval)


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
    """Signal a child process and wait for it; kill it if it outlives ``timeout``.

    Returns its exit status, or None when it had to be killed.
    """
    if proc.poll() is not None:
        return proc.returncode
    with contextlib.suppress(ProcessLookupError):  # it may have exited just now
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
        return None
