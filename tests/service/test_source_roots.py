"""Through a real ``lucy serve``: playlists, concat lists and symlinks inside ``service.allowed_source_roots`` that
name a video outside are refused (422); a playlist that stays inside is ingested; a password with spaces in a
source URL is shown redacted in the API and the log (issue 8, items 3 and 6)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from lucy.synth import write_video

from .conftest import LucyServer, wait_for


def test_sources_are_checked_after_ffmpeg_would_expand_them(tmp_path: Path,
                                                             lucy_server: Callable[..., LucyServer]) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    secret = write_video(outside / "secret.mp4", duration=3, fps=10, width=160, height=96)
    write_video(root / "clip.ts", duration=3, fps=10, width=160, height=96)
    hls = "#EXTM3U\n#EXT-X-TARGETDURATION:3\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:3.0,\n{}\n#EXT-X-ENDLIST\n"
    (root / "outside.m3u8").write_text(hls.format("../outside/secret.mp4"))
    (root / "outside.ffconcat").write_text("ffconcat version 1.0\nfile 'link.mp4'\n")
    os.symlink(secret, root / "link.mp4")
    (root / "inside.m3u8").write_text(hls.format("clip.ts"))

    server = lucy_server(service={"allowed_source_roots": [str(root)]})
    with server.client(60) as c:
        for name, entry in [("outside.m3u8", "../outside/secret.mp4"), ("outside.ffconcat", "link.mp4"),
                            ("link.mp4", "link.mp4")]:
            r = c.post("/v1/streams", json={"name": "x", "source": str(root / name)})
            assert r.status_code == 422, (name, r.text)
            assert entry in r.text and "allowed_source_roots" in r.text, r.text
        assert c.get("/v1/streams/x").status_code == 404  # nothing was started

        r = c.post("/v1/streams", json={"name": "inside", "source": str(root / "inside.m3u8")})
        assert r.status_code == 201, r.text
    status = server.wait_captioned("inside")
    assert status["frames"] == 6 and status["error"] is None  # 3 s at the live preset's 2 fps


def test_password_with_spaces_is_redacted(lucy_server: Callable[..., LucyServer]) -> None:
    server = lucy_server()
    url = "rtsp://admin:open sesame@127.0.0.1:9/cam?passphrase=letmein"
    with server.client(60) as c:
        r = c.post("/v1/streams", json={"name": "cam", "source": url})
        assert r.status_code == 201, r.text
        shown = wait_for(lambda: (s := c.get("/v1/streams/cam").json())["state"] == "failed" and s, 60,
                         "the unreachable camera to fail")
    text = str(shown) + server.log()
    assert shown["source"] == "rtsp://admin:***@127.0.0.1:9/cam?passphrase=***", shown
    assert "sesame" not in text and "letmein" not in text
