"""The API token guard and the refusal to listen beyond loopback without one."""

from __future__ import annotations

import functools
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import openai

from lucy.testing import child_env
from tests.service.conftest import LucyServer, Mosquitto, base_config, free_port, wait_for, write_config

TOKEN = "test-token-0123456789abcdef"


def test_token_guards_everything_but_health(lucy_server: Callable[..., LucyServer], videos: dict[str, Path]) -> None:
    server = lucy_server(token=TOKEN)
    url = server.url
    good = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/healthz", "/readyz"):
        assert httpx.get(url + path).status_code == 200, path
    guarded = [("GET", "/v1/streams"), ("GET", "/v1/streams/x"), ("GET", "/metrics"), ("GET", "/v1/models"),
               ("GET", "/openapi.json"), ("GET", "/docs"), ("POST", "/v1/streams"),
               ("POST", "/v1/chat/completions"), ("DELETE", "/v1/streams/x"), ("POST", "/v1/streams/x/questions"),
               ("GET", "/v1/streams/x/frames?t=1"), ("GET", "/v1/streams/x/live.mjpeg"),
               ("GET", "/v1/streams/x/timeline")]
    for method, path in guarded:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789abcdef"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}):
            r = httpx.request(method, url + path, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.status_code)
            assert r.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(url + "/v1/streams", headers=good).status_code == 200
    assert httpx.get(url + "/metrics", headers=good).status_code == 200
    # The dashboard page (no data in it) loads, and asks for the token when the API refuses.
    assert httpx.get(url + "/").status_code == 200
    assert httpx.get(url + "/review/x").status_code == 200  # the review page too (its data needs the token)
    # With the token, the API works, including from the official OpenAI client (api_key is the bearer token).
    r = httpx.post(url + "/v1/streams", headers=good, timeout=60,
                   json={"name": "guarded", "source": str(videos["short"]), "captioner": "pixels"})
    assert r.status_code == 201, r.text
    server.token = TOKEN
    server.wait_captioned("guarded")
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, timeout=120, max_retries=0)
    assert [m.id for m in client.models.list()] == ["guarded"]
    reply = client.chat.completions.create(model="guarded", messages=[{"role": "user", "content": "What plate?"}])
    assert reply.choices[0].message.content
    bad = openai.OpenAI(base_url=f"{url}/v1", api_key="nope-nope-nope-nope", max_retries=0)
    try:
        bad.models.list()
        raise AssertionError("a wrong API key was accepted")
    except openai.AuthenticationError:
        pass
    assert TOKEN not in server.log()


def _serve(tmp_path: Path, *args: str, token: str | None = None) -> subprocess.Popen[str]:
    port = free_port()
    config = base_config(tmp_path / "data", port)
    if token:
        config["service"]["api_token"] = token
    config_file = write_config(tmp_path / "lucy.toml", config)
    env = child_env()
    return subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config_file), "--port", str(port),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def test_refuses_public_bind_without_token(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "::", "camera-gateway.example"):
        proc = _serve(tmp_path, "--host", host)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 1, out
        assert "refusing to serve" in out and "api_token" in out, out


