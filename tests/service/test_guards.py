"""The request guards and error answers of ``lucy serve`` (issue 8): the ``Host`` check against DNS rebinding, the
request body limit, and JSON errors (with an OpenAI-style error object) for unknown routes, a locked memory store,
a full disk and a process out of file descriptors, each provoked for real against a running server."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import socket
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest

from lucy.config.settings import ServiceSettings
from lucy.errors import StoreError
from lucy.memory.sqlite_store import DB_NAME, SQLiteMemoryStore
from lucy.service.errors import Busy, InsufficientStorage, OutOfDescriptors, service_error_for
from lucy.service.guards import HostPolicy, host_name
from tests.service.conftest import LucyServer, base_config, free_port, wait_for

TOKEN = "guard-token-0123456789abcdef"
LIMIT = 64 * 1024  # service.max_body_bytes of the module's server
QUESTION = {"question": "What plate number is shown?"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, videos: dict[str, Path]) -> Iterator[LucyServer]:
    """A loopback server with extra host names, a small body limit and a short busy timeout, and one stream."""
    workdir = tmp_path_factory.mktemp("serve-guards")
    config = base_config(workdir / "data", free_port(),
                         service={"allowed_hosts": ["lucy.example.com", "*.cams.example"], "max_body_bytes": LIMIT},
                         memory={"busy_timeout_seconds": 0.5})
    srv = LucyServer(workdir, config).start()
    with srv.client() as c:
        r = c.post("/v1/streams", json={"name": "yard", "source": str(videos["short"]), "captioner": "pixels"})
        assert r.status_code == 201, r.text
    srv.wait_captioned("yard")
    yield srv
    srv.stop()


def assert_json_error(r: httpx.Response, status: int, *words: str) -> dict:
    """The response is ``status`` with JSON ``detail`` and an OpenAI-style ``error`` that say ``words``."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    error = body["error"]
    assert set(error) >= {"message", "type", "code"}, body
    assert error["type"] == ("invalid_request_error" if status < 500 else "server_error")
    for word in words:
        assert word in error["message"], (word, body)
    return body


# ------------------------------------------------------------------------------------------------ Host


def test_host_header_must_name_the_server(server: LucyServer, videos: dict[str, Path]) -> None:
    url, port = server.url, server.port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.nip.io:{port}", f"lucy.example.com.evil:{port}",
                 f"cams.example:{port}", "localhost.evil.example"):
        for method, path, body in (("GET", "/v1/streams", None), ("GET", "/v1/streams/yard/memory", None),
                                   ("GET", "/v1/streams/yard/frames?t=1", None), ("DELETE", "/v1/streams/yard", None),
                                   ("POST", "/v1/streams", {"name": "rebound", "source": str(videos["a"])}),
                                   ("GET", "/", None), ("GET", "/metrics", None)):
            r = httpx.request(method, url + path, headers={"Host": host}, json=body)
            assert_json_error(r, 421, "service.allowed_hosts", host_name(host))
    # Nothing the refused requests asked for happened.
    assert [s["name"] for s in httpx.get(url + "/v1/streams").json()["streams"]] == ["yard"]
    assert server.stream("yard")["state"] == "finished"
    # The names the server goes by: loopback names and addresses (any case, trailing dot, with or without the
    # port), the configured names and the subdomains of a configured wildcard.
    for host in (f"127.0.0.1:{port}", "127.0.0.1", f"localhost:{port}", f"LocalHost.:{port}", f"[::1]:{port}",
                 "127.0.0.2", f"lucy.example.com:{port}", "LUCY.example.com", "a.cams.example",
                 f"b.c.cams.example:{port}"):
        r = httpx.get(url + "/v1/streams", headers={"Host": host})
        assert r.status_code == 200, (host, r.text)
    # Health probes answer any name (a kubelet sends the pod's address).
    for path in ("/healthz", "/readyz"):
        assert httpx.get(url + path, headers={"Host": f"10.1.2.3:{port}"}).status_code == 200


