"""The grader side of the learner sandbox (docs/labs.md, "Adapters").

The grader process (pytest) never imports the workspace. Learner code runs
in a child, the *learner process* (`_learner_main.py`), started lazily (or
early, while pytest collects) and reused across tests. `@learner_side`
functions of the lab's `tests/adapter.py` run there; in the grader process a
call becomes a request over a private pipe and the answer comes back as
plain data (copies) or `LearnerProxy`s (proxies), never as a learner object.

Without a configured sandbox (a lab's tests run by hand) every decorator is a
no-op and `learner_module` imports in-process, as before.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:  # subprocess and select are imported where used: the learner process never needs them
    import subprocess

from roadmap_cli.grading_kit import wire
from roadmap_cli.grading_kit.learner_errors import (
    LearnerCrashed,
    LearnerError,
    LearnerTimeout,
    LearnerViolation,
    rebuild,
)
from roadmap_cli.grading_kit.learner_proxy import LearnerProxy

_REQUESTS = [0]  # requests sent to any learner process in this grader (plugin.py: skips after one)


def requests_sent() -> int:
    return _REQUESTS[0]


_LEARNER_CMD = "from roadmap_cli.grading_kit._learner_main import main; main()"
# Environment the learner process keeps; everything else (PYTEST_*, the
# secret seed, anything about the results channel) is dropped.
KEEP_ENV = {
    "PATH",
    "HOME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
    "USER",
    "LOGNAME",
    "TRITON_INTERPRET",
    "TRITON_CACHE_DIR",
    "TRITON_HOME",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "XDG_CACHE_HOME",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "ROADMAP_DEVICE",
    "ROADMAP_WORKSPACE",
    "MALLOC_ARENA_MAX",
}

_in_learner = False
_config: Optional[dict] = None
_client: Optional["LearnerClient"] = None
on_violation: Optional[Callable[[str], None]] = None  # set by the plugin: voids the attempt


def mark_learner_process() -> None:
    global _in_learner
    _in_learner = True


def in_learner_process() -> bool:
    return _in_learner


def configure(config: Optional[dict]) -> None:
    """Called by the plugin with the engine's sandbox settings (None: in-process)."""
    global _config
    _config = config


def config() -> Optional[dict]:
    """The engine's sandbox settings in the grader process (None when tests run by hand)."""
    return _config


def active() -> bool:
    return _config is not None and not _in_learner


def client() -> "LearnerClient":
    global _client
    if _client is None:
        assert _config is not None, "no sandbox configured"
        _client = LearnerClient(_config)
    return _client


def shutdown() -> None:
    if _client is not None:
        _client.close()


# --------------------------------------------------------------- decorator


def learner_side(fn: Optional[Callable] = None, *, timeout_s: Optional[float] = None):
    """Run the decorated adapter function in the learner process.

    `@kit.learner_side` or `@kit.learner_side(timeout_s=20)` (a call past the
    limit raises `kit.LearnerTimeout`; without it only the grade's own time
    limit applies). Arguments are pickled to the learner process; the
    return value comes back as plain data or learner proxies.
    """

    def wrap(func: Callable) -> Callable:
        label = f"{func.__module__}.{func.__qualname__}"
        if "<locals>" in func.__qualname__:
            # The learner process finds the function again by module and name.
            raise TypeError(f"@learner_side needs a module-level function (or a method), not {label}")

        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not active():
                return func(*args, **kwargs)
            return client().call_fn(func.__module__, func.__qualname__, args, kwargs, timeout_s, label)

        call.learner_side = True  # type: ignore[attr-defined]
        return call

    return wrap(fn) if fn is not None else wrap


def proxy_module(name: str) -> "LearnerProxy":
    return client().request("import", (name,), None, name)


# ----------------------------------------------------------------- client


