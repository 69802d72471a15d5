"""``ingest.max_source_pixels``: a source with huge pictures is refused when it opens, before FFmpeg decodes (and
allocates) a single picture (issue 8, item 10: a 16000x16000 PNG drove one ingest to 932 MB)."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from lucy.config import load_settings
from lucy.errors import SourceError
from lucy.ingest import Ingestor, list_streams, open_source
from lucy.ingest.source import check_picture_size
from lucy.ingest.zarr_store import frames_root
from lucy.synth import write_video
from lucy.wiring import open_frames


def write_png(path: Path, width: int, height: int) -> Path:
    """A black RGB PNG of any size, written a row at a time (a 12000x12000 one is 0.4 MB on disk, and making it
    never holds the 432 MB picture in memory)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    compressor = zlib.compressobj(9)
    row = b"\0" + bytes(3 * width)  # filter byte + pixels
    idat = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path


@pytest.fixture(scope="module")
def big_png(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_png(tmp_path_factory.mktemp("png") / "big.png", 12000, 12000)


def test_huge_image_is_refused_before_decoding(big_png, settings):
    with pytest.raises(SourceError) as refused:
        open_source(str(big_png), settings.ingest)
    message = str(refused.value)
    assert "12000x12000" in message and "ingest.max_source_pixels (40,000,000)" in message, message
    with pytest.raises(SourceError, match="max_source_pixels"):
        Ingestor(settings, str(big_png), "big", frames=open_frames(settings)).run()
    assert list_streams(settings.data) == []


def test_refusal_costs_no_picture_memory(big_png):
    """In a fresh process, the refusal's peak memory stays far below one decoded picture (432 MB of RGB)."""
    script = (
        "import sys\n"
        "from lucy.config import load_settings\n"
        "from lucy.errors import SourceError\n"
        "from lucy.ingest import open_source\n"
        "try:\n"
        "    open_source(sys.argv[1], load_settings().ingest)\n"
        "    print('opened')\n"
        "except SourceError as err:\n"
        "    print(err)\n"
        # VmHWM, not ru_maxrss: the latter keeps the high-water mark of the (forked) test process across exec.
        "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')) // 1024)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(big_png)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    message, peak_mb = proc.stdout.strip().splitlines()
    assert "max_source_pixels" in message
    assert int(peak_mb) < 250, f"peak RSS {peak_mb} MB"


def test_limit_applies_to_video_files_too(tmp_path):
    video = write_video(tmp_path / "v.mp4", duration=1, fps=10, width=320, height=240)
    small = load_settings(data=tmp_path / "data", **{"ingest.max_source_pixels": 320 * 240 - 1})
    with pytest.raises(SourceError, match=r"320x240 = 76,800 pixels, more than ingest.max_source_pixels \(76,799\)"):
        open_source(str(video), small.ingest)
    enough = load_settings(data=tmp_path / "data", **{"ingest.max_source_pixels": 320 * 240})
    assert Ingestor(enough, str(video), "v", frames=open_frames(enough)).run().complete


def test_image_under_the_limit_is_ingested(tmp_path, settings):
    png = write_png(tmp_path / "small.png", 640, 480)
    result = Ingestor(settings, str(png), "still", frames=open_frames(settings)).run()
    assert result.frames == 1 and result.lost is None


def test_cli_says_what_is_wrong(big_png, tmp_path, run_lucy):
    proc = run_lucy("ingest", str(big_png), "--stream", "big", "--data", str(tmp_path / "d"), "--json")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr
    assert "12000x12000" in lines[0] and "max_source_pixels" in lines[0]
    assert proc.stdout == ""  # no summary: nothing was ingested


def test_setting_is_bounded():
    assert load_settings().ingest.max_source_pixels >= 7680 * 4320  # 8K fits by default
    for bad in (0, 10**12):
        with pytest.raises(ValidationError):
            load_settings(**{"ingest.max_source_pixels": bad})


@pytest.fixture(scope="module")
def big_mjpeg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Motion JPEG of 12000x12000 pictures in Matroska (2 MB: a uniform JPEG compresses tiny). With max_pixels,
    FFmpeg's probe forgot the size the container declares (issue 26: width 0, and FFmpeg's "Invalid argument")."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("mjpeg")
    Image.new("RGB", (12000, 12000), (40, 40, 40)).save(folder / "big.jpg", quality=50)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-framerate", "2", "-loop", "1", "-t", "1", "-i",
                    str(folder / "big.jpg"), "-c:v", "copy", str(folder / "big.mkv")], check=True, timeout=120)
    return folder / "big.mkv"


def test_huge_pictures_a_container_declares_are_refused(big_mjpeg, settings):
    with pytest.raises(SourceError, match=r"12000x12000 = 144,000,000 pixels, more than ingest.max_source_pixels"):
        open_source(str(big_mjpeg), settings.ingest)
    with pytest.raises(SourceError, match="12000x12000"):
        check_picture_size(str(big_mjpeg), settings.ingest)
    with pytest.raises(SourceError, match="max_source_pixels"):
        Ingestor(settings, str(big_mjpeg), "big", frames=open_frames(settings)).run()
    assert list_streams(settings.data) == [] and not (frames_root(settings.data) / "big").exists()
    check_picture_size(str(write_video(big_mjpeg.parent / "v.mp4", duration=1, fps=5)), settings.ingest)  # fine
