"""The API token guard and the refusal to listen beyond loopback without one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import openai

from tests.service.conftest import LucyServer, base_config, free_port, wait_for, write_config

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
               ("GET", "/v1/streams/x/frames?t=1")]
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}
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
