"""Credentials in stream URLs, in the user-info part and in query parameters, never reach output."""

from __future__ import annotations

import pytest

from lucy.ingest import redact_url


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
])
def test_credentials_are_hidden(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(f"stream {url} timed out") == f"stream {shown} timed out"
