"""The far agent of `roadmap grade --on NAME`: one long-lived process per roadmap build on the remote machine.

A grade --on through a new ssh session pays, on the far side, a login shell
(sshd runs the command through the user's shell, and its rc files) and two
Python starts (the session's agent, then the grade's `roadmap grade --events`
with its imports), and its grader imports torch and pytest again: on a small
grade that is most of the wait. This agent pays them once. The session agent
(grading/remote/agent.py) starts it after a grade, from the build's managed
venv, with that grade's environment:

    ENV/bin/python -m roadmap_cli.grading.remote.daemon ROOT TAG

It listens on ROOT/agents/TAG.sock (the folder 0700, the socket 0600, both
checked to be this user's), keeps a warm grader (grading/warm.py: torch and
pytest imported, forked per grade) and exits after IDLE_S without a
connection, or when asked to stop (`roadmap remote remove`), or when its
socket is taken from it. The near side reaches it through the ssh connection
it already shares (OpenSSH stream-local forwarding: `ssh -O forward -L
LOCAL.sock:ROOT/agents/TAG.sock`): no new session, no shell, no Python start.
sshd connects as the user who logged in; any other peer is refused
(SO_PEERCRED), and this agent only ever runs as the user who started it.

One connection is one grade, with the session agent's conversation (request,
hello, puts, go, the grade's JSON lines, the signed run, exit): the same
files are sent (changed only, deletions mirrored), the same engine grades
(GradeJob: pre-check, manifest check, sandbox, OS wall), and the run is signed
with the same key and the grade's nonce, here, in a process the learner's code
never runs in. When the connection ends before the grade does (Ctrl-C there,
a dropped connection), the grade is cancelled: its supervisor kills every
process of it, and it is reported interrupted to nobody.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from roadmap_cli.grading.remote import agent

IDLE_S = float(os.environ.get("ROADMAP_FAR_AGENT_IDLE_S") or 15 * 60)
_TICK_S = 1.0  # how often the accept loop looks at the clock, the stop flag and its socket
_MAX_LINE = 1 << 24  # a request or put header: a manifest of a big workspace fits


class _Conn:
    """One grade's connection: JSON lines and byte blobs in, JSON lines out."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile = sock.makefile("rb")
        self.lock = threading.Lock()
        self.gone = threading.Event()

    def say(self, obj: dict) -> bool:
        data = (json.dumps(obj) + "\n").encode()
        with self.lock:
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                self.gone.set()
                return False

    def line(self) -> Optional[dict]:
        raw = self.rfile.readline(_MAX_LINE)
        if not raw.endswith(b"\n"):
            return None  # ended (or a line too long to be ours)
        return json.loads(raw)

    def exact(self, size: int) -> Optional[bytes]:
        data = self.rfile.read(size)
        return data if len(data) == size else None


