"""The ssh sessions of `grade --on`: a login running the session agent, or a connection to the far agent.

Both speak the same conversation (JSON lines both ways, byte blobs to the far side). The far agent
(daemon.py) is reached through the shared ssh connection's unix-socket forwarding; what this side knows of
it (its socket, its build) is kept in the data home (remote-state/NAME/agent.json).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Optional

from roadmap_cli.grading.remote.registry import SSH_CONNECTION_FAILED, RemoteError

AGENT = Path(__file__).with_name("agent.py")
STOP_WAIT_S = 10.0  # after Ctrl-C: how long the far side gets to stop its grade before ssh itself is killed


class SshSession:
    """One ssh session running the session agent (a login, then agent.py on the remote's python):
    JSON lines both ways, byte blobs to it."""

    via = "ssh"

    def __init__(self, remote, request: dict, control: Optional[Path] = None) -> None:
        agent = AGENT.read_bytes()
        boot = f"import sys; exec(compile(sys.stdin.buffer.read({len(agent)}), 'roadmap-remote-agent', 'exec'))"
        python = remote.python or "python3"
        command = f"{shlex.quote(python)} -c {shlex.quote(boot)}"
        self.remote = remote
        try:
            # Its own session: a Ctrl-C in the terminal reaches us only; we end the far grade in order.
            self.proc = subprocess.Popen(
                remote.ssh_argv(command, control=control),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise RemoteError(
                "the `ssh` command is not installed here (install OpenSSH's client, e.g. the Debian "
                "package openssh-client)"
            ) from None
        self.stderr = b""
        import threading

        def drain_stderr() -> None:
            for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
                self.stderr = (self.stderr + chunk)[-8192:]

        self._stderr_thread = threading.Thread(target=drain_stderr, daemon=True)
        self._stderr_thread.start()
        self.send(agent + (json.dumps(request) + "\n").encode())

    def send(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the connection is gone: reading says how

    def put(self, kind: str, blob: bytes, **extra) -> None:
        self.send((json.dumps({"put": kind, "size": len(blob), **extra}) + "\n").encode() + blob)

    def lines(self):
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", "replace").strip()
            if text.startswith("{"):
                try:
                    yield json.loads(text)
                except ValueError:
                    continue  # not ours (a login script's output)

    def failure(self) -> RemoteError:
        """Why the connection ended without an answer, in one line."""
        rc = self.proc.wait()
        self._stderr_thread.join(timeout=2)
        text = self.stderr.decode("utf-8", "replace")
        if rc == SSH_CONNECTION_FAILED:
            from roadmap_cli.grading.remote.registry import ssh_failure

            return ssh_failure(self.remote, text)
        last = (text.strip().splitlines() or [f"exit status {rc}"])[-1].strip()
        if rc == 127:
            return RemoteError(
                f"remote {self.remote.name!r} has no {self.remote.python or 'python3'} ({last}); "
                f"point `{self.remote.add_command(python='PATH')}` at one"
            )
        return RemoteError(f"remote {self.remote.name!r}: the connection ended ({last})")

    def end_input(self) -> None:
        """The agent sees its stdin end: it stops the grade there (nothing is left running) and exits."""
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def close(self, wait_s: float = STOP_WAIT_S) -> None:
        """End our side: the agent sees its stdin end and stops the grade; ssh is killed if it lingers."""
        self.end_input()
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class AgentSession:
    """One connection to the far agent (grading/remote/daemon.py) through the shared ssh connection's
    forwarded unix socket: the same conversation as SshSession's, with no new ssh session on the far side."""

    via = "agent"

    def __init__(self, sock, remote, request: dict) -> None:
        self.sock, self.remote = sock, remote
        self.rfile = sock.makefile("rb")
        self.send((json.dumps(request) + "\n").encode())

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # the connection is gone: reading says how

    put = SshSession.put

    def lines(self):
        try:
            for raw in self.rfile:
                text = raw.decode("utf-8", "replace").strip()
                if text.startswith("{"):
                    try:
                        yield json.loads(text)
                    except ValueError:
                        continue
        except OSError:
            return

    def failure(self) -> RemoteError:
        return RemoteError(f"remote {self.remote.name!r}: the connection to its far agent ended")

    def end_input(self) -> None:
        import socket

        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self, wait_s: float = STOP_WAIT_S) -> None:
        """End our side; the far agent cancels the grade (nothing keeps running there), then closes: wait
        for that, at most wait_s."""
        self.end_input()
        try:
            self.sock.settimeout(wait_s)
            while self.sock.recv(65536):
                pass
        except OSError:
            pass
        self.sock.close()


