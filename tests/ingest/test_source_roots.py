"""``service.allowed_source_roots`` holds after FFmpeg expands a source: playlists (HLS) and concat lists inside the
roots may only name files inside them, symlinks resolved, both when the API checks a source and when the ingest
opens it (issue 8, item 3)."""

from __future__ import annotations

import functools
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import av
import av.error
import pytest

from lucy.config import load_settings
from lucy.errors import InvalidStream, SourceError
from lucy.ingest import Ingestor, ZarrFrameStore, list_streams, open_source
from lucy.ingest.roots import LOCAL_FILE_OPTIONS, _concat_entries, _ffmpeg_token, _hls_entries, check_local_source
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.runtime.events import EventBus
from lucy.runtime.streams import StreamManager
from lucy.synth import write_video
from lucy.wiring import open_frames, open_worker_stores

SECONDS, FPS = 3.0, 10  # each generated clip: 3 s, so 6 frames at the default 2 fps


def _hls(*segments: str, extra: str = "") -> str:
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:3", "#EXT-X-PLAYLIST-TYPE:VOD", extra]
    for segment in segments:
        lines += [f"#EXTINF:{SECONDS:.1f},", segment]
    return "\n".join([*lines, "#EXT-X-ENDLIST", ""])


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``root/`` (the allowed folder) and ``outside/`` beside it, each with real videos; in the root, lists and
    a symlink that name the outside videos, and lists whose entries all stay inside."""
    base = tmp_path_factory.mktemp("roots")
    root, outside = base / "root", base / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    for folder in (root, outside):
        write_video(folder / "clip.ts", duration=SECONDS, fps=FPS, width=160, height=96)
        write_video(folder / "clip.mp4", duration=SECONDS, fps=FPS, width=160, height=96)
    files = {
        # the three ways in that issue 8 found, and their variants
        "m3u8_absolute.m3u8": _hls(str(outside / "clip.ts")),
        "m3u8_relative.m3u8": _hls("../outside/clip.ts"),
        "m3u8_nested.m3u8": "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=100000\nsub/variant.m3u8\n",
        "sub/variant.m3u8": _hls("../../outside/clip.ts"),
        "m3u8_map.m3u8": _hls("clip.ts", extra=f'#EXT-X-MAP:URI="{outside / "clip.mp4"}"'),
        "m3u8_key.m3u8": _hls("clip.ts", extra=f'#EXT-X-KEY:METHOD=AES-128,URI="{outside / "key.bin"}",IV=0x1'),
        "m3u8_url.m3u8": _hls("http://127.0.0.1:9/clip.ts"),
        "ffconcat_symlink.ffconcat": "ffconcat version 1.0\nfile 'link.mp4'\n",
        "ffconcat_absolute.ffconcat": f"ffconcat version 1.0\nfile '{outside / 'clip.mp4'}'\n",
        "concat_no_header.mp4": f"file {outside / 'clip.mp4'}\n",  # a list by content, whatever its name
        # lists whose entries stay inside
        "inside.m3u8": _hls("clip.ts", "sub/../clip.ts"),
        "inside.ffconcat": "ffconcat version 1.0\n# a comment\nfile 'clip.mp4'\nfile inside_link.mp4\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    os.symlink(outside / "clip.mp4", root / "link.mp4")
    os.symlink(root / "clip.mp4", root / "inside_link.mp4")
    return {"root": root, "outside": outside}


OUTSIDE = [  # (file in the root, the entry the refusal must name)
    ("m3u8_absolute.m3u8", "outside/clip.ts"), ("m3u8_relative.m3u8", "../outside/clip.ts"),
    ("m3u8_nested.m3u8", "../../outside/clip.ts"), ("m3u8_map.m3u8", "outside/clip.mp4"),
    ("m3u8_key.m3u8", "outside/key.bin"), ("m3u8_url.m3u8", "http://127.0.0.1:9/clip.ts"),
    ("ffconcat_symlink.ffconcat", "link.mp4"), ("ffconcat_absolute.ffconcat", "outside/clip.mp4"),
    ("concat_no_header.mp4", "outside/clip.mp4"), ("link.mp4", "link.mp4"),
]


def _settings(tmp_path: Path, roots: list[Path]):
    return load_settings(data=tmp_path / "data", **{"service.allowed_source_roots": [str(r) for r in roots]})


def test_without_roots_ffmpeg_reads_the_outside_file(tmp_path, tree):
    """The hole is real: FFmpeg follows each of these to the video outside the folder."""
    settings = _settings(tmp_path, [])
    for name in ("m3u8_relative.m3u8", "m3u8_nested.m3u8", "ffconcat_symlink.ffconcat", "link.mp4"):
        source = open_source(str(tree["root"] / name), settings.ingest)
        assert sum(1 for _ in source.frames()) == SECONDS * FPS, name


@pytest.mark.parametrize(("name", "entry"), OUTSIDE)
def test_ingest_refuses_what_points_outside_the_roots(tmp_path, tree, name, entry):
    settings = _settings(tmp_path, [tree["root"]])
    path = str(tree["root"] / name)
    with pytest.raises(SourceError) as refused:
        open_source(path, settings.ingest, allowed_roots=settings.service.allowed_source_roots)
    message = str(refused.value)
    assert entry in message and ("outside the directories" in message or "a URL" in message), message
    with pytest.raises(SourceError):  # the ingest takes the roots from the settings, as a stream worker does
        Ingestor(settings, path, "s", frames=open_frames(settings)).run()
    assert list_streams(settings.data) == []


@pytest.mark.parametrize(("name", "entry"), OUTSIDE)
def test_api_check_refuses_what_points_outside_the_roots(tmp_path, tree, name, entry):
    settings = _settings(tmp_path, [tree["root"]])
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)
    with pytest.raises(InvalidStream) as refused:
        manager.check_source(str(tree["root"] / name))
    assert entry in str(refused.value)


@pytest.mark.parametrize("name", ["inside.m3u8", "inside.ffconcat"])
def test_lists_that_stay_inside_are_ingested(tmp_path, tree, name):
    settings = _settings(tmp_path, [tree["root"]])
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)
    source = manager.check_source(str(tree["root"] / name))
    result = Ingestor(settings, source, "s", frames=open_frames(settings)).run()
    assert result.complete and result.lost is None
    assert result.frames == ZarrFrameStore.open(settings.data, "s").info().frames == 2 * SECONDS * 2  # two clips


def test_a_list_changed_after_the_api_check_is_refused_when_opened(tmp_path, tree):
    root = tmp_path / "root"
    root.mkdir()
    write_video(root / "clip.mp4", duration=SECONDS, fps=FPS, width=160, height=96)
    playlist = root / "list.ffconcat"
    playlist.write_text("ffconcat version 1.0\nfile clip.mp4\n")
    settings = _settings(tmp_path, [root])
    manager = StreamManager(settings, SQLiteMemoryStore.for_data(settings), EventBus(), frames=open_frames(settings),
                            worker_stores=open_worker_stores)
    source = manager.check_source(str(playlist))  # accepted
    os.symlink(tree["outside"] / "clip.mp4", root / "swapped.mp4")
    playlist.write_text("ffconcat version 1.0\nfile swapped.mp4\n")  # ... then changed before the worker opens it
    with pytest.raises(SourceError, match="swapped.mp4"):
        Ingestor(settings, source, "s", frames=open_frames(settings)).run()
    assert list_streams(settings.data) == []


def test_refusals_redact_credentials(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "list.m3u8").write_text(_hls("https://user:hunter2@cdn.example/seg.ts?token=s3cret"))
    with pytest.raises(SourceError) as refused:
        check_local_source(root / "list.m3u8", [root])
    assert "hunter2" not in str(refused.value) and "s3cret" not in str(refused.value)
    assert "cdn.example/seg.ts" in str(refused.value)


def test_other_expanding_formats_are_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "cam.sdp").write_text("v=0\no=- 0 0 IN IP4 127.0.0.1\nc=IN IP4 127.0.0.1\nm=video 5004 RTP/AVP 96\n")
    (root / "v.mpd").write_text('<?xml version="1.0"?>\n<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"></MPD>\n')
    (root / "opt.ffconcat").write_text("ffconcat version 1.0\nfile clip.mp4\noption protocol_whitelist http\n")
    (root / "fifo.m3u8").write_text(_hls("pipe"))
    os.mkfifo(root / "pipe")
    id3_tag = b"ID3\x04\x00\x00\x00\x00\x00\x0a" + bytes(10)  # FFmpeg's probe skips ID3 tags
    (root / "tagged.m3u8").write_bytes(id3_tag + _hls("/etc/hostname").encode())
    for name, why in [("cam.sdp", "SDP"), ("v.mpd", "DASH"), ("opt.ffconcat", "'option'"),
                      ("fifo.m3u8", "not a regular file"), ("tagged.m3u8", "/etc/hostname")]:
        with pytest.raises(SourceError, match=why):
            check_local_source(root / name, [root])


def test_list_parsing_follows_ffmpeg():
    assert _ffmpeg_token(r" 'it''s a file.mp4' ") == "its a file.mp4"
    assert _ffmpeg_token(r"a\ b\'c.mp4 trailing") == "a b'c.mp4"
    assert _concat_entries("ffconcat version 1.0\n  file 'x y.mp4'\n#file z.mp4\nduration 3\nfile w.mp4\n",
                           "l") == ["x y.mp4", "w.mp4"]
    playlist = ('#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI="k.bin",IV=0x1\n#EXT-X-MAP:URI=init.mp4\n'
                '#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",URI="audio.m3u8"\n#EXTINF:2,\nseg 1.ts  \n\n#comment\n')
    assert _hls_entries(playlist) == ["k.bin", "init.mp4", "audio.m3u8", "seg 1.ts"]


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_folder(tmp_path):
    folder = tmp_path / "www"
    folder.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_local_file_options_forbid_network_protocols(http_folder, tmp_path, monkeypatch):
    """The second wall: FFmpeg given LOCAL_FILE_OPTIONS opens no network resource, and local files get them."""
    folder, base = http_folder
    write_video(folder / "v.mkv", duration=1.0, fps=10, width=160, height=96)
    av.open(f"{base}/v.mkv").close()  # reachable...
    with pytest.raises(av.error.FFmpegError):  # ... but not through the whitelist
        av.open(f"{base}/v.mkv", options=LOCAL_FILE_OPTIONS)

    video = write_video(tmp_path / "v.mp4", duration=1.0, fps=10, width=160, height=96)
    opened: list[dict[str, str]] = []
    real_open = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: opened.append(k.get("options", {})) or real_open(*a, **k))
    open_source(str(video), load_settings().ingest, allowed_roots=[tmp_path])
    open_source(str(video), load_settings().ingest)
    assert opened[0]["protocol_whitelist"] == "file,crypto,data"
    assert "protocol_whitelist" not in opened[1]  # no roots: a local playlist may name what it likes
