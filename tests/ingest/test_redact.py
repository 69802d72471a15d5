"""Credentials in stream URLs, in the user-info part and in query parameters, never reach output, nor the frame
store's ``zarr.json``."""

from __future__ import annotations

import functools
import json
import logging
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lucy.errors import SourceError, StoreError
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.ingest.source import source_identity, source_matches, split_source_url, stored_source_id
from lucy.ingest.zarr_store import frames_root
from lucy.redaction import redact_source, redact_url, redacting_handler
from lucy.synth import write_video
from lucy.wiring import open_frames


@pytest.mark.parametrize(("url", "shown"), [
    ("rtsp://admin:hunter2@cam.local:554/stream1", "rtsp://admin:***@cam.local:554/stream1"),
    ("rtsp://admin:p@ss/w@rd@cam.local/s", "rtsp://admin:***@cam.local/s"),
    ("rtsp://token@cam.local/s", "rtsp://***@cam.local/s"),
    ("https://cdn.example/live.m3u8?token=abc123&quality=hd", "https://cdn.example/live.m3u8?token=***&quality=hd"),
    ("https://h/x.m3u8?quality=hd&api_key=k1&sig=s2#frag", "https://h/x.m3u8?quality=hd&api_key=***&sig=***#frag"),
    ("https://b.s3.amazonaws.com/v.mp4?X-Amz-Credential=AK%2F1&X-Amz-Signature=ff00",
     "https://b.s3.amazonaws.com/v.mp4?X-Amz-Credential=***&X-Amz-Signature=***"),
    ("rtsp://u:pw@cam/s?user=u&password=pw", "rtsp://u:***@cam/s?user=u&password=***"),
    ("https://h/live.m3u8?channel=7&start=0", "https://h/live.m3u8?channel=7&start=0"),  # nothing secret
    ("/videos/keynote.mp4", "/videos/keynote.mp4"),
    # issue 8: a password holding spaces (FFmpeg sends it as given), a user name too; passphrase= and friends
    ("rtsp://admin:pass word@cam/s", "rtsp://admin:***@cam/s"),
    ("rtsp://admin: lead and trail @cam.local:554/s", "rtsp://admin:***@cam.local:554/s"),
    ("rtsp://my user:pw@cam/s", "rtsp://my user:***@cam/s"),
    ("rtsp://admin:a b@c d@cam/s", "rtsp://admin:***@cam/s"),
    ("https://h/x?passphrase=open%20sesame&q=1", "https://h/x?passphrase=***&q=1"),
    ("https://h/x?access_token=abc&sessionid=s1&passcode=9", "https://h/x?access_token=***&sessionid=***&passcode=***"),
])
def test_credentials_are_hidden(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(f"stream {url} timed out") == f"stream {shown} timed out"


def test_each_url_of_a_line_keeps_its_own_host() -> None:
    line = "moved from rtsp://a:p q@cam1/s to rtsp://b:r s@cam2/s (rtsp://cam3:554/s unchanged)"
    assert redact_url(line) == "moved from rtsp://a:***@cam1/s to rtsp://b:***@cam2/s (rtsp://cam3:554/s unchanged)"


def test_source_ids_hold_no_secret_and_old_stores_still_match() -> None:
    url = "https://cdn.example/live.m3u8?token=s3cret-token"
    held = stored_source_id(url)
    assert "s3cret" not in held and held.startswith("pbkdf2-sha256:")
    assert held != stored_source_id(url)  # salted: equal sources do not even show as equal
    assert source_matches(held, url) and source_matches(held, url.replace("cdn.example", "CDN.example"))
    assert not source_matches(held, url.replace("s3cret", "other"))
    assert not source_matches("pbkdf2-sha256:damaged", url)
    # A store written before identities were hashed holds the plain identity: it still resumes.
    assert source_matches(source_identity(url)[1], url) and not source_matches(source_identity(url)[1], "/v.mp4")


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_base(tmp_path):
    folder = tmp_path / "www"
    folder.mkdir()
    write_video(folder / "v.mkv", duration=2.0, fps=10, width=160, height=96)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_frame_store_keeps_no_secret(settings, http_base) -> None:
    url = f"{http_base}/v.mkv?token=s3cret-token&quality=hd"
    assert Ingestor(settings, url, "cam", frames=open_frames(settings)).run().complete
    zarr_json = frames_root(settings.data) / "cam" / "zarr.json"
    attrs = json.loads(zarr_json.read_text())["attributes"]
    assert "s3cret" not in zarr_json.read_text()
    assert attrs["source"] == f"{http_base}/v.mkv?token=***&quality=hd"
    assert attrs["source_id"].startswith("pbkdf2-sha256:")

    resumed = Ingestor(settings, url, "cam", frames=open_frames(settings)).run()
    assert resumed.new_frames == 0  # the same source resumes (nothing left to read)
    with pytest.raises(StoreError, match="already holds another source"):
        Ingestor(settings, url.replace("s3cret", "other"), "cam", frames=open_frames(settings)).run()

    # A store of the earlier format (the identity in clear) still resumes, and still refuses another source.
    doc = json.loads(zarr_json.read_text())
    doc["attributes"]["source_id"] = source_identity(url)[1]
    zarr_json.write_text(json.dumps(doc))
    assert Ingestor(settings, url, "cam", frames=open_frames(settings)).run().new_frames == 0
    with pytest.raises(StoreError, match="already holds another source"):
        Ingestor(settings, url.replace("s3cret", "other"), "cam", frames=open_frames(settings)).run()
    assert ZarrFrameStore.open(settings.data, "cam").info().frames == 4


def test_cli_error_hides_a_password_with_spaces(tmp_path, run_lucy) -> None:
    proc = run_lucy("ingest", "rtsp://admin:open sesame@127.0.0.1:9/cam?passphrase=letmein", "--stream", "cam",
                    "--data", str(tmp_path / "d"), timeout=60)
    assert proc.returncode != 0 and "rtsp://admin:***@127.0.0.1:9/cam?passphrase=***" in proc.stderr
    assert "sesame" not in proc.stderr + proc.stdout and "letmein" not in proc.stderr + proc.stdout


# issue 26: a password holding '#', '/' or '?' cut the URL where urllib and FFmpeg stop reading the user info, and
# urllib's own message ("Port could not be cast to integer value as 'pa'") carried the password's start.
@pytest.mark.parametrize("url", [
    "rtsp://admin:Zq9#Wk7@cam.local/s", "rtsp://admin:Zq9/Wk7@cam.local/s", "rtsp://admin:Zq9?Wk7@cam.local/s",
    "rtsp://admin:1234#Wk7@cam.local/s", "rtsp://admin:1234/Wk7@cam.local/s", "rtsp://Zq9#Wk7@cam.local/s",
    "rtsp://admin:Zq9Wk7@[::1/s", "rtsp://admin:Zq9Wk7@cam.local:99999/s", "rtsp://admin:Zq9\uff03Wk7@cam/s",
])
def test_unparsable_urls_are_refused_without_quoting_them(url: str) -> None:
    with pytest.raises(SourceError) as caught:
        split_source_url(url)
    message = str(caught.value)
    assert "%23" in message and "percent-encode" in message
    assert not any(piece in message for piece in ("Zq9", "Wk7", "1234", "cam"))


@pytest.mark.parametrize(("url", "host"), [
    ("rtsp://admin:Zq9%23Wk7@cam.local/s", "cam.local"), ("rtsp://admin:Zq9@Wk7@[::1]:554/s", "::1"),
    ("https://host:8080/a/@user/v.m3u8", "host"), ("https://h/x.m3u8?e=a@b#frag", "h"),
])
def test_urls_that_read_one_way_are_accepted(url: str, host: str) -> None:
    assert split_source_url(url).hostname == host


def test_redact_source_hides_a_parsers_quote_of_the_password() -> None:
    source = "rtsp://admin:Zq9#Wk7@cam.local/s?token=T0k%23en"
    said = redact_source("ValueError: Port could not be cast to integer value as 'Zq9'; token T0k#en; Zq9x", source)
    assert said == "ValueError: Port could not be cast to integer value as '***'; token ***; Zq9x"
    assert redact_url("rtsp://admin:Zq9Wk7@[fe80::1%25eth0]:554/s") == "rtsp://admin:***@[fe80::1%25eth0]:554/s"
    assert redact_url("rtsp://Zq9Wk7@[::1]/s") == "rtsp://***@[::1]/s"


def test_log_tracebacks_are_redacted(capsys) -> None:
    logger = logging.getLogger("lucy.test_redact")
    handler = redacting_handler("rtsp://admin:Zq9#Wk7@cam/s")
    logger.addHandler(handler)
    try:
        try:
            raise ValueError("as 'Zq9', from rtsp://u:hunter2@cam/s")
        except ValueError:
            logger.exception("opening %s failed", "rtsp://u:hunter2@cam/s")
    finally:
        logger.removeHandler(handler)
    err = capsys.readouterr().err
    assert "Traceback" in err and "rtsp://u:***@cam/s" in err
    assert "hunter2" not in err and "Zq9" not in err


def test_cli_refuses_a_password_with_a_hash(tmp_path, run_lucy) -> None:
    proc = run_lucy("ingest", "rtsp://admin:Zq9#Wk7@127.0.0.1:9/cam", "--stream", "cam", "--data",
                    str(tmp_path / "d"), timeout=60)
    assert proc.returncode == 1 and proc.stderr.startswith("lucy: error: the source URL cannot be parsed")
    assert "Traceback" not in proc.stderr and "Zq9" not in proc.stderr + proc.stdout
    assert not (tmp_path / "d").exists()  # refused before anything was made
