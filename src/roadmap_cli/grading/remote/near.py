"""`roadmap grade --on NAME`: grade this workspace on a remote machine (a rented GPU) over ssh.

Near side (`grade_on`): the workspace's files (git's tracked and untracked-
not-ignored files, never .git) are hashed; one ssh connection runs the far
side's agent (agent.py, sent as text to the remote's python),
which answers with what it already has (its manifest of sent hashes, whether
the managed venv of this roadmap build and the result key are there); only
changed files go, in one tar, and files deleted here are deleted there. On
first use the wheel of this very install goes too (built from the checkout,
or repacked from an installed wheel; cached in the data home). The far side
then runs `roadmap grade --events` from its managed venv: the same engine,
pre-check, sandbox and OS wall as a local grade, with its progress streamed
back here as JSON lines and the run itself last, signed (HMAC-SHA256 with the
remote's key, over the run and a fresh nonce of this grade). The attempt is
recorded here, with the remote's device and versions, `graded_on` = NAME,
and checkpoints are marked exactly as a local grade marks them.

Far side: far.py. Wheel: wheel.py. The ssh sessions: session.py.

What is not promised: the far machine's owner (root there) can sign anything
with the key; the signature keeps the learner's code that runs there (behind
the OS wall, which hides the key) and the network path from forging a pass.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import tarfile
import time
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import UserError
from roadmap_cli.grading.remote.registry import RemoteError
from roadmap_cli.grading.remote.session import (
    STOP_WAIT_S,
    AgentSession,
    SshSession,
    agent_state,
    connect_agent,
    save_agent_state,
)
from roadmap_cli.grading.remote.wheel import build_tag

MAX_UPLOAD_BYTES = 200 * 2**20  # a workspace is source code; anything near this is a mistake (a dataset, a checkpoint)


def workspace_hashes(path: Path) -> dict[str, str]:
    """{relative path: sha256} of the files a grade of `path` reads (grading/snapshot.workspace_files, capped
    at MAX_UPLOAD_BYTES): what the far side is asked about, and sent when it lacks them."""
    from roadmap_cli.grading.snapshot import workspace_files

    return {
        rel: hashlib.sha256((path / rel).read_bytes()).hexdigest()
        for rel, _ in workspace_files(path, max_bytes=MAX_UPLOAD_BYTES, carried_by="grade --on sends")
    }


def _tar(path: Path, rels: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for rel in rels:
            info = tar.gettarinfo(str(path / rel), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path / rel, "rb") as f:
                tar.addfile(info, f)
    return buf.getvalue()


class _Background:
    """fn() in a thread; result() joins it and returns its value or raises what it raised."""

    def __init__(self, fn: Callable[[], Path]) -> None:
        import threading

        self._value: Optional[Path] = None
        self._error: Optional[BaseException] = None

        def run() -> None:
            try:
                self._value = fn()
            except BaseException as exc:  # noqa: BLE001 - raised again in result()
                self._error = exc

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> Path:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class _Opened:
    """A grade's session (the far agent's connection, or a new ssh session), opened and sent its request:
    what the hello will be compared against."""

    def __init__(
        self, home: Path, remote, lab_id: str, path: Path, part: Optional[str], timeout: Optional[float]
    ) -> None:
        import secrets

        from roadmap_cli.grading.remote import registry

        self.remote, self.lab_id, self.path, self.part, self.timeout = remote, lab_id, path, part, timeout
        self.key = registry.key(home, remote.name)
        key_id = hashlib.sha256(self.key).hexdigest()[:16]
        self.ws_id = f"{lab_id}-{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
        self.files = workspace_hashes(path)
        self.tag, self.make_wheel = build_tag(home)
        self.nonce = secrets.token_hex(16)
        argv = [lab_id] + (["--part", part] if part else []) + (["--timeout", repr(float(timeout))] if timeout else [])
        self.t0 = time.monotonic()
        self.home = home
        self.control = registry.control_path(home, remote)
        # "agent": the session may start the far agent (it is reached through the shared connection only).
        self.request = {
            "tag": self.tag,
            "key_id": key_id,
            "ws": self.ws_id,
            "argv": argv,
            "nonce": self.nonce,
            "agent": self.control is not None and os.environ.get("ROADMAP_FAR_AGENT") != "0",
            # Where a first install gets torch when the far python has none (remote add --torch ...).
            "torch": {"spec": remote.torch, "index": remote.torch_index},
        }
        sock = connect_agent(home, remote, self.control, self.tag)
        self.session = (
            AgentSession(sock, remote, self.request)
            if sock is not None
            else SshSession(remote, self.request, control=self.control)
        )
        # No far agent of this build known there: most likely its first use, whose hello asks for the wheel.
        # Building it (pip wheel of a checkout: seconds) overlaps with the login and the far python's start
        # instead of following the hello; a cached wheel makes this a file check.
        self._wheel = None if agent_state(home, remote).get("tag") == self.tag else _Background(self.make_wheel)

    def go_early(self) -> None:
        """start_early only: read the hello and, when the far side has this build's venv and the key (a warm
        remote), send the changed files and "go" at once, in a thread, so the far grade runs while this
        process still imports typer, rich and pydantic (it idled for them: ~1.3 s of a 4.6 s warm grade on
        loopback). A first use, an error or no answer is left to grade_on, which says what happens."""
        import threading

        def run() -> None:
            try:
                msg = next((m for m in self.session.lines() if "hello" in m or "error" in m), None)
                self.early = {"msg": msg}
                hello = (msg or {}).get("hello")
                if not hello or not hello.get("venv") or not hello.get("key"):
                    return
                theirs = hello["files"]
                changed = [rel for rel, sha in self.files.items() if theirs.get(rel) != sha]
                deleted = sorted(set(theirs) - set(self.files))
                blob = b""
                if changed or deleted:
                    blob = _tar(self.path, changed)
                    self.session.put("files", blob, delete=deleted, manifest=self.files)
                self.session.send(b'{"go": true}\n')
                self.early["sent"] = {"changed": len(changed), "deleted": len(deleted), "bytes": len(blob)}
            except Exception:  # noqa: BLE001 - grade_on goes on from what was read; a lost connection says so
                return

        self.early = None
        self._early_thread = threading.Thread(target=run, daemon=True)
        self._early_thread.start()

    def early_result(self) -> Optional[dict]:
        """What go_early did: None (not asked, or it read nothing), {"msg": the hello or error message}, with
        "sent" ({"changed", "deleted", "bytes"}) when it sent the files and "go"."""
        thread = getattr(self, "_early_thread", None)
        if thread is None:
            return None
        thread.join()
        return self.early

    def wheel(self) -> Path:
        """This build's wheel: the one built in the background since the session opened, else built now."""
        return self._wheel.result() if self._wheel is not None else self.make_wheel()

    def settle(self) -> None:
        """A background build nobody needed (the far venv was there) finishes before the command exits:
        never a pip process left behind writing into the cache."""
        if self._wheel is not None:
            self._wheel.wait()

    def log_in(self):
        """The far agent did not answer: the same request through a new ssh session (the old way), and the
        agent is not tried again until a session finds it (re)started."""
        state = agent_state(self.home, self.remote)
        save_agent_state(self.home, self.remote, {**state, "unreachable": True})
        self.session = SshSession(self.remote, self.request, control=self.control)
        return self.session

    def matches(self, remote, lab_id: str, path: Path, part: Optional[str], timeout: Optional[float]) -> bool:
        return (
            self.remote == remote
            and self.lab_id == lab_id
            and self.path == path
            and self.part == part
            and (self.timeout or None) == (timeout or None)
        )


