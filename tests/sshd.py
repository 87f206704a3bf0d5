"""A throwaway OpenSSH server for the remote tests (as pgcluster.py is for PostgreSQL).

`sshd -D` from Debian's `openssh-server`, on 127.0.0.1 and a free port, with
a host key and a client key generated for this run, key authentication only,
and an ssh_config for the client side (`ROADMAP_SSH_CONFIG`) that knows the
host key: nothing in the real ~/.ssh is read or written. `stop()` kills the
server and removes the directory.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

PACKAGE_HINT = "install the Debian packages `openssh-server` and `openssh-client`"


def find_sshd() -> Optional[str]:
    for candidate in (os.environ.get("ROADMAP_SSHD"), "/usr/sbin/sshd", shutil.which("sshd")):
        if candidate and Path(candidate).is_file() and shutil.which("ssh") and shutil.which("ssh-keygen"):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(
        self, sshd: str, extra_config: tuple[str, ...] = (), forwarding: str = "no", marks: tuple[str, ...] = ()
    ) -> None:
        self.sshd = sshd
        # Folders that name what its sessions leave running (the far agent's managed folder): a killed test run
        # takes those processes along too (tests/reaper.py).
        self.marks = [str(m) for m in marks]
        # AllowTcpForwarding: "local" lets a client forward to a unix socket here (grade --on's far agent).
        self.forwarding = forwarding
        self.extra_config = list(extra_config)  # more sshd_config lines (e.g. SetEnv for the far side's grades)
        self.root = Path(tempfile.mkdtemp(prefix="roadmap-sshd-"))
        self.root.chmod(0o755)  # sshd's StrictModes-style checks dislike group/other-writable parents
        self.port = free_port()
        self.user = getpass.getuser()
        self.proc: Optional[subprocess.Popen] = None
        self._reaper = None
        self.client_config = self.root / "ssh_config"
        self.log = self.root / "sshd.log"

    def _keygen(self, path: Path) -> None:
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
            check=True,
            capture_output=True,
            timeout=30,
        )

    def start(self) -> "Server":
        host_key, client_key = self.root / "host_ed25519", self.root / "client_ed25519"
        self._keygen(host_key)
        self._keygen(client_key)
        authorized = self.root / "authorized_keys"
        authorized.write_text(client_key.with_suffix(".pub").read_text())
        authorized.chmod(0o600)
        config = self.root / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key}",
                    f"AuthorizedKeysFile {authorized}",
                    f"PidFile {self.root / 'sshd.pid'}",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PubkeyAuthentication yes",
                    "PermitRootLogin prohibit-password",
                    "UsePAM no",
                    "StrictModes no",
                    "PrintMotd no",
                    "AcceptEnv NONE",
                    "X11Forwarding no",
                    f"AllowTcpForwarding {self.forwarding}",
                    f"AllowUsers {self.user}",
                    "LogLevel ERROR",
                    *self.extra_config,
                ]
            )
            + "\n"
        )
        # sshd refuses to start without its privilege-separation directory (normally made by systemd).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        known_hosts = self.root / "known_hosts"
        known_hosts.write_text(f"[127.0.0.1]:{self.port} " + host_key.with_suffix(".pub").read_text())
        self.client_config.write_text(
            "\n".join(
                [
                    "Host *",
                    f"  IdentityFile {client_key}",
                    "  IdentitiesOnly yes",
                    f"  UserKnownHostsFile {known_hosts}",
                    "  StrictHostKeyChecking yes",
                    "  LogLevel ERROR",
                ]
            )
            + "\n"
        )
        self.proc = subprocess.Popen(
            [self.sshd, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "wb"),
        )
        from reaper import guard

        # A test process killed outright (no stop()) takes the server, its sessions' processes and its folder
        # along; the client side's ssh processes are marked by ROADMAP_SSH_CONFIG, a file in the folder.
        self._reaper = guard(pids=[self.proc.pid], paths=[str(self.root)], marks=[str(self.root), *self.marks])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited at start: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    if conn.recv(4).startswith(b"SSH-"):
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"sshd did not listen on {self.port} within 20 s: {self.log.read_text()[-2000:]}")

    @property
    def url(self) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
        if self._reaper is not None:
            self._reaper.release()


FIXTURE_LABS = Path(__file__).parent / "fixtures_labs"


def far_side(root: Path, *, more_env: tuple[str, ...] = ()) -> Server:
    """The `grade --on` tests' remote (test_grade_on.py, test_grade_on_bare.py): a started loopback sshd
    that forwards to unix sockets (the far agent), whose sessions grade as this suite's local grades do
    (SetEnv: the managed folder ROOT, the fixture labs, ROADMAP_DEVICE=cpu, ROADMAP_DEV_UNLOCKED=1, and
    `more_env` NAME=VALUE words). Without an OpenSSH server the test is skipped, or fails where CI must
    run it (ROADMAP_REQUIRE_SSHD=1). `server.far_root` is ROOT; the caller stops the server."""
    import pytest

    sshd = find_sshd()
    if sshd is None:
        message = f"no OpenSSH server here: {PACKAGE_HINT}"
        if os.environ.get("ROADMAP_REQUIRE_SSHD") == "1":
            pytest.fail(message + " (ROADMAP_REQUIRE_SSHD=1: CI must run these tests)", pytrace=False)
        pytest.skip(message)
    server = Server(
        sshd,
        forwarding="local",
        marks=(str(root),),  # the far agent runs in a session of its own, with ROOT on its command line
        extra_config=(
            f"SetEnv ROADMAP_REMOTE_ROOT={root} ROADMAP_LABS_DIR={FIXTURE_LABS / 'labs'} ROADMAP_DEVICE=cpu "
            "ROADMAP_DEV_UNLOCKED=1" + "".join(f" {word}" for word in more_env),
        ),
    ).start()
    server.far_root = root
    return server
