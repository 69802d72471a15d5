"""`lucy ingest` on a full disk: one ``lucy: error:`` line that says so, what was kept and that a rerun resumes; a
non-zero exit; no traceback. The disk fills in a child process (the real CLI) where a write of the frame store or of
the memory store fails as a full disk makes it fail, and on a real tiny tmpfs when this machine lets us mount one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from lucy.errors import StoreError, is_disk_full
from lucy.ingest import ZarrFrameStore
from lucy.synth import PALETTE, Scene, write_video
from lucy.testing import child_env

# Run `lucy ingest` with one store's writes failing as on a full disk: the frame store's after its first few
# appends (an OSError raised through zarr), or the memory store's (a real SQLITE_FULL from SQLite).
_CHILD = textwrap.dedent("""
    import errno, sqlite3, sys
    from lucy.cli.app import main
    from lucy.ingest.zarr_store import ZarrFrameStore
    from lucy.memory.sqlite_store import SQLiteMemoryStore

    which, argv = sys.argv[1], sys.argv[2:]
    if which == "frames":
        append, calls = ZarrFrameStore.append, [0]

        def full_append(self, frames, times):
            calls[0] += 1
            if calls[0] > 3:
                raise OSError(errno.ENOSPC, "No space left on device")
            return append(self, frames, times)

        ZarrFrameStore.append = full_append
    else:
        def sqlite_full():
            db = sqlite3.connect(":memory:")
            db.execute("PRAGMA max_page_count = 2")
            db.execute("CREATE TABLE t (x)")
            try:
                while True:
                    db.execute("INSERT INTO t VALUES (?)", ("x" * 1000,))
            except sqlite3.OperationalError as err:
                return err

        def full_add(self, nodes):
            raise sqlite_full()

        SQLiteMemoryStore._add_nodes = full_add
    sys.exit(main(argv))
""")


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("full-disk")
    return write_video(d / "v.mp4", duration=130, fps=4, width=160, height=90,
                       scenes=[Scene(0, 65, PALETTE["red"]), Scene(65, 130, PALETTE["blue"])])


def _env() -> dict[str, str]:
    env = child_env()
    env.update({"LUCY_INGEST__FRAME_WIDTH": "160", "LUCY_INGEST__FRAME_HEIGHT": "90"})
    return env


def _ingest(*args: str, which: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", _CHILD, which] if which else [sys.executable, "-m", "lucy"]
    return subprocess.run([*command, "ingest", *args], capture_output=True, text=True, env=_env(), timeout=300)


def _assert_full_disk_line(proc: subprocess.CompletedProcess[str], data: Path, *fragments: str) -> str:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    said = [line for line in proc.stderr.splitlines() if not line.startswith("cam: ingest ")]  # progress lines
    lines = [line for line in said if line.startswith("lucy: error: ")]
    assert len(lines) == 1 and len(said) == 1, proc.stderr
    line = lines[0]
    for fragment in (f"the disk of the data directory {data} is full", "run the same command again",
                     "it resumes", *fragments):
        assert fragment in line, line
    return line


def test_a_full_disk_under_the_frame_store_ends_with_one_line(tmp_path, video):
    data = tmp_path / "data"
    proc = _ingest(str(video), "--stream", "cam", "--data", str(data), "--captioner", "none", which="frames")
    frames = ZarrFrameStore.open(data, "cam").info().frames
    assert frames > 0
    _assert_full_disk_line(proc, data, f"{frames} frames up to", "no coarse captions yet")

    again = _ingest(str(video), "--stream", "cam", "--data", str(data), "--captioner", "none")  # room again
    assert again.returncode == 0, again.stderr
    assert ZarrFrameStore.open(data, "cam").info().frames == 260  # resumed to the end: 130 s at 2 fps


def test_a_full_disk_under_the_memory_store_ends_with_one_line(tmp_path, video):
    data = tmp_path / "data"
    proc = _ingest(str(video), "--stream", "cam", "--data", str(data), "--captioner", "pixels", which="memory")
    _assert_full_disk_line(proc, data, "frames up to", "no coarse captions yet")


def test_other_errors_are_not_called_a_full_disk():
    assert not is_disk_full(OSError(13, "Permission denied"))
    assert not is_disk_full(StoreError("bad stream name"))
    try:
        try:
            raise OSError(28, "No space left on device")
        except OSError:
            raise StoreError("cannot write the frames") from None  # the cause is still known
    except StoreError as err:
        assert is_disk_full(err)


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A real 1 MB tmpfs (root only): skipped where this machine does not let the test mount one."""
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_real_full_disk_keeps_what_was_stored_and_resumes(tiny_disk, video):
    data = tiny_disk / "data"
    proc = _ingest(str(video), "--stream", "cam", "--data", str(data), "--captioner", "none")
    frames = ZarrFrameStore.open(data, "cam").info().frames
    assert 0 < frames < 260
    _assert_full_disk_line(proc, data, f"{frames} frames up to")
    subprocess.run(["mount", "-o", "remount,size=16m", str(tiny_disk)], check=True)
    again = _ingest(str(video), "--stream", "cam", "--data", str(data), "--captioner", "none")
    assert again.returncode == 0, again.stderr
    store = ZarrFrameStore.open(data, "cam")
    assert store.info().frames == 260 and len(store.read(0, 1e9)) == 260