_early: Optional[_Opened] = None  # opened by start_early (before typer loads), until grade_on takes it


def start_early(
    home: Path,
    remote_name: str,
    lab_id: str,
    path: Path,
    *,
    part: Optional[str] = None,
    timeout: Optional[float] = None,
) -> bool:
    """`roadmap grade --on NAME`, called by grading/prestart.py before the command line is parsed: open the
    ssh session now, so the connection, the far login and the far agent's start overlap with this side's
    imports (typer, rich, pydantic). grade_on takes it only when it is for the very same grade; anything
    going wrong here opens nothing, and the normal path reports it. Never raises."""
    global _early
    try:
        from roadmap_cli.grading.remote import registry

        remote = registry.get(home, remote_name)
        if not path.is_dir():
            return False
        _early = _Opened(home, remote, lab_id, path, part, timeout)
        _early.go_early()
    except Exception:  # noqa: BLE001 - the normal path says what is wrong
        return False
    return True


def start_early_args(read: dict) -> bool:
    """`roadmap grade ... --on NAME`, as grading/options.read gives it: start_early for the workspace the
    command will grade. Called by the console script (roadmap_cli/entry.py) before typer loads; never
    raises (the normal path reports every problem)."""
    if _early is not None:
        return True
    if (
        read["on"] is None
        or os.environ.get("_ROADMAP_COMPLETE")
        or read["keyword"]
        or read["test"]
        or read["first_failure"]
        or read["verbose"]
    ):
        return False  # not a plain --on grade (or one the command refuses: it says so)
    try:
        from roadmap_cli.labs.service import locate_workspace, workspaces_fast
        from roadmap_cli.paths import resolve_home

        home = resolve_home(None)
        rows = workspaces_fast(home)
        if rows is None:
            return False  # another database, or none yet: the store is needed first
        lab_id, path = locate_workspace(None, read["lab_id"], Path.cwd(), rows)
    except Exception:  # noqa: BLE001
        return False
    return start_early(home, read["on"], lab_id, path, part=read["part"], timeout=read["timeout"])