def test_wildcard_bind(lucy_server: Callable[..., LucyServer]) -> None:
    """0.0.0.0 without allowed_hosts answers any name (the token guards it); with allowed_hosts, only those and
    the loopback names."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    any_name = lucy_server(token=TOKEN, service={"host": "0.0.0.0"})
    r = httpx.get(any_name.url + "/v1/streams", headers={**headers, "Host": "camera-gateway.lan:8321"})
    assert r.status_code == 200, r.text
    assert httpx.get(any_name.url + "/v1/streams", headers={"Host": "evil.example"}).status_code == 401
    named = lucy_server(token=TOKEN, service={"host": "0.0.0.0", "allowed_hosts": ["camera-gateway.lan"]})
    for host, status in (("camera-gateway.lan:8321", 200), ("localhost", 200), ("127.0.0.1", 200),
                         ("evil.example", 421), ("10.0.0.7", 421)):
        r = httpx.get(named.url + "/v1/streams", headers={**headers, "Host": host})
        assert r.status_code == status, (host, r.text)
    # The Host check comes before the token: a rebinding page learns nothing, not even that a token is needed.
    assert_json_error(httpx.get(named.url + "/v1/streams", headers={"Host": "evil.example"}), 421)


def test_host_policy_and_setting() -> None:
    assert host_name("[::1]:8321") == "::1" and host_name("::1") == "::1"
    assert host_name("Lucy.Example.:80") == "lucy.example"
    specific = HostPolicy(ServiceSettings(host="192.168.1.5", api_token=TOKEN))
    assert specific.allows("192.168.1.5") and not specific.allows("localhost") and not specific.allows("evil.example")
    v6 = HostPolicy(ServiceSettings(host="::1"))
    assert v6.allows("::1") and v6.allows("localhost") and not v6.allows("evil.example")
    assert HostPolicy(ServiceSettings(host="::", api_token=TOKEN)).any
    assert HostPolicy(ServiceSettings(allowed_hosts=["*"])).any
    assert ServiceSettings(allowed_hosts=[" Lucy.Example.COM. ", "[fe80::1]"]).allowed_hosts == ["lucy.example.com",
                                                                                               "fe80::1"]
    for bad in ("lucy.example.com:8321", "127.0.0.1:80", "http://lucy.example.com", "a b", "", "x/y", "-x"):
        with pytest.raises(ValueError, match="allowed_hosts"):
            ServiceSettings(allowed_hosts=[bad])
    with pytest.raises(ValueError, match="max_body_bytes"):
        ServiceSettings(max_body_bytes=10)


# ------------------------------------------------------------------------------------------------ JSON errors


def test_unknown_routes_and_methods_answer_json(server: LucyServer) -> None:
    with server.client() as c:
        assert_json_error(c.get("/v1/no-such-thing"), 404, "/v1/no-such-thing", "/docs")
        assert_json_error(c.get("/static/no-such-file.js"), 404)
        r = c.delete("/healthz")
        assert_json_error(r, 405, "DELETE", "GET")
        assert r.headers["allow"] == "GET"
        assert_json_error(c.put("/v1/streams/yard"), 405, "PUT")
        body = assert_json_error(c.post("/v1/streams/yard/questions", json={"questoin": "typo?"}), 422,
                                 "body.question", "Field required")
        assert isinstance(body["detail"], list)  # FastAPI's list of problems, as before
        assert_json_error(c.get("/v1/streams/nope"), 404, "nope")
        assert_json_error(c.post("/v1/streams", json={"name": "x", "source": "/no/such/video.mp4"}), 422)
    # OpenAI clients show the message.
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
    with pytest.raises(openai.NotFoundError, match="nothing at /v1/embeddings"):
        client.embeddings.create(model="yard", input="hello")


def test_unexpected_error_answers_json_500(server: LucyServer) -> None:
    """A failure nobody planned for (here: damaged frame chunks) is a JSON 500 naming only the exception's type;
    the traceback goes to the log."""
    chunks = list((server.data / "frames.zarr" / "yard" / "frames").glob("c.*"))
    assert chunks
    kept = {p: p.read_bytes() for p in chunks}
    try:
        for p in chunks:
            p.write_bytes(b"\xff\xd8 not a picture " * 7)
        with server.client() as c:
            r = c.get("/v1/streams/yard/frames", params={"t": 1.0})
        body = assert_json_error(r, 500, "internal error")
        assert "Traceback" not in r.text and str(server.data) not in r.text
        kind = body["error"]["message"].split("(")[1].split(")")[0]
        assert kind.isidentifier(), body
        # The server logs it once the answer is sent.
        wait_for(lambda: "Traceback" in server.log() and kind in server.log(), 30, "the traceback in the log")
    finally:
        for p, data in kept.items():
            p.write_bytes(data)
    with server.client() as c:
        assert c.get("/v1/streams/yard/frames", params={"t": 1.0}).status_code == 200


# ------------------------------------------------------------------------------------------------ body size


def test_body_limit_with_content_length(server: LucyServer) -> None:
    big = b'{"question": "' + b"x" * (4 * LIMIT) + b'"}'
    with server.client() as c:
        r = c.post("/v1/streams/yard/questions", content=big, headers={"content-type": "application/json"})
        assert_json_error(r, 413, "service.max_body_bytes", str(LIMIT))
        assert r.headers.get("connection") == "close"
        assert_json_error(c.post("/v1/chat/completions", content=big, headers={"content-type": "application/json"}),
                          413)
    # A client sending 50 MB with Content-Length is refused before the body is read, and the OpenAI client says why.
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
    with pytest.raises(openai.APIStatusError, match="max_body_bytes") as err:
        client.chat.completions.create(model="yard", messages=[{"role": "user", "content": "x" * 50_000_000}])
    assert err.value.status_code == 413
    # Just under the limit is fine, and the server is still there.
    with server.client() as c:
        r = c.post("/v1/streams/yard/questions", json={"question": "What plate?", "options": ["y" * 1000, "z" * 1000]})
        assert r.status_code == 200, r.text


def test_body_limit_streamed(server: LucyServer) -> None:
    """A chunked body without Content-Length is counted as it arrives; the server answers 413 and stops reading."""
    total = 256 * 1024 * 1024
    chunk = b"x" * 65536
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/streams/yard/questions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        sock.settimeout(0.05)
        reply = b""
        while sent < total:
            try:
                reply += sock.recv(65536)
                break  # the server answered (or closed)
            except TimeoutError:
                pass
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        sock.settimeout(30)
        with contextlib.suppress(ConnectionResetError):
            while not reply.endswith(b"}"):
                more = sock.recv(65536)
                if not more:
                    break
                reply += more
    assert reply.startswith(b"HTTP/1.1 413"), reply[:300]
    assert b"service.max_body_bytes" in reply and b'"error"' in reply
    # Socket buffers take a few MB; the server did not read the 256 MB.
    assert sent < 32 * 1024 * 1024, sent
    assert httpx.get(server.url + "/healthz").status_code == 200


# ------------------------------------------------------------------------------------------------ environment


def test_locked_memory_store_answers_503(server: LucyServer) -> None:
    """Another process holding the memory store's write lock past busy_timeout: 503 with Retry-After."""
    holder = sqlite3.connect(server.data / DB_NAME, timeout=30, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with server.client() as c:
            r = c.post("/v1/streams/yard/questions", json=QUESTION)
            assert_json_error(r, 503, "locked", "memory.busy_timeout_seconds")
            assert r.json()["error"]["code"] == "busy"
            assert int(r.headers["retry-after"]) >= 1
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
        with pytest.raises(openai.InternalServerError, match="locked") as err:
            client.chat.completions.create(model="yard", messages=[{"role": "user", "content": QUESTION["question"]}])
        assert err.value.status_code == 503
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with server.client() as c:
        r = c.post("/v1/streams/yard/questions", json=QUESTION)
        assert r.status_code == 200, r.text


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (needs root: the test skips without it)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a full disk is made with a small tmpfs, which needs root to mount")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> Path:
    """Fill the filesystem of ``path`` to the last byte."""
    filler = path / "filler"
    with open(filler, "wb", buffering=0) as out:
        for block in (1 << 20, 4096, 512, 1):
            try:
                while True:
                    out.write(b"\0" * block)
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
    return filler


def test_full_disk_answers_507(lucy_server: Callable[..., LucyServer], videos: dict[str, Path],
                               tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "48m") as disk:
        # No free-space floor: the maintainer would delete the stream's frames to make room, and a stream
        # registered after that would not find the disk full (the race the parallel CI run lost once).
        server = lucy_server(data=disk / "data", retention={"min_free_bytes": 0})
        try:
            with server.client() as c:
                r = c.post("/v1/streams", json={"name": "yard", "source": str(videos["short"]), "captioner": "pixels"})
                assert r.status_code == 201, r.text
                server.wait_captioned("yard")
                filler = fill(disk)
                r = c.post("/v1/streams/yard/questions", json=QUESTION)
                assert_json_error(r, 507, "no space left")
                assert r.json()["error"]["code"] == "insufficient_storage"
                r = c.post("/v1/streams", json={"name": "more", "source": str(videos["a"]), "captioner": "none"})
                assert_json_error(r, 507, "no space left")
                filler.unlink()
                r = c.post("/v1/streams/yard/questions", json=QUESTION)
                assert r.status_code == 200, r.text
        finally:
            server.stop()


def test_out_of_file_descriptors_answers_503(lucy_server: Callable[..., LucyServer], videos: dict[str, Path]) -> None:
    """With no descriptor left, questions and frames answer 503 (was: 409 'unable to open database file')."""
    server = lucy_server()
    with server.client() as c:
        r = c.post("/v1/streams", json={"name": "yard", "source": str(videos["short"]), "captioner": "pixels"})
        assert r.status_code == 201, r.text
    server.wait_captioned("yard")
    assert server.proc is not None
    pid = server.proc.pid
    limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    with server.client() as c:  # one kept-alive connection: accepting another would need a descriptor
        assert c.post("/v1/streams/yard/questions", json=QUESTION).status_code == 200  # what a question imports
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, limits[1]))  # every new descriptor fails
        try:
            for method, path, body in (("POST", "/v1/streams/yard/questions", QUESTION),
                                       ("GET", "/v1/streams/yard/frames?t=2.5", None)):
                r = c.request(method, path, json=body)
                assert_json_error(r, 503, "file descriptors")
                assert r.json()["error"]["code"] == "too_many_open_files"
                assert int(r.headers["retry-after"]) >= 1
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        r = c.post("/v1/streams/yard/questions", json=QUESTION)
        assert r.status_code == 200, r.text
        assert c.get("/v1/streams/yard/frames?t=2.5").status_code == 200


