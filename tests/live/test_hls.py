"""HTTP(S)/HLS sources against a real HTTP server (http.server in a thread) serving playlists made by FFmpeg."""

from __future__ import annotations

import functools
import json
import shutil
import ssl
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from lucy.errors import SourceError
from lucy.ingest import Ingestor, ZarrFrameStore, list_streams, open_source
from lucy.ingest.frames import Gap
from lucy.ingest.source import FileSource, LiveSource
from lucy.synth import write_video
from lucy.synth.video import PALETTE, Scene
from lucy.wiring import open_frames

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs the ffmpeg command (Debian: ffmpeg)")


class _Handler(SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, format: str, *args: object) -> None:  # record instead of printing
        self.requests.append(self.path)


def _tls_context(folder: Path) -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate (made by the openssl command) in ``folder/cert.pem``."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate (Debian: openssl)")
    key, cert = folder / "key.pem", folder / "cert.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                           "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                           "-keyout", str(key), "-out", str(cert)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


@pytest.fixture
def http_dir(tmp_path, request):
    """Serve a fresh folder on 127.0.0.1 over HTTP (or HTTPS, with ``indirect`` parameter "https");
    yields ``(folder, base_url, requested_paths)``."""
    scheme = getattr(request, "param", "http")
    folder = tmp_path / "www"
    folder.mkdir()
    requests: list[str] = []
    handler = type("Handler", (_Handler,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    if scheme == "https":
        server.socket = _tls_context(tmp_path).wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"{scheme}://127.0.0.1:{server.server_address[1]}", requests
    server.shutdown()
    server.server_close()


def _ffmpeg(*args: str, timeout: float = 120) -> None:
    proc = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("http_dir", ["http", "https"], indirect=True)
def test_hls_vod_playlist_is_ingested_completely(tmp_path, http_dir, live):
    folder, base, requests = http_dir
    red, blue = PALETTE["red"], PALETTE["blue"]
    video = write_video(tmp_path / "v.mp4", duration=6.0, fps=15, width=320, height=240, gop=15,
                        scenes=[Scene(0, 3, red), Scene(3, 6, blue)])
    _ffmpeg("-i", str(video), "-c", "copy", "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod",
            "-hls_segment_filename", str(folder / "seg%03d.ts"), str(folder / "index.m3u8"))
    segments = sorted(p.name for p in folder.glob("seg*.ts"))
    assert len(segments) >= 4

    settings = live.settings(tmp_path / "data")
    url = f"{base}/index.m3u8"
    if base.startswith("https"):  # credentials in the URL (this server ignores them) must not be kept
        url = url.replace("https://", "https://user:pw-secret@")
        ingest = settings.ingest.model_copy(update={"tls_ca_file": str(tmp_path / "cert.pem")})  # trust it
        settings = settings.model_copy(update={"ingest": ingest})
    source = open_source(url, settings.ingest)
    assert isinstance(source, FileSource)  # a VOD playlist has a duration: a finite source, not a live one
    source.stop()
    result = Ingestor(settings, url, "vod", frames=open_frames(settings)).run()

    store = ZarrFrameStore.open(settings.data, "vod")
    info, times = store.info(), store.times()
    assert result.complete and result.lost is None and info.complete and not info.live
    assert result.frames == info.frames == 12  # 6 s at the live preset's 2 fps
    np.testing.assert_allclose(times, np.arange(12) / 2.0, atol=0.07)
    assert info.source == url.replace("pw-secret", "***") and info.wall_start is None
    assert "pw-secret" not in json.dumps(store.attrs)
    # The frames are the video's: red for the first 3 s, blue after (sampled away from the moving square).
    clip = store.read(0, 10)
    means = clip.frames[:, :120, :, :].reshape(len(clip), -1, 3).mean(axis=1)
    for t, (r, g, b) in zip(clip.times, means, strict=True):
        assert (r > 2 * b) if t < 3 else (b > 2 * r), (t, r, g, b)
    # ... and they came through the HTTP server, every segment of the playlist.
    assert {f"/{name}" for name in segments} <= set(requests)


@pytest.mark.parametrize("http_dir", ["https"], indirect=True)
def test_https_certificates_are_checked(tmp_path, http_dir, live):
    folder, base, requests = http_dir
    write_video(folder / "v.mp4", duration=2.0, fps=10, width=160, height=120)
    url = f"{base}/v.mp4?token=s3cret"
    settings = live.settings(tmp_path / "data")
    with pytest.raises(SourceError) as refused:  # a self-signed certificate nobody said to trust
        open_source(url, settings.ingest)
    assert "tls_ca_file" in str(refused.value) and "s3cret" not in str(refused.value)
    assert requests == []  # refused at the handshake, before any request

    for ingest in (settings.ingest.model_copy(update={"tls_ca_file": str(tmp_path / "cert.pem")}),
                   settings.ingest.model_copy(update={"tls_verify": False})):
        source = open_source(url, ingest)
        assert isinstance(source, FileSource) and source.description == f"{base}/v.mp4?token=***"
        assert sum(1 for item in source.frames() if not isinstance(item, Gap)) == 20
        source.stop()


def test_live_hls_is_followed_until_the_broadcast_ends(tmp_path, http_dir, live):
    folder, base, requests = http_dir
    # A live HLS broadcast of 12 s, written in real time: the playlist grows, then gets #EXT-X-ENDLIST.
    encoder = subprocess.Popen(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi",
         "-i", "testsrc2=size=320x240:rate=15", "-t", "12", "-c:v", "libx264", "-preset", "ultrafast",
         "-tune", "zerolatency", "-g", "15", "-f", "hls", "-hls_time", "1", "-hls_list_size", "0",
         "-hls_segment_filename", str(folder / "live%03d.ts"), str(folder / "index.m3u8")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        playlist = folder / "index.m3u8"
        live.wait_for(lambda: playlist.is_file() and playlist.read_text().count("#EXTINF") >= 3, 60,
                      "the live playlist")
        assert "#EXT-X-ENDLIST" not in playlist.read_text()
        settings = live.settings(tmp_path / "data")
        url = f"{base}/index.m3u8"
        source = open_source(url, settings.ingest)
        assert isinstance(source, LiveSource)  # no duration yet: followed as a live stream
        source.stop()
        result = live.background(Ingestor(settings, url, "hls",
                                          frames=open_frames(settings)).run, "ingest").result(timeout=90)
        assert encoder.wait(timeout=60) == 0, encoder.stderr.read() if encoder.stderr else ""
    finally:
        encoder.kill()
        encoder.wait()

    assert "#EXT-X-ENDLIST" in playlist.read_text()
    store = ZarrFrameStore.open(settings.data, "hls")
    info, times = store.info(), store.times()
    assert result.complete and result.lost is None and result.reconnects == 0
    assert info.live and info.wall_start is not None and info.gaps == []
    # It joined about three segments before the live edge and followed to the end: most of the 12 s.
    assert 12 <= info.frames <= 26 and np.all(np.diff(times) > 0)
    assert 0.3 < np.median(np.diff(times)) < 0.7
    assert f"/{max(p.name for p in folder.glob('live*.ts'))}" in requests  # the last segment too


@pytest.mark.parametrize("path", ["missing.m3u8", "notvideo.m3u8"])
def test_bad_http_sources_give_one_line(tmp_path, http_dir, live, path):
    folder, base, _ = http_dir
    (folder / "notvideo.m3u8").write_text("this is not a playlist\n" * 20)
    run = live.lucy(["ingest", f"{base}/{path}".replace("http://", "http://user:pw-secret@"), "--stream", "s",
                     "--data", str(tmp_path / "data")], tmp_path / "run")
    code = run.finish()
    lines = run.stderr.strip().splitlines()
    assert code != 0 and len(lines) == 1 and lines[0].startswith("lucy: error: "), run.stderr
    assert "user:***@" in lines[0] and "pw-secret" not in run.stdout + run.stderr
    assert list_streams(tmp_path / "data") == []


def test_http_connection_refused_gives_one_line(tmp_path, live):
    url = f"http://127.0.0.1:{live.free_port()}/index.m3u8"
    run = live.lucy(["ingest", url, "--stream", "s", "--data", str(tmp_path / "data"), "--json"], tmp_path / "run")
    code = run.finish()
    lines = run.stderr.strip().splitlines()
    assert code != 0 and len(lines) == 1 and "refused" in lines[0].lower() and "Traceback" not in run.stderr
    assert run.stdout == "" or json.loads(run.stdout)