def discard_early() -> None:
    """Close an early session nobody took (the command failed first): the far agent sees its stdin end and
    exits, cancelling the grade go_early may have started (nothing is left running there)."""
    global _early
    opened, _early = _early, None
    if opened is not None:
        opened.session.close(2.0)
        opened.settle()


def _take_early(remote, lab_id: Optional[str], part: Optional[str], timeout: Optional[float]):
    """The session start_early opened, handed to the grade asking for it: its lab and workspace (resolved from
    the same command line by the console script) are the grade's, not resolved again. None when none was
    opened or it is for another remote, lab, part or time limit (a caller other than that command line):
    that one is closed."""
    global _early
    opened, _early = _early, None
    if opened is None:
        return None
    if opened.matches(remote, lab_id or opened.lab_id, opened.path, part, timeout):
        return opened
    opened.session.close(2.0)
    opened.settle()
    return None


def _state_path(home: Path, remote: str, ws_id: str) -> Path:
    return home / "remote-state" / remote / f"{ws_id}.json"


def _run_from(data: dict):
    from roadmap_cli.grading.results import GradeRun, PartResult, TestResult

    run = dict(data)
    run["parts"] = [PartResult(**p) for p in run["parts"]]
    run["tests"] = [TestResult(**t) for t in run["tests"]]
    return GradeRun(**run)


