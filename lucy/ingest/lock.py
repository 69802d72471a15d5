"""One writer per stream, one server per data directory: exclusive OS file locks that name their holder.

A lock is ``flock(LOCK_EX | LOCK_NB)`` on a small file: ``<data>/locks/<stream>.lock`` for a stream's frame
store, ``<data>/serve.lock`` for ``lucy serve``. The kernel drops it when its holder's process ends,
however it ends (``kill -9`` included), so a crashed owner never leaves a stale lock for the next writer to
clear. The file holds the holder's pid, host and command as one JSON line, read by whoever is refused, so that
the refusal can say who to stop; a stream's writer adds what it is doing (:meth:`FileLock.tell`: a live source or a
paced file, down and being reconnected), which other processes read to tell its state (:func:`read_record`).
Lock files are never deleted: unlinking a lock file while another process waits on it would let two processes
each hold a lock on a different inode of the same name.

flock conflicts between two opens of a file even inside one process, so two ingestors of one stream in one
process exclude each other as two processes do.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from lucy.errors import StoreError
from lucy.ingest.frames import check_stream_name

LOCKS_DIR = "locks"
SERVE_LOCK = "serve.lock"


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lock: the process to stop (``pid``), where it runs and what it is."""

    pid: int
    host: str
    command: str
    since: float = 0.0  # Unix time the lock was taken

    @classmethod
    def this_process(cls, command: str | None = None, *, pid: int | None = None) -> Holder:
        return cls(pid=os.getpid() if pid is None else pid, host=socket.gethostname(),
                   command=command or process_command(), since=time.time())

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command}) on {self.host}"

    def gone(self) -> bool:
        """The process named here has ended (known only on this host; a zombie counts as ended). A lock whose
        named process is gone is held by a process it left behind, e.g. the stream worker of a killed server,
        which stops once it notices."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat[stat.rindex(")") + 2:][:1] in ("Z", "X")


def process_command() -> str:
    """What this process is, in a few words: ``lucy ingest`` for the CLI, else the program's name.

    Never the whole command line: a source URL on it may carry credentials.
    """
    argv = sys.argv
    program = Path(argv[0]).name if argv and argv[0] else "python"
    if program in ("lucy", "__main__.py") and len(argv) > 1 and argv[1].isidentifier():
        return f"lucy {argv[1]}"
    return program or "python"


class LockHeld(StoreError):
    """Another writer holds the lock (``holder`` is None when its record could not be read)."""

    def __init__(self, message: str, holder: Holder | None) -> None:
        super().__init__(message)
        self.holder = holder


class FileLock:
    """An exclusive, non-blocking lock on ``path``; a context manager (``with FileLock(...) as lock:``).

    ``what`` names the locked thing in the refusal: ``stream 'cam'`` gives "stream 'cam' is being written by
    pid 1234 (lucy serve) on HOST; stop it first".
    """

    def __init__(self, path: Path, what: str, *, verb: str = "written", holder: Holder | None = None) -> None:
        self.path = Path(path)
        self.what = what
        self.verb = verb
        self.holder = holder
        self._fd: int | None = None
        self._held_by: Holder | None = None  # the holder its record names, while held

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait_seconds: float = 0.0) -> FileLock:
        """Take the lock or raise :class:`LockHeld` (retrying for up to ``wait_seconds``: a :func:`probe`
        holds a free lock for a moment)."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this FileLock")
        fd = _open(self.path)
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise self._refusal() from None
                time.sleep(0.02)
            except BaseException:
                os.close(fd)
                raise
        self._fd = fd
        self._held_by = self.holder or Holder.this_process()
        self.tell()
        return self

    def tell(self, **facts: bool) -> None:
        """Write the holder's record again with ``facts`` beside it (what the holder is doing, for
        :func:`read_record`); the record is written over, then cut to its length, so a reader never finds the file
        empty (a reader that comes in between reads no valid record, as for a lock without one)."""
        if self._fd is None or self._held_by is None:
            raise RuntimeError(f"{self.path} is not held by this FileLock")
        record = (json.dumps({**asdict(self._held_by), **facts}) + "\n").encode()
        try:
            os.pwrite(self._fd, record, 0)
            os.ftruncate(self._fd, len(record))
        except OSError:  # the lock holds without its record; a refusal then names no holder
            pass

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)  # a later refusal must not name a holder that is gone
            except OSError:
                pass
            os.close(fd)  # closing drops the lock

    def _refusal(self) -> LockHeld:
        holder = read_holder(self.path)
        who = holder.describe() if holder is not None else "another process"
        return LockHeld(f"{self.what} is being {self.verb} by {who}; stop it first", holder)

    def __enter__(self) -> FileLock:
        return self if self.held else self.acquire()

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            self.release()


def _open(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise StoreError(f"cannot open the lock file {path}: {err.strerror or err}") from None


def read_holder(path: Path) -> Holder | None:
    """The holder recorded in a lock file (None if it is empty or unreadable)."""
    fields = read_record(path)
    try:
        return None if fields is None else Holder(pid=int(fields["pid"]), host=str(fields["host"]),
                                                  command=str(fields["command"]), since=float(fields.get("since", 0.0)))
    except (ValueError, KeyError, TypeError):
        return None


def read_record(path: Path) -> dict[str, Any] | None:
    """A lock file's record: its holder's fields and what the holder told (:meth:`FileLock.tell`); None if it is
    empty, unreadable or not a record. Meaningful only while the lock is held (:func:`is_held`)."""
    try:
        fields = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return fields if isinstance(fields, dict) else None


def probe(lock: FileLock, wait_seconds: float = 0.0) -> None:
    """Raise :class:`LockHeld` if someone holds ``lock`` now, or still after ``wait_seconds`` (the lock is not
    kept either way).

    Takes and drops the lock at once (an ingestor that starts in that instant retries briefly, see
    :meth:`FileLock.acquire`). The answer may be stale a moment later; the writer's own acquire decides.
    """
    fd = _open(lock.path)
    deadline = time.monotonic() + wait_seconds
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise lock._refusal() from None
                time.sleep(0.05)
    finally:
        os.close(fd)


def is_held(lock: FileLock) -> bool:
    """Whether a process holds ``lock`` now (:func:`probe`, answered rather than raised): how a stream's state
    tells a stream that ``lucy ingest`` writes in another process from one that nobody writes. A lock file that
    does not exist is free (and is not created here); one that cannot be opened counts as free."""
    if not lock.path.exists():
        return False
    try:
        probe(lock)
    except LockHeld:
        return True
    except StoreError:
        return False
    return False


def stream_lock(data: Path, stream: str, holder: Holder | None = None) -> FileLock:
    """The lock that makes its holder the one writer of ``stream``'s frames in ``data``."""
    name = check_stream_name(stream)
    return FileLock(Path(data) / LOCKS_DIR / f"{name}.lock", f"stream {name!r}", holder=holder)


def serve_lock(data: Path, holder: Holder | None = None) -> FileLock:
    """The lock that makes its holder the one server of the data directory ``data`` (beside, not among, the
    stream locks: a stream may be named ``serve``)."""
    return FileLock(Path(data) / SERVE_LOCK, f"data directory {str(data)!r}", verb="served",
                    holder=holder)