# ------------------------------------------------------------------------------------------------ the classifier


def test_classifier_on_real_failures(tmp_path: Path) -> None:
    # SQLite's "database or disk is full" (a page limit stands in for the disk).
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (x)")
    db.execute("PRAGMA max_page_count = 2")
    with pytest.raises(sqlite3.OperationalError) as full:
        for _ in range(100):
            db.execute("INSERT INTO t VALUES (?)", ("x" * 1000,))
    assert isinstance(service_error_for(full.value), InsufficientStorage)
    # ENOSPC from the kernel.
    with pytest.raises(OSError) as nospace, open("/dev/full", "wb", buffering=0) as out:
        out.write(b"x")
    assert isinstance(service_error_for(nospace.value), InsufficientStorage)
    # "database is locked", wrapped on its way up.
    path = tmp_path / "locked.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0.05, isolation_level=None)
    try:
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            raise StoreError("cannot write") from err
    except StoreError as wrapped:
        assert isinstance(service_error_for(wrapped), Busy)
    holder.execute("ROLLBACK")
    # The memory store opened with no descriptor left: a StoreError raised `from None`, which the question path
    # used to turn into 409. Elsewhere "unable to open database file" is not about descriptors.
    store = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    caught: list[BaseException] = []

    def open_in_new_thread() -> None:
        try:
            store.captioned_until("x")  # a new thread opens its own connection
        except BaseException as err:  # noqa: BLE001
            caught.append(err)

    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, limits[1]))
    try:
        thread = threading.Thread(target=open_in_new_thread)
        thread.start()
        thread.join()
        assert caught and isinstance(caught[0], StoreError), caught
        assert isinstance(service_error_for(caught[0]), OutOfDescriptors)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        store.close()
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(StoreError, match="unable to open database file") as cannot_open:
        SQLiteMemoryStore(tmp_path / "a-directory")
    assert service_error_for(cannot_open.value) is None
    assert service_error_for(ValueError("nothing to do with the environment")) is None