def grade_on(
    get_store: Callable[[], object],
    home: Path,
    remote_name: str,
    lab_id: Optional[str],
    cwd: Path,
    *,
    part: Optional[str] = None,
    timeout: Optional[float] = None,
    on_event: Optional[Callable[[dict], None]] = None,
    on_progress: Optional[Callable[[str], None]] = None,
    cancel=None,
):
    """Send, grade there, record here. Returns a grade.GradeOutcome (with `.sent`: files sent, deleted).
    `cancel`: a threading.Event that stops the grade there (`roadmap watch --on`: a save during a run); the
    attempt is then recorded as interrupted, as a cancelled local grade is."""
    from roadmap_cli.grading.remote import registry
    from roadmap_cli.grading.grade import GradeOutcome, grade_outcome, record_attempt
    from roadmap_cli.labs.service import find_lab, resolve_workspace, start_command, workspaces, workspaces_fast
    from roadmap_cli.labs.workspace import head_info

    say = on_progress or (lambda line: None)
    remote = registry.get(home, remote_name)
    # The session opened before the command line was parsed (start_early), with the lab and workspace it
    # resolved, when it is for this grade.
    opened = _take_early(remote, lab_id, part, timeout)
    if opened is not None:
        try:
            spec, path = find_lab(opened.lab_id), opened.path
            if part:
                spec.part(part)
        except BaseException:
            opened.session.close(2.0)
            opened.settle()
            raise
    else:
        rows = workspaces_fast(home)
        if rows is None:
            rows = workspaces(get_store())
        spec, path = resolve_workspace(None, lab_id, cwd, rows)
        if not path.is_dir():
            raise UserError(f"workspace {path} is gone: run `{start_command(home, spec.id, path)}`")
        if part:
            spec.part(part)
        opened = _Opened(home, remote, spec.id, path, part, timeout)
    key, ws_id, files, tag, make_wheel = opened.key, opened.ws_id, opened.files, opened.tag, opened.wheel
    nonce, t0, session = opened.nonce, opened.t0, opened.session
    events: list[dict] = []
    signed = None
    started = interrupted = False
    sent = {"changed": 0, "deleted": 0, "bytes": 0, "installed": False, "via": session.via}
    device = {"cuda": False, "name": "?"}
    finished = False
    if cancel is not None:
        import threading

        def stop_on_cancel() -> None:
            while not finished:
                if cancel.wait(0.1):
                    opened.session.end_input()  # the agent stops the grade there, as for Ctrl-C
                    return

        threading.Thread(target=stop_on_cancel, daemon=True).start()
    early = opened.early_result()
    try:
        lines = session.lines()
        if early is not None:  # start_early read the hello already (and maybe sent the files and "go")
            msg = early["msg"] or {}
            if "error" in msg:
                _raise(msg, remote)
            hello = msg.get("hello")
        else:
            hello = next((m["hello"] for m in lines if "hello" in m or "error" in m and _raise(m, remote)), None)
        if hello is None and session.via == "agent" and not (cancel is not None and cancel.is_set()):
            say(f"the far agent on {remote.name} did not answer: grading through a new ssh session")
            session.close(0.5)
            early = None
            session = opened.log_in()
            lines = session.lines()
            hello = next((m["hello"] for m in lines if "hello" in m or "error" in m and _raise(m, remote)), None)
        if hello is None:
            if cancel is not None and cancel.is_set():
                raise _Cancelled
            raise session.failure()
        sent["via"] = session.via
        if session.via == "ssh":
            # What this session says of the far agent: where it listens (started after this grade when it
            # did not run), or nothing (no agent there: its path is too long, or agents are off).
            previous = agent_state(home, remote)
            save_agent_state(
                home,
                remote,
                None
                if not hello.get("agent")
                else {
                    "socket": hello["agent"],
                    "tag": tag,
                    # Unreachable while the agent that was not reached still runs (e.g. the server forbids
                    # forwarding); a new one gets a new try.
                    "unreachable": bool(
                        previous.get("unreachable")
                        and previous.get("socket") == hello["agent"]
                        and hello.get("agent_running")
                    ),
                },
            )
        theirs = hello["files"]
        changed = [rel for rel, sha in files.items() if theirs.get(rel) != sha]
        deleted = sorted(set(theirs) - set(files))
        if early is not None and "sent" in early:
            if early["sent"]["changed"] or early["sent"]["deleted"]:
                say(
                    f"sent {early['sent']['changed']} changed file(s) ({early['sent']['bytes'] / 1024:.0f} KiB)"
                    + (f", deleting {early['sent']['deleted']}" if early["sent"]["deleted"] else "")
                    + f" to {remote.name}"
                )
            sent.update(early["sent"])
        elif not hello["venv"]:
            if not hello.get("torch") and hello.get("ensurepip") is False:
                # Without torch everything must come from pip, and this python cannot give a venv pip.
                _raise(
                    {
                        "error": "",
                        "kind": "no-ensurepip",
                        "python": hello.get("executable"),
                        "version": ".".join(str(hello.get("python", "3")).split(".")[:2]),
                    },
                    remote,
                )
            wheel = make_wheel()
            from roadmap_cli.grading.remote.registry import torch_install_plan

            say(
                f"first use of {remote.name}: sending roadmap {tag} ({wheel.stat().st_size / 2**20:.1f} MB) to set up "
                f"its managed venv"
                + (
                    ""
                    if hello.get("torch")
                    else f" (its python has no torch: pip installs "
                    f"{torch_install_plan(remote, bool(hello.get('nvidia_driver')))})"
                )
            )
            session.put("wheel", wheel.read_bytes(), name=wheel.name.split(".whl")[0][:40] + ".whl")
            sent["installed"] = True
        if early is None or "sent" not in early:
            if not hello["key"]:
                session.put("key", key.hex().encode() + b"\n")
            if changed or deleted:
                blob = _tar(path, changed)
                say(
                    f"sending {len(changed)} changed file(s) ({len(blob) / 1024:.0f} KiB)"
                    + (f", deleting {len(deleted)}" if deleted else "")
                    + f" to {remote.name}"
                )
                session.put("files", blob, delete=deleted, manifest=files)
                sent.update(changed=len(changed), deleted=len(deleted), bytes=len(blob))
            session.send(b'{"go": true}\n')
        for msg in lines:
            if "progress" in msg:
                say(f"{remote.name}: {msg['progress']}")
            elif "error" in msg:
                _raise(msg, remote)
            elif "signed" in msg:
                signed = msg
            elif msg.get("event") == "remote-device":
                device = msg
            elif "event" in msg:
                started = started or msg["event"] == "started"
                events.append(msg)
                if on_event:
                    on_event(msg)
            elif "exit" in msg:
                break
    except _Cancelled:
        pass  # before the grade started there: recorded as interrupted below
    except KeyboardInterrupt:
        interrupted = True
        say(f"stopping the grade on {remote.name}…")
    finally:
        finished = True
        interrupted = interrupted or (cancel is not None and cancel.is_set() and signed is None)
        session.close(STOP_WAIT_S if interrupted or signed is None else 2.0)
        opened.settle()
    if started or signed is not None:
        state = _state_path(home, remote.name, ws_id)
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps(files))  # what the far side now holds (it keeps the same manifest)
    precheck_problem = None
    if signed is not None:
        expected = hmac.new(key, signed["signed"].encode(), hashlib.sha256).hexdigest()
        body = json.loads(signed["signed"])
        if not hmac.compare_digest(expected, str(signed.get("sig"))) or body.get("nonce") != nonce:
            raise RemoteError(
                f"the result from remote {remote.name!r} is not signed with its key (or is a replay): "
                "nothing was recorded"
            )
        run = _run_from(body["run"])
        run.workspace = str(path)
        if body.get("precheck"):
            from roadmap_cli.grading.precheck import Problem

            precheck_problem = Problem(**body["precheck"])
    elif started or interrupted:
        run = _interrupted_run(spec, path, device, part, events, t0)
    else:
        raise session.failure()
    sha, dirty = head_info(path)
    store = get_store()
    attempt_id, marked = record_attempt(store, spec, run, sha, dirty, graded_on=remote.name)
    outcome: GradeOutcome = grade_outcome(
        store, spec, attempt_id, run, sha, dirty, marked, "en", problem=precheck_problem
    )
    outcome.sent = sent  # type: ignore[attr-defined]
    outcome.graded_on = remote.name  # type: ignore[attr-defined]
    # The footers of `grade --on` and `watch --on` say where the grade ran (not on this machine).
    address = remote.url.split("://", 1)[1]
    outcome.graded_where = f"graded remotely on {remote.name} ({address})"  # type: ignore[attr-defined]
    if signed is None and not interrupted:
        raise RemoteError(
            f"the connection to remote {remote.name!r} was lost during the grade: attempt "
            f"{outcome.attempt_number} of {spec.id} is recorded as interrupted"
        )
    return outcome