def learner_env(config: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k in KEEP_ENV or k.startswith("LC_")}
    env["ROADMAP_WORKSPACE"] = config["workspace"]
    if config.get("grade_token"):
        # The engine's second net: it kills whatever still carries this mark
        # when the grade ends, even a process re-parented away from the supervisor.
        env["ROADMAP_GRADE_TOKEN"] = config["grade_token"]
    if config.get("memory_limit_mb"):
        # glibc reserves 64 MB of address space per malloc arena (up to 8 per
        # core): under RLIMIT_AS, many threads could run out of address space
        # long before they run out of memory.
        env.setdefault("MALLOC_ARENA_MAX", "4")
    env["PYTHONUNBUFFERED"] = "1"  # ignored under -I; stdout is flushed per reply instead
    wall = config.get("os_wall")
    if wall:
        env.pop("TRITON_HOME", None)  # a host path: Triton would fall back to HOME, which is its own in there
        env.update(walled_env(wall))
    # torch extensions and Triton kernels build in folders of the learner's own, per workspace, that the wall
    # shows read-write (never the grader's, nor another workspace's: a learner could otherwise fill them with
    # kernels of its choosing for someone else's grade). grading_kit/learner_extras.py.
    from roadmap_cli.grading_kit import learner_extras

    env.update(learner_extras.learner_env(config["workspace"], env.get("PATH", "")))
    return env


def walled_env(wall: dict) -> dict:
    """What the environment says about the learner behind the OS wall: its
    own empty HOME and name, and no host path it cannot see (a cache under the
    real home)."""
    from roadmap_cli.grading_kit import oswall

    return {
        "HOME": oswall.LEARNER_HOME,
        "USER": oswall.LEARNER_USER,
        "LOGNAME": oswall.LEARNER_USER,
        "XDG_CACHE_HOME": oswall.LEARNER_HOME + "/.cache",
        "TMPDIR": "/tmp",
    }