def _agent_state_path(home: Path, remote) -> Path:
    return home / "remote-state" / remote.name / "agent.json"


def agent_state(home: Path, remote) -> dict:
    """What this side knows of `remote`'s far agent (its socket, its build tag, whether it was unreachable);
    {} when nothing is known."""
    try:
        data = json.loads(_agent_state_path(home, remote).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_agent_state(home: Path, remote, state: Optional[dict]) -> None:
    """Replace what is known of `remote`'s far agent (None: forget it), atomically; a failure only costs a login."""
    path = _agent_state_path(home, remote)
    try:
        if state is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, path)
    except OSError:
        pass  # only an optimisation is lost: the next grade comes through a login


def _local_agent_socket(control: Path, far_socket: str) -> Path:
    """This side's end of the forwarding to `far_socket`, beside the shared connection's control socket (the
    same 0700 folder; ssh makes it 0600)."""
    return control.with_name(f"{control.name}-{hashlib.sha256(far_socket.encode()).hexdigest()[:8]}")


def connect_agent(home: Path, remote, control: Optional[Path], tag: str):
    """A socket connected to the far agent of build `tag` through the shared ssh connection, or None (no
    shared connection open, no agent known, or the forwarding cannot be set up): the caller logs in."""
    import socket

    state = agent_state(home, remote)
    far = state.get("socket")
    if (
        control is None
        or not far
        or state.get("tag") != tag
        or state.get("unreachable")
        or os.environ.get("ROADMAP_FAR_AGENT") == "0"
        or ":" in str(control)
    ):
        return None
    local = _local_agent_socket(control, far)

    def connect():
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(local))
        except OSError:
            sock.close()
            return None
        return sock

    sock = connect()
    if sock is None:
        if not control.exists():
            return None  # no shared connection: the login opens one
        try:
            local.unlink(missing_ok=True)  # left by a master that is gone: ssh cannot bind over it
            # The master (if alive) listens on `local` and opens a channel to `far` for each connection:
            # one ssh command, once per shared connection.
            proc = subprocess.run(
                remote.ssh_argv("true", control=control)[:-3]
                + ["-O", "forward", "-L", f"{local}:{far}", "--", remote.host],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            return None
        sock = connect()
    return sock


# Run by the far python through a login when no shared connection is open (`remote remove`): asks the far
# agent listening on argv[1] to stop. Standard library only; one word on stdout.
_STOP_AGENT = r"""
import socket, sys
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(sys.argv[1])
        sock.sendall(b'{"stop": true}\n')
        print("stopped" if b"stopping" in sock.makefile("rb").readline(4096) else "no-answer")
except OSError:
    print("not-running")
"""


def stop_far_agent(home: Path, remote) -> str:
    """`roadmap remote remove`: ask the far agent to stop (it exits once no grade runs; a grade of another
    near side of the same far user finishes first): through the shared connection when it is open, else
    through a login. Returns "stopped", "none" (no agent known, or it was not running any more) or
    "unreachable: WHY" (it stops by itself after its idle timeout). Never raises."""
    from roadmap_cli.grading.remote import registry

    state = agent_state(home, remote)
    save_agent_state(home, remote, None)
    far = state.get("socket")
    if not far:
        return "none"
    try:
        control = registry.control_path(home, remote)
        local = _local_agent_socket(control, far) if control is not None else None
        if local is not None and local.exists():
            import socket

            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(5)
                    sock.connect(str(local))
                    sock.sendall(b'{"stop": true}\n')
                    if b"stopping" in sock.makefile("rb").readline(4096):
                        return "stopped"
            except OSError:
                pass  # the forwarding's master is gone: a login reaches it
            finally:
                local.unlink(missing_ok=True)  # the master keeps listening until it is closed; the name goes now
        # No shared connection (ControlPersist ran out, a reboot here): one login, without leaving a shared
        # connection behind for a remote that is being removed.
        python = shlex.quote(remote.python or "python3")
        command = f"{python} -c {shlex.quote(_STOP_AGENT)} {shlex.quote(far)}"
        proc = subprocess.run(
            remote.ssh_argv(command, connect_timeout_s=5),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=20,
        )
        words = proc.stdout.split()
        if proc.returncode == 0 and words:
            return "stopped" if words[-1] == "stopped" else "none"
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        return "unreachable: " + (lines[-1] if lines else f"ssh exited with {proc.returncode}")
    except subprocess.TimeoutExpired:
        return "unreachable: no answer within 20 s"
    except Exception as exc:  # noqa: BLE001 - removing a remote never fails on its far side
        return f"unreachable: {exc}"
