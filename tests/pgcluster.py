"""A throwaway PostgreSQL cluster for the tests and the cohort bench.

`initdb` + `pg_ctl` from the server binaries on this machine (Debian's
`postgresql` package: /usr/lib/postgresql/<major>/bin), in a temporary
directory, listening on 127.0.0.1 on a free port (and a private Unix socket
directory), with password authentication over TCP so the wrong-password path
is real. As root the binaries run as the `postgres` system user (initdb
refuses root). `stop()` always removes the directory.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

PACKAGE_HINT = "install the Debian package `postgresql` (PostgreSQL 15 server binaries)"
SUPERUSER = "postgres"
PASSWORD = "s3cret-Pa55word"  # the tests check it never shows up in output


def find_bindir() -> Optional[Path]:
    """The directory holding initdb/pg_ctl/postgres (15 preferred), or None."""
    env = os.environ.get("ROADMAP_PG_BINDIR")
    candidates = [env] if env else []
    candidates += ["/usr/lib/postgresql/15/bin"] + sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    which = shutil.which("pg_ctl")
    if which:
        candidates.append(str(Path(which).parent))
    for cand in candidates:
        if cand and all((Path(cand) / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(cand)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, bindir: Path, *, fsync: bool = False) -> None:
        self.bindir = bindir
        self.fsync = fsync
        self.root = Path(tempfile.mkdtemp(prefix="roadmap-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.log = self.root / "server.log"
        self.port = free_port()
        self._as_postgres = os.geteuid() == 0
        self._counter = 0
        self._reaper = None  # tests/reaper.py: stops the server if the test process dies without destroy()

    # -- process plumbing

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = list(args)
        if self._as_postgres:
            cmd = ["runuser", "-u", SUPERUSER, "--"] + cmd
        return subprocess.run(
            cmd, capture_output=True, text=True, check=check, timeout=timeout, stdin=subprocess.DEVNULL, cwd=self.root
        )

    def init(self) -> "Cluster":
        self.sockets.mkdir()
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._as_postgres:
            shutil.chown(self.root, SUPERUSER)
            shutil.chown(self.sockets, SUPERUSER)
            shutil.chown(pwfile, SUPERUSER)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--pwfile",
            str(pwfile),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )
        pwfile.unlink()
        return self

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            f"-c fsync={'on' if self.fsync else 'off'} -c synchronous_commit={'on' if self.fsync else 'off'} "
            f"-c full_page_writes={'on' if self.fsync else 'off'}"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            opts,
            "-w",
            "-t",
            "60",
            "start",
        )
        if self._reaper is None:
            from reaper import guard

            stop = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]
            if self._as_postgres:
                stop = ["runuser", "-u", SUPERUSER, "--"] + stop
            self._reaper = guard(commands=[stop], pids=[self.postmaster_pid()], paths=[str(self.root)])

    def postmaster_pid(self) -> int:
        """The server's pid (the first line of postmaster.pid)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def destroy(self) -> None:
        try:
            if self.data.exists():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            if self._reaper is not None:
                self._reaper.release()

    # -- databases

    def url(
        self,
        database: str = "postgres",
        *,
        password: str = PASSWORD,
        host: str = "127.0.0.1",
        port: Optional[int] = None,
    ) -> str:
        return f"postgresql+psycopg://{SUPERUSER}:{password}@{host}:{port or self.port}/{database}"

    def admin(self, sql: str) -> None:
        """One statement as the superuser, outside a transaction (CREATE DATABASE)."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, password=PASSWORD, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql)

    def new_database(self, prefix: str = "t") -> str:
        """A fresh, empty database; its URL."""
        self._counter += 1
        name = f"{prefix}_{os.getpid()}_{self._counter}"
        self.admin(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def version(self) -> str:
        return self._run(str(self.bindir / "postgres"), "--version").stdout.strip()


def start_cluster(*, fsync: bool = False) -> Cluster:
    bindir = find_bindir()
    if bindir is None:
        raise FileNotFoundError(f"no PostgreSQL server binaries found: {PACKAGE_HINT}")
    cluster = Cluster(bindir, fsync=fsync)
    try:
        cluster.init()
        cluster.start()
    except BaseException:
        log = cluster.log.read_text(errors="replace")[-2000:] if cluster.log.exists() else ""
        cluster.destroy()
        if log:
            raise RuntimeError(f"PostgreSQL did not start:\n{log}") from None
        raise
    return cluster
