"""A throwaway PostgreSQL server for tests and benchmarks: Debian's ``postgresql`` binaries, ``initdb`` in a temporary
directory (as ``nobody`` when run as root), listening on 127.0.0.1 only."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import uuid
from pathlib import Path

from lucy.testing.waiting import ServerUnavailable, free_port

PG_USER = "lucy"
PG_PASSWORD = "pg-Secret-4821"  # tests check that it never reaches an error message or a log line


def _postgres_bindir() -> Path:
    """Where Debian's PostgreSQL server binaries are (``pg_config --bindir``, else the newest installed)."""
    candidates: list[Path] = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        candidates.append(Path(out))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    raise ServerUnavailable("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql "
                            "package (scripts/setup.sh does)")


class PostgresServer:
    """A throwaway PostgreSQL server on 127.0.0.1 (its own data directory, socket directory and port), run as an
    unprivileged user when the tests run as root (initdb refuses root). Password authentication, no fsync."""

    def __init__(self, root: Path) -> None:
        self.bindir = _postgres_bindir()
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.user: dict[str, int] = {}
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            nobody = pwd.getpwnam("nobody")
            self.user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
            os.chown(root, nobody.pw_uid, nobody.pw_gid)
        root.chmod(0o700)
        (root / "pwfile").write_text(PG_PASSWORD + "\n")
        if self.user:
            os.chown(root / "pwfile", self.user["user"], self.user["group"])
        self._run("initdb", "-D", str(self.data), "-U", PG_USER, f"--pwfile={root / 'pwfile'}", "-A", "scram-sha-256",
                  "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run([str(self.bindir / tool), *args], capture_output=True, text=True, timeout=120,
                              check=False, cwd=self.root, **self.user)  # type: ignore[arg-type]
        if done.returncode != 0:
            raise ServerUnavailable(f"{tool} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w", "-t", "60",
                  "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self) -> str:
        """A new, empty database of its own on this server; its DSN (drop it with :meth:`drop_database`)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def drop_database(self, dsn: str) -> None:
        import psycopg

        name = dsn.rsplit("/", 1)[1]
        with psycopg.connect(self.dsn(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