# ------------------------------------------------------------------------------------------------ browser headers


def test_browser_hardening_headers_on_every_answer(server: LucyServer) -> None:
    """The dashboard, its files, API answers, errors and the guards' own refusals all carry the headers; the CDN
    pages /docs and /redoc get their own policy (only this server; Swagger's inline starter by its hash), still
    never framed."""
    from lucy.service.headers import CSP

    for path, host, status in (("/", None, 200), ("/static/dashboard.js", None, 200), ("/v1/streams", None, 200),
                               ("/no/such/route", None, 404), ("/metrics", None, 200),
                               ("/v1/streams", "evil.example", 421)):
        r = httpx.get(server.url + path, headers={"Host": host} if host else {})
        assert r.status_code == status, (path, r.text)
        assert r.headers["content-security-policy"] == CSP, path
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
    for directive in ("default-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"):
        assert directive in CSP
    assert "unsafe-inline" not in CSP and "http" not in CSP  # the dashboard runs only its own files
    for path, inline_scripts in (("/docs", 1), ("/redoc", 0), ("/docs/oauth2-redirect", 1)):
        r = httpx.get(server.url + path)
        docs_csp = r.headers["content-security-policy"]
        assert r.status_code == 200 and "frame-ancestors 'none'" in docs_csp and r.headers["x-frame-options"] == "DENY"
        script_src = next(d for d in docs_csp.split("; ") if d.startswith("script-src "))
        assert script_src.split()[1] == "'self'" and script_src.count("'sha256-") == inline_scripts, script_src
        assert "http" not in docs_csp and "unsafe-inline" not in script_src  # no CDN; no script but its own
    assert httpx.get(server.url + "/docs/static/swagger-ui-bundle.js").headers["content-security-policy"] == CSP