class Agent:
    def __init__(self, root: str, tag: str) -> None:
        self.root, self.tag = root, tag
        self.home = os.path.join(root, "home")
        self.path = agent.agent_socket(root, tag)
        self.active = 0
        self.last = time.monotonic()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.warm = None
        self.device = None

    # ------------------------------------------------------------ life

    def serve(self) -> int:
        if self.path is None:
            return 2
        agents = os.path.dirname(self.path)
        os.makedirs(agents, mode=0o700, exist_ok=True)
        st = os.stat(agents)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            print(f"refusing to run: {agents} is not this user's alone (mode {st.st_mode & 0o777:o})", file=sys.stderr)
            return 2
        lock = self.lock_file = open(os.path.join(agents, self.tag + ".lock"), "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another agent of this build runs: it serves
        try:
            os.unlink(self.path)  # left by an agent that was killed (we hold the lock: it is not running)
        except FileNotFoundError:
            pass
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is born 0600: no moment where another user could connect
        try:
            srv.bind(self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        ino = self.ino = os.stat(self.path).st_ino
        srv.listen(16)
        srv.settimeout(_TICK_S)
        # Listening: a grade that comes now waits in the backlog while the device is detected.
        print(f"far agent {os.getpid()} of {self.tag} listening on {self.path}", flush=True)
        from roadmap_cli.labs.device import detect_device

        self.device = detect_device()
        if os.environ.get("ROADMAP_WARM_GRADERS") != "0":
            from roadmap_cli.grading.launch import warm_graders

            self.warm = warm_graders(self.device)  # from the main thread: the zygote dies with this one
        try:
            while True:
                with self.lock:
                    idle = self.active == 0 and time.monotonic() - self.last > IDLE_S
                    if (self.stopping.is_set() or idle) and self.active == 0:
                        break
                if not self.stopping.is_set() and not _still_ours(self.path, ino):
                    self.stopping.set()  # our socket was removed or replaced: nobody can reach us any more
                    continue
                try:
                    conn, _ = srv.accept()
                except socket.timeout:
                    continue
                if self.stopping.is_set():
                    conn.close()
                    continue
                with self.lock:
                    self.active += 1
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            if _still_ours(self.path, ino):
                os.unlink(self.path)
            srv.close()
            if self.warm is not None:
                self.warm.close()
        print(f"far agent {os.getpid()} of {self.tag} exits", flush=True)
        return 0

    def _retire(self) -> None:
        """Stop serving now (grades still running finish): the socket and the lock go at once, so the next
        grade logs in and starts a new agent instead of waiting for this one to end."""
        with self.lock:
            self.stopping.set()
            if _still_ours(self.path, self.ino):
                os.unlink(self.path)
            self.lock_file.close()

    # ------------------------------------------------------------ one grade

    def _handle(self, sock: socket.socket) -> None:
        try:
            pid, uid, _ = struct.unpack(
                "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            )
            if uid != os.getuid():
                return  # only the user this agent runs as (sshd, acting for them) may talk to it
            conn = _Conn(sock)
            try:
                self._converse(conn)
            except (agent.Refused, ValueError, KeyError, TypeError) as exc:
                conn.say({"error": f"the far agent refused the request: {exc}"})
        except Exception as exc:  # noqa: BLE001 - one grade's failure never ends the agent
            try:
                sock.sendall(
                    (json.dumps({"error": f"the far agent failed: {type(exc).__name__}: {exc}"}) + "\n").encode()
                )
            except OSError:
                pass
        finally:
            try:
                sock.close()
            except OSError:
                pass
            with self.lock:
                self.active -= 1
                self.last = time.monotonic()

    def _converse(self, conn: _Conn) -> None:
        req = conn.line()
        if req is None:
            return
        if req.get("stop"):
            self._retire()
            conn.say({"stopping": os.getpid()})
            return
        key_id, ws_id, tag = req["key_id"], req["ws"], req["tag"]
        for value in (key_id, ws_id, tag):
            if not value or "/" in value or value.startswith("."):
                raise ValueError(f"bad request: {value!r}")
        if tag != self.tag:
            raise ValueError(f"this agent serves roadmap {self.tag}, not {tag}")
        key_path = os.path.join(self.home, "keys", key_id)
        ws = os.path.join(self.root, "work", key_id, ws_id)
        manifest_path = ws + ".manifest.json"
        os.makedirs(ws, exist_ok=True)
        files = agent.current_files(ws, manifest_path)
        conn.say(
            {
                "hello": {
                    "venv": True,
                    "key": os.path.exists(key_path),
                    "files": files,
                    "torch": None,
                    "python": sys.version.split()[0],
                    "root": self.root,
                    "agent": self.path,
                    "agent_pid": os.getpid(),
                }
            }
        )
        while True:
            msg = conn.line()
            if msg is None:
                return  # the near side went away before the grade
            if msg.get("go"):
                break
            blob = conn.exact(int(msg["size"]))
            if blob is None:
                return
            if msg["put"] == "key":
                fd = os.open(key_path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                os.replace(key_path + ".tmp", key_path)
            elif msg["put"] == "files":
                agent.apply_files(ws, blob, msg.get("delete", []), msg["manifest"])
                agent.save_manifest(ws, manifest_path, msg["manifest"])
            # "wheel": this build's venv is the one we run from; nothing to install.
        try:
            key = bytes.fromhex(Path(key_path).read_text().strip())
        except (OSError, ValueError):
            conn.say({"error": "no usable result key here (it was not sent)"})
            return
        lab_id, part, timeout = _read_argv(req["argv"])
        cancel = threading.Event()

        def watch_input() -> None:
            # Ctrl-C there ends the near side's input; a dropped connection ends it too: the grade stops.
            try:
                while conn.rfile.read1(4096):
                    pass
            except (OSError, ValueError):
                pass
            conn.gone.set()
            cancel.set()

        threading.Thread(target=watch_input, daemon=True).start()
        rc = self._grade(conn, lab_id, Path(ws), part, timeout, key, req["nonce"], cancel)
        conn.say({"exit": rc})

    def _grade(
        self,
        conn: _Conn,
        lab_id: str,
        workspace: Path,
        part: Optional[str],
        timeout: Optional[float],
        key: bytes,
        nonce: str,
        cancel: threading.Event,
    ) -> int:
        """What `roadmap grade --events` does (grading/remote/far.events_grade), in a thread of this agent:
        its lines through `conn`, the signed run last."""
        from roadmap_cli.errors import RoadmapError
        from roadmap_cli.grading import precheck
        from roadmap_cli.grading.remote.far import signed_result
        from roadmap_cli.grading.runner import GradeJob
        from roadmap_cli.labs.spec import find_lab

        try:
            spec = find_lab(lab_id)
            problem = precheck.check_workspace(workspace)
            job = GradeJob(
                spec,
                workspace,
                parts=[part] if part else None,
                timeout=timeout,
                device=self.device,
                warm=self.warm,
                cancel=cancel,
            )
        except RoadmapError as exc:
            conn.say({"error": str(exc)})
            return int(getattr(exc, "exit_code", 1))
        conn.say({"event": "remote-device", "cuda": job.device.cuda, "name": job.device.name})
        if problem is not None:
            run = precheck.failed_run(job, problem)
        else:
            try:
                job.start()
                conn.say({"event": "started"})
                run = job.finish(conn.say)
            except RoadmapError as exc:
                job.abort()
                conn.say({"error": str(exc)})
                return int(getattr(exc, "exit_code", 1))
            except BaseException:
                job.abort()
                raise
        conn.say(signed_result(key, nonce, run, problem))
        return run.exit_code


def _read_argv(argv: list) -> tuple[str, Optional[str], Optional[float]]:
    """LAB [--part P] [--timeout S]: what the near side's _Opened sends."""
    rest = [str(a) for a in argv]
    lab_id = rest.pop(0)
    part = timeout = None
    while rest:
        name = rest.pop(0)
        value = rest.pop(0)
        if name == "--part":
            part = value
        elif name == "--timeout":
            timeout = float(value)
        else:
            raise ValueError(f"unknown option {name!r}")
    return lab_id, part, timeout


def _still_ours(path: str, ino: int) -> bool:
    try:
        return os.stat(path).st_ino == ino
    except OSError:
        return False


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m roadmap_cli.grading.remote.daemon ROOT TAG", file=sys.stderr)
        return 2
    return Agent(argv[0], argv[1]).serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