def test_public_bind_with_token(tmp_path: Path) -> None:
    proc = _serve(tmp_path, "--host", "0.0.0.0", token=TOKEN)
    try:
        port = int(proc.args[proc.args.index("--port") + 1])  # type: ignore[union-attr]
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200, 90,
                 "the server bound to 0.0.0.0")
        assert httpx.get(f"http://127.0.0.1:{port}/v1/streams").status_code == 401
        assert httpx.get(f"http://127.0.0.1:{port}/v1/streams",
                         headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _Files6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _file_server(cls: type[ThreadingHTTPServer], host: str, folder: Path) -> ThreadingHTTPServer:
    server = cls((host, 0), functools.partial(_QuietFiles, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_no_credential_form_leaks_anywhere(lucy_server: Callable[..., LucyServer], mosquitto: Mosquitto,
                                           tmp_path: Path) -> None:
    """Issue 26: each credential form of a source URL, swept for its secret through everything the server shows
    (status JSON, the dashboard feed, retained MQTT status, its log, zarr.json). Every secret starts "Zq", so a
    leaked start of one (urllib once quoted a password up to its '#') is found too."""
    from lucy.ingest.zarr_store import frames_root
    from lucy.synth import write_video
    from tests.ingest.test_picture_size import write_png
    from tests.service.test_mqtt import Watcher

    folder = tmp_path / "www"
    folder.mkdir()
    write_video(folder / "v.mkv", duration=1.0, fps=5, width=160, height=96)
    big = write_png(tmp_path / "big.png", 12000, 12000)
    web4, web6 = _file_server(ThreadingHTTPServer, "127.0.0.1", folder), _file_server(_Files6, "::1", folder)
    h4, h6 = f"127.0.0.1:{web4.server_address[1]}", f"[::1]:{web6.server_address[1]}"
    accepted = {
        "userpass": f"http://admin:ZqOne1@{h4}/v.mkv", "user": f"http://ZqTwo2@{h4}/v.mkv",
        "encoded": f"http://admin:ZqThree%23x%2Fy%3Fz@{h4}/v.mkv", "at": f"http://admin:ZqFour@x@{h4}/v.mkv",
        "query": f"http://{h4}/v.mkv?token=ZqFive&password=ZqSix&key=ZqSeven&q=1",
        "ipv6": f"http://admin:ZqEight@{h6}/v.mkv", "down": "rtsp://admin:ZqNine@127.0.0.1:9/cam?token=ZqTen",
    }
    refused = {"hash": "rtsp://admin:ZqH#ash@127.0.0.1:9/s", "slash": "rtsp://admin:ZqS/lash@127.0.0.1:9/s",
               "question": "rtsp://admin:ZqQ?uestion@127.0.0.1:9/s", "digits": "rtsp://admin:1234#Zq@127.0.0.1:9/s"}
    server = lucy_server(mqtt={"enabled": True, "url": f"mqtt://127.0.0.1:{mosquitto.port}", "client_id": "lucy-s"})
    watcher = Watcher(mosquitto.port)
    try:
        with server.client() as c:
            bodies = []
            for name, url in refused.items():
                r = c.post("/v1/streams", json={"name": name, "source": url, "captioner": "none"})
                assert r.status_code == 422 and "percent-encode" in r.text, (name, r.text)
                bodies.append(r.text)
            r = c.post("/v1/streams", json={"name": "huge", "source": str(big), "captioner": "none"})
            assert r.status_code == 422 and "12000x12000" in r.text and "max_source_pixels" in r.text, r.text
            for name, url in accepted.items():
                r = c.post("/v1/streams", json={"name": name, "source": url, "captioner": "none"})
                assert r.status_code == 201, (name, r.text)
                bodies.append(r.text)
            ended = wait_for(lambda: all(c.get(f"/v1/streams/{n}").json()["state"] in ("finished", "failed")
                                         for n in accepted) and c.get("/v1/streams").json(), 120, "the streams to end")
            states = {s["name"]: s for s in ended["streams"]}
            assert set(states) == set(accepted)  # no stream was left behind by a refused source
            assert states["down"]["state"] == "failed" and states["down"]["error"], states["down"]
            assert all(states[n]["state"] == "finished" for n in accepted if n != "down"), states
            assert states["userpass"]["source"] == f"http://admin:***@{h4}/v.mkv"
            assert states["ipv6"]["source"] == f"http://admin:***@{h6}/v.mkv"
            bodies += [c.get(f"/v1/streams/{n}").text for n in accepted]
            with c.stream("GET", "/v1/dashboard/events", headers={"Accept": "text/event-stream"}) as res:
                hello = next(line for line in res.iter_lines() if line.startswith("data:"))
            assert all(n in hello for n in accepted)
        statuses = wait_for(lambda: (found := watcher.find(lambda t, p, r: t.endswith("/status")
                                                           and isinstance(p, dict) and p.get("name") in accepted))
                            and {p["name"] for _, p, _ in found} == set(accepted) and found, 60, "retained statuses")
    finally:
        watcher.close()
        web4.shutdown()
        web6.shutdown()
    stores = [p.read_text() for p in frames_root(server.data).glob("*/zarr.json")]
    assert len(stores) == len(accepted) - 1 and not (frames_root(server.data) / "huge").exists()
    swept = {"API": "\n".join(bodies), "dashboard": hello, "MQTT": json.dumps([p for _, p, _ in statuses]),
             "log": server.log(), "zarr.json": "\n".join(stores)}
    for where, text in swept.items():
        assert "Zq" not in text, (where, text[text.index("Zq") - 200:text.index("Zq") + 50])