class LearnerClient:
    """One learner process at a time; a crash or a timeout ends it and the
    next call starts a fresh one."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.proc: Optional[subprocess.Popen] = None  # or a warm_learner.WarmLearnerProc
        self.warm = False  # the learner was forked from dev check's warm learner: no bwrap in between
        self.generation = 0
        self.released: list[int] = []
        self.drain = None
        self.req_w = self.rep_r = -1
        self.ready = False
        self.digests = os.environ.get("ROADMAP_OUTPUT_DIGESTS")
        self.digest_test, self.digest_n = None, 0
        self.extensions = None  # learner_extras.ExtensionsLease while a learner process may build

    # --- process lifetime ---------------------------------------------
    def start(self) -> None:
        """Start the learner process (it imports the adapter while we go on)."""
        if self.proc is not None:
            return
        import subprocess

        from roadmap_cli.grading_kit import learner_extras
        from roadmap_cli.grading_kit.boundedlog import PipeDrain

        if self.extensions is None:
            self.extensions = learner_extras.ExtensionsLease(learner_extras.extensions_dir(self.config["workspace"]))
        self.extensions.renew()  # a killed build's lock file would make load_inline wait for ever

        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        flags = ["-I", "-B"] + (["-P"] if sys.version_info >= (3, 11) else [])
        cmd = [sys.executable, *flags, "-c", _LEARNER_CMD, str(req_r), str(rep_w)]
        from roadmap_cli.grading_kit import oswall

        try:
            # dev check: forked from the run's warm learner (grading_kit/warm_learner.py) when there is one.
            self.proc = self._fork_warm(req_r, rep_w, out_w)
            self.warm = self.proc is not None
            if self.proc is None:
                # Behind bubblewrap when the engine chose the OS wall (the pipes' descriptors pass through bwrap).
                with oswall.walled(cmd, self.config.get("os_wall")) as (cmd, wall_fds):
                    self.proc = subprocess.Popen(
                        cmd,
                        cwd=self.config["workspace"],
                        env=learner_env(self.config),
                        stdin=subprocess.DEVNULL,
                        stdout=out_w,
                        stderr=out_w,
                        pass_fds=(req_r, rep_w, *wall_fds),
                        start_new_session=True,
                    )
        finally:
            for fd in (req_r, rep_w, out_w):
                os.close(fd)
        self.req_w, self.rep_r = req_w, rep_r
        self.drain = PipeDrain(out_r, cap=64 * 1024)
        self.generation += 1
        self.ready = False
        self.released = []
        settings = {
            k: self.config.get(k)
            for k in (
                "workspace",
                "tests_dir",
                "memory_limit_mb",
                "nofile",
                "forbidden_read",
                "forbidden_write",
                "preload",
                "nproc",
                "lab_code",
                "learner_side",
            )
        }
        settings["walled"] = bool(self.config.get("os_wall"))
        wire.send(self.req_w, pickle.dumps(settings))

    def _fork_warm(self, req_r: int, rep_w: int, out_w: int):
        """A learner process forked from the warm learner, or None: start it cold
        (a zygote that is gone costs speed, never a grade)."""
        from roadmap_cli.grading_kit import warm_learner

        zygote = warm_learner.usable(self.config)
        if zygote is None:
            return None
        try:
            return warm_learner.spawn(
                zygote,
                env=learner_env(self.config),
                cwd=self.config["workspace"],
                req_r=req_r,
                rep_w=rep_w,
                out_w=out_w,
            )
        except warm_learner.WarmUnavailable:
            return None

    def _stop(self, grace_s: float = 0.0) -> Optional[int]:
        """End the learner process (after `grace_s` for it to end by itself); its status, as Popen gives it."""
        proc, self.proc = self.proc, None
        for fd in (self.req_w, self.rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.req_w = self.rep_r = -1
        if proc is None:
            return None
        if grace_s:
            import subprocess

            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        status = proc.wait()
        if self.config.get("os_wall") and not self.warm and status > 128 and status - 128 < signal.NSIG:
            # bwrap stands between us and the learner process: it exits 128 + N when the learner died of signal N.
            return -(status - 128)
        return status

    def close(self) -> None:
        import subprocess

        if self.extensions is not None:
            self.extensions.close()
            self.extensions = None
        if self.proc is None:
            return
        self._settle_ready()
        try:
            os.close(self.req_w)  # EOF: the learner process exits on its own
            self.req_w = -1
            self.proc.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._stop()

    def _settle_ready(self, wait_s: float = 10.0) -> None:
        """A grade that never called the learner still hears its "ready": the lab-code check's refusal rides on
        it and voids the attempt (labcode.py). The check answers before torch is imported: moments, not the
        whole wait."""
        if self.ready or self.proc is None or self.rep_r < 0:
            return
        try:
            self.ready = True
            self._answer(self._recv(time.monotonic() + wait_s), "the lab-code check")
        except (LearnerViolation, TimeoutError, EOFError, OSError, wire.WireError):
            pass  # a refusal is already reported through on_violation; a learner gone early refuses nothing

    def check_generation(self, gen: int) -> None:
        if gen != self.generation or self.proc is None:
            raise LearnerCrashed("this learner proxy belongs to a learner process that crashed or was restarted")

    # --- messages -------------------------------------------------------
    def _recv(self, deadline: Optional[float]) -> bytes:
        header = self._read(wire._HEADER.size, deadline)
        (size,) = wire._HEADER.unpack(header)
        if size > wire.MAX_MESSAGE:
            raise wire.WireError(f"reply of {size} bytes is over the limit")
        return self._read(size, deadline)

    def _read(self, n: int, deadline: Optional[float]) -> bytes:
        import select

        chunks, left = [], n
        while left:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.rep_r], [], [], wait)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.rep_r, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _crashed(self, label: str) -> LearnerCrashed:
        # The pipe closed: the learner process is dying. A moment to finish (behind bwrap its monitor reports
        # the signal as its exit status) rather than a SIGKILL of our own that would hide the real cause.
        status = self._stop(grace_s=2.0)
        self.drain.settle()
        if status is not None and status < 0:
            try:
                how = signal.Signals(-status).name
            except ValueError:
                how = f"signal {-status}"
            text = f"your code crashed the learner process ({how}) in {label}"
        else:
            text = f"your code ended the learner process (exit status {status}) in {label}"
        return LearnerCrashed(text + _crash_frames(self.drain.tail.text(), self.config["workspace"]))

    def request(self, op: str, payload: tuple, timeout_s: Optional[float], label: str) -> Any:
        _REQUESTS[0] += 1  # the learner's code gets control: what the test does next may follow from it
        if self.proc is None:
            self.start()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            if not self.ready:
                ready = self._recv(None)  # the "ready" message (a lab-code refusal rides on it)
                self.ready = True
                self._answer(ready, label)
            # References the grader dropped ride along with the request (no extra round trip).
            released, self.released = self.released, []
            wire.send(self.req_w, pickle.dumps((op, payload, released), protocol=pickle.HIGHEST_PROTOCOL))
            return self._answer(self._recv(deadline), label)
        except TimeoutError:
            self._stop()
            raise LearnerTimeout(
                f"{label} ran past its time limit of {timeout_s:g} s (the learner process was killed)"
            ) from None
        except (EOFError, BrokenPipeError, wire.WireError) as exc:
            crash = self._crashed(label)
            if isinstance(exc, wire.WireError):
                crash = LearnerCrashed(f"{exc} (in {label})")
            raise crash from None

    def _answer(self, data: bytes, label: str) -> Any:
        reply = wire.loads_reply(data)
        if type(reply) is not tuple or not reply or reply[0] not in ("ok", "exc", "ready"):
            raise wire.WireError("malformed reply")
        violations = reply[-1] if type(reply[-1]) is list else []
        for text in violations:
            if on_violation is not None:
                on_violation(str(text))
        if violations:
            raise LearnerViolation(f"your code {violations[0]} while running {label}: this attempt is void")
        if reply[0] == "ready":
            return None
        if reply[0] == "exc":
            _, base, learner_type, args, message, frames, _ = reply
            raise rebuild(str(base), str(learner_type), tuple(args), str(message), [str(f) for f in frames])
        limit = self.config.get("memory_limit_mb")
        return wire.decode(
            reply[1],
            lambda ref_id, type_name: LearnerProxy(self, self.generation, ref_id, type_name, label),
            limit_bytes=int(limit) << 20 if limit else None,
        )

    def call_fn(
        self, module: str, qualname: str, args: tuple, kwargs: dict, timeout_s: Optional[float], label: str
    ) -> Any:
        try:
            result = self.request("call_fn", (module, qualname, args, kwargs), timeout_s, label)
        except LearnerError as exc:
            self._log_digest(label, args, kwargs, ("raised", getattr(exc, "learner_type", ""), str(exc)))
            raise
        self._log_digest(label, args, kwargs, result)
        return result

    def _log_digest(self, label: str, args: tuple, kwargs: dict, result: Any) -> None:
        if not self.digests:
            return
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        if test != self.digest_test:
            self.digest_test, self.digest_n = test, 0
        record = {
            "test": test,
            "call": label,
            "n": self.digest_n,
            "digest": wire.digest(result),
            "args_digest": wire.digest((args, kwargs)),
        }
        self.digest_n += 1
        with open(self.digests, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def _unescape(line: str) -> str:
    """faulthandler writes non-ASCII characters of file names as \\xNN,
    \\uNNNN or \\UNNNNNNNN: show the learner's real path (e.g. a Chinese folder)."""
    import re

    return re.sub(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})", lambda m: chr(int(m.group(1)[1:], 16)), line)


def _crash_frames(log: str, workspace: str) -> str:
    """The learner's frames from faulthandler's report in the learner's output."""
    lines = [_unescape(ln) for ln in log.rstrip().splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Fatal Python error"):
            frames = [
                ln.strip()
                for ln in lines[i + 1 :]
                if ln.strip().startswith("File ") and "roadmap_cli/grading_kit" not in ln and "<frozen " not in ln
            ]
            mine = [f for f in frames if workspace in f] or frames
            return "\n" + "\n".join([lines[i], *mine[:12]])
    tail = "\n".join(lines[-8:])
    return f"\nlast output of the learner process:\n{tail}" if tail else ""