class _Cancelled(Exception):
    """The grade's `cancel` was set before the far side answered."""


def _raise(msg: dict, remote) -> bool:
    if msg.get("kind") == "no-ensurepip":
        # Debian and Ubuntu ship ensurepip apart from python itself (python3.X-venv): name that package, and
        # the exact commands that fix it (installing it there, or using another python there).
        package = f"python{msg.get('version') or '3'}-venv"
        raise RemoteError(
            f"remote {remote.name!r}: {msg.get('python') or remote.python or 'python3'} has no "
            f"ensurepip, so roadmap cannot install torch and its other dependencies there: run "
            f"`{remote.ssh_command('sudo', 'apt-get', 'install', '-y', package, tty=True)}` (Debian/Ubuntu), "
            f"or use another python there: `{remote.add_command(python='PATH')}`"
        )
    if msg.get("kind") == "torch-install" and remote.torch_index != "pip":
        # Most often a box that cannot reach the index torch's build comes from (a firewall, a mirror only).
        raise RemoteError(
            f"remote {remote.name!r}: {msg['error']} (to take torch from the mirror or wheels pip "
            f"is configured with there: `{remote.add_command(torch_index='pip')}`)"
        )
    raise RemoteError(f"remote {remote.name!r}: {msg['error']}")


def _interrupted_run(spec, path: Path, device: dict, part: Optional[str], events: list[dict], t0: float):
    """What arrived before the grade stopped, marked interrupted: nothing of it counts."""
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from roadmap_cli.grading.results import assemble, mark_interrupted

    dev = SimpleNamespace(
        cuda=bool(device.get("cuda")),
        name=device.get("name") or "?",
        capability=None,
        torch_version=None,
        triton_version=None,
    )
    selected = [p.id for p in spec.parts if (part is None or p.id == part) and (dev.cuda or not p.needs_cuda)]
    run = assemble(spec, path, dev, selected, events, None, False, 0.0, "")
    mark_interrupted(run)
    run.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    run.duration_s = round(time.monotonic() - t0, 3)
    run.grader_sha256 = ""
    return run
