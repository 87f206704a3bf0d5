"""Run a lab's grader on a workspace: pytest in a child process under a
supervisor (labs/_supervisor.py: a child subreaper that kills every
descendant at the end), under a hard timeout; results come back through the
plugin over an authenticated descriptor (labs/channel.py).

Three processes per grade (docs/architecture.md, "Grading"):
  engine (this module)  ->  supervisor  ->  grader (pytest, `python -I`, cwd = a
  private temp dir, never the workspace)  ->  learner process (sandbox.py,
  started by the grader; the only one that imports workspace code).

This module knows nothing of the database or git: it turns (lab spec,
workspace) into a `GradeRun`. `service.grade` records it; `devcheck` uses it
on temporary workspaces.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import GraderError, UserError
from roadmap_cli.labs.device import DeviceInfo, detect_device
from roadmap_cli.labs.focus import Focus, focus_pytest_args  # noqa: F401 - re-exported
from roadmap_cli.labs.isolation import forbidden_sources, not_dumpable, void, write_and_close
from roadmap_cli.labs.spec import LabSpec

POLL_S = 0.05
LOG_TAIL_LINES = 25
# Outcomes of one test: passed|failed|error|skipped from pytest; crashed and
# timeout when the child died while it ran; not-run when it never started.
BAD_TEST_OUTCOMES = {"failed", "error", "crashed", "timeout"}
# "interrupted": Ctrl-C, or `roadmap watch` cancelled the run because a file was saved.
EXIT_CODES = {"passed": 0, "failed": 1, "crash": 1, "error": 4, "timeout": 4, "interrupted": 130}

# Our own pytest config: the workspace's pytest.ini/conftest.py/pyproject are never read.
PYTEST_INI = "[pytest]\naddopts =\npython_files = test_*.py\n"


@dataclass
class TestResult:
    nodeid: str
    part: Optional[str]
    outcome: str
    duration_s: float = 0.0
    message: Optional[str] = None
    fraction: Optional[float] = None
    perf: list = field(default_factory=list)


@dataclass
class PartResult:
    id: str
    title: dict
    max_points: float  # 0 when not graded in this run
    points: float
    status: str  # passed|failed|skipped|not-graded-here|not-run
    needs_cuda: bool
    tests_passed: int = 0
    tests_total: int = 0
    message: Optional[str] = None  # first failure, or why it was not graded


@dataclass
class GradeRun:
    lab_id: str
    workspace: str
    started_at: str
    outcome: str  # passed|failed|error|timeout|crash
    score: float
    max_score: float
    parts: list[PartResult]
    tests: list[TestResult]
    perf: list[dict]
    device: str
    device_capability: Optional[str]
    torch_version: Optional[str]
    triton_version: Optional[str]
    interpret_mode: bool
    grader_sha256: str
    duration_s: float
    message: Optional[str] = None
    unassigned: list[str] = field(default_factory=list)
    log_tail: str = ""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.outcome, 4)

    def part(self, part_id: str) -> PartResult:
        return next(p for p in self.parts if p.id == part_id)


def tests_sha256(tests_dir: Path) -> str:
    """One hash over the grader folder: relative paths and contents, sorted."""
    digest = hashlib.sha256()
    for path in sorted(p for p in tests_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(tests_dir)
        if "__pycache__" in rel.parts or path.suffix == ".pyc":
            continue
        digest.update(rel.as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def gradable_parts(spec: LabSpec, device: DeviceInfo) -> list[str]:
    return [p.id for p in spec.parts if device.cuda or not p.needs_cuda]


def parts_of_tests(spec: LabSpec, tests: list[str]) -> list[str]:
    """The parts the node ids of `--test` belong to; an id of no part is a user mistake."""
    from roadmap_cli.labs.nodeids import part_for

    parts: list[str] = []
    for nodeid in tests:
        part = part_for(nodeid, spec.part_prefixes())
        if part is None:
            owned = next((p.id for p in spec.parts for prefix in p.tests if prefix.startswith(nodeid)), None)
            part = owned
        if part is None:
            files = sorted({t.split("::")[0] for p in spec.parts for t in p.tests})
            raise UserError(f"test {nodeid!r} is in no part of {spec.id}: node ids are relative to the grader's "
                            f"tests/ folder, e.g. {files[0]}::test_name (files: {', '.join(files)})")
        if part not in parts:
            parts.append(part)
    return parts


# Learner-process memory (RLIMIT_AS) when lab.yaml sets no memory_limit_mb:
# torch + triton (interpreter) peak at ~0.8 GB of address space on CPU,
# leaving ~3 GB for the learner's tensors. Not applied with CUDA: the driver
# reserves tens of GB of virtual address space at initialisation.
DEFAULT_MEMORY_LIMIT_MB = 4096
LEARNER_NOFILE = 1024
FINISH_GRACE_S = 0.05  # after the plugin's "finish" event, how long the grader may take to exit by itself
SUPERVISOR = Path(__file__).with_name("_supervisor.py")
# Variables a grader process must not inherit from the user's shell.
_DROP_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "TRITON_INTERPRET", "ROADMAP_RESULTS", "ROADMAP_PARTS",
             "ROADMAP_SECRET_SEED", "ROADMAP_GRADE_FD", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")


def _child_env(workspace: Path, device: DeviceInfo, config_fd: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update(
        ROADMAP_WORKSPACE=str(workspace),
        ROADMAP_DEVICE="cuda" if device.cuda else "cpu",
        ROADMAP_GRADE_FD=str(config_fd),  # a descriptor number, read once and closed by the plugin
        # Only our plugin: third-party plugins (e.g. hypothesis, ~0.5 s) stay out of
        # the grader unless a test imports them itself.
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    if not device.cuda:
        env["TRITON_INTERPRET"] = "1"  # set before triton is imported: kernels run on CPU tensors
    return env


def _unescape(line: str) -> str:
    """faulthandler writes non-ASCII characters of file names as \\xNN,
    \\uNNNN or \\UNNNNNNNN: show the learner's real path (e.g. a Chinese folder)."""
    return re.sub(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})", lambda m: chr(int(m.group(1)[1:], 16)), line)


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The end of the grader's output; after a hard crash, the crash report.

    pytest's faulthandler prints "Fatal Python error: ..." and the stack,
    most recent call first: the learner's frames come first, pytest's
    machinery last, so the interesting part is at the top of that block.
    """
    all_lines = text.rstrip().splitlines()
    for i, line in enumerate(all_lines):
        if line.startswith("Fatal Python error"):
            frames = [_unescape(ln) for ln in all_lines[i + 1:] if ln.strip().startswith("File ")
                      and not any(skip in ln for skip in ("/_pytest/", "/pluggy/", "<frozen "))]
            return "\n".join([line, *frames[:lines]])
    return "\n".join(all_lines[-lines:])


def grade_workspace(
    spec: LabSpec,
    workspace: Path,
    *,
    parts: Optional[list[str]] = None,
    timeout: Optional[float] = None,
    device: Optional[DeviceInfo] = None,
    stop_part_on_fail: bool = False,
    on_event: Optional[Callable[[dict], None]] = None,
    extra_env: Optional[dict[str, str]] = None,
    secret_seed: Optional[int] = None,
) -> GradeRun:
    """Grade `workspace` against the lab's installed tests; never raises for
    learner failures (those are outcomes), only for unusable requests.
    For `roadmap dev mutate`: `secret_seed` fixes the grader's secret seed
    (a fresh random one otherwise), so a mutant and the reference see the
    same inputs; `extra_env` is set in the grader's environment last (e.g.
    ROADMAP_OUTPUT_DIGESTS)."""
    job = GradeJob(spec, workspace, parts=parts, timeout=timeout, device=device, stop_part_on_fail=stop_part_on_fail,
                   extra_env=extra_env, secret_seed=secret_seed)
    job.start()
    return job.finish(on_event)


class GradeJob:
    """One grader run, split in two so the caller can do its own slow work
    (opening the database, asking git) while pytest starts up:

        job = GradeJob(spec, workspace); job.start(); ...; run = job.finish(on_event)
    """

    def __init__(self, spec: LabSpec, workspace: Path, *, parts: Optional[list[str]] = None,
                 timeout: Optional[float] = None, device: Optional[DeviceInfo] = None,
                 stop_part_on_fail: bool = False, extra_env: Optional[dict[str, str]] = None,
                 secret_seed: Optional[int] = None, focus: Optional[Focus] = None,
                 cancel: Optional[threading.Event] = None) -> None:
        self.spec = spec
        self.extra_env = dict(extra_env or {})
        self.secret_seed = secrets.randbits(63) if secret_seed is None else secret_seed
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise UserError(f"workspace {self.workspace} does not exist")
        self.device = device or detect_device()
        for part_id in parts or []:
            spec.part(part_id)  # NotFoundError with did-you-mean
        self.focus = focus or Focus()
        if self.focus.tests:
            in_tests = parts_of_tests(spec, self.focus.tests)
            parts = [p for p in parts if p in in_tests] if parts else in_tests
        here = gradable_parts(spec, self.device)
        self.selected = [p for p in (parts or [p.id for p in spec.parts]) if p in here]
        if not self.selected:
            raise UserError(f"nothing of {spec.id} can be graded here: the selected part(s) need a CUDA GPU "
                            f"({self.device.reason})")
        self.timeout = float(timeout or spec.time_limit_s)
        self.stop_part_on_fail = stop_part_on_fail
        self.cancel_event = cancel or threading.Event()  # set() from any thread: the run stops, "interrupted"
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> "GradeJob":
        from roadmap_cli.labs import channel, integrity
        from roadmap_cli.labs.boundedlog import PipeDrain

        spec, tests_dir = self.spec, self.spec.tests_dir
        targets: list[str] = []
        for part in spec.parts:
            if part.id in self.selected:
                targets += [str(tests_dir / p) for p in part.tests if str(tests_dir / p) not in targets]
        if self.focus.tests:
            targets = [str(tests_dir / nodeid) for nodeid in self.focus.tests]
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.t0 = time.monotonic()
        not_dumpable()
        self.hashes_before = integrity.snapshot(tests_dir)
        self.stats_before = integrity.stat_snapshot(self.hashes_before)
        self.tmp = tempfile.TemporaryDirectory(prefix="roadmap-grade-")
        tmpdir = Path(self.tmp.name)
        ini = tmpdir / "pytest.ini"
        ini.write_text(PYTEST_INI)
        self.key = channel.new_key()
        self.grade_token = secrets.token_hex(16)
        config_r, config_w = os.pipe()
        results_r, results_w = os.pipe()
        out_r, out_w = os.pipe()
        grader = [
            sys.executable, "-I", "-B", "-u", "-m", "pytest",
            "-p", "roadmap_cli.labs.plugin", "-p", "no:cacheprovider",
            "-c", str(ini), "--rootdir", str(tests_dir), "--confcutdir", str(tests_dir),
            "-q", "--continue-on-collection-errors", *focus_pytest_args(self.focus), *targets,
        ]
        cmd = [sys.executable, "-I", "-S", "-B", str(SUPERVISOR), "--", *grader]
        env = _child_env(self.workspace, self.device, config_r)
        env.update(self.extra_env)  # e.g. ROADMAP_OUTPUT_DIGESTS for dev mutate (the grader process reads it)
        try:
            self.proc = subprocess.Popen(cmd, cwd=tmpdir, env=env, stdout=out_w, stderr=out_w,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         pass_fds=(config_r, results_w))
        except OSError as exc:
            for fd in (config_r, config_w, results_r, results_w, out_r, out_w):
                os.close(fd)
            self.tmp.cleanup()
            raise GraderError(f"cannot start the grader: {exc}") from None
        for fd in (config_r, results_w, out_w):
            os.close(fd)  # only the grader holds these now: its exit is our EOF
        self.reader = channel.Reader(results_r, self.key)
        self.output = PipeDrain(out_r)
        try:
            blob = self._config(results_w)
        except BaseException:
            os.close(config_w)  # the plugin sees an empty config and fails: nothing hangs
            self.abort()
            raise
        # Written after the start: listing every lab's solution files (~0.1 s)
        # overlaps with pytest's start-up; the plugin blocks on the pipe until
        # it is here. It fits the pipe buffer (64 KiB) in all but absurd
        # cases; a thread writes it otherwise, so a big one cannot deadlock us.
        self._config_writer = write_and_close(config_w, blob)
        self.sha = tests_sha256(tests_dir)
        return self

    def _config(self, results_w: int) -> bytes:
        """The engine's config for the plugin (and, in "sandbox", for the learner process)."""
        from roadmap_cli.labs import integrity

        spec, tests_dir = self.spec, self.spec.tests_dir
        memory = getattr(spec, "memory_limit_mb", None) or (None if self.device.cuda else DEFAULT_MEMORY_LIMIT_MB)
        config = {
            "key": self.key.hex(),
            "results_fd": results_w,
            "secret_seed": str(self.secret_seed),
            "parts": [{"id": p.id, "tests": p.tests} for p in spec.parts],
            "selected": self.selected,
            "stop_part_on_fail": self.stop_part_on_fail,
            "verbose": self.focus.verbose,
            "sandbox": {
                "workspace": str(self.workspace),
                "tests_dir": str(tests_dir.resolve()),
                "memory_limit_mb": memory,
                "nofile": LEARNER_NOFILE,
                "forbidden_read": forbidden_sources(spec),
                "forbidden_write": [str(tests_dir.resolve()), *(str(p) for p in integrity.GRADER_CODE)],
                "preload": ["adapter"] if (tests_dir / "adapter.py").is_file() else [],
                "grade_token": self.grade_token,
            },
        }
        return json.dumps(config).encode()

    def finish(self, on_event: Optional[Callable[[dict], None]] = None) -> GradeRun:
        from roadmap_cli.labs import integrity

        proc = self.proc
        assert proc is not None, "start() first"
        events: list[dict] = []
        timed_out = interrupted = False
        touched: list[str] = []

        def drain() -> None:
            for event in self.reader.read():
                events.append(event)
                if on_event:
                    on_event(event)

        deadline = self.t0 + self.timeout
        finished_at: Optional[float] = None
        try:
            while True:
                returncode = proc.poll()
                drain()
                if returncode is not None:
                    break
                if finished_at is None and any(ev.get("event") == "finish" and ev.get("exitstatus") in (0, 1)
                                               for ev in events[-3:]):
                    finished_at = time.monotonic()
                if finished_at is not None and time.monotonic() - finished_at > FINISH_GRACE_S:
                    # Every result is in: pytest's summary and interpreter
                    # teardown (~0.3 s with torch loaded) cannot change the grade.
                    self._stop_supervisor()
                    returncode = 0
                    break
                now_stats = integrity.stat_snapshot(self.stats_before)
                touched = touched or integrity.changed(self.stats_before, now_stats)
                if time.monotonic() > deadline:
                    timed_out = True
                    self._stop_supervisor()
                    break
                if self.cancel_event.wait(POLL_S):
                    interrupted = True
                    break
        except KeyboardInterrupt:
            interrupted = True  # recorded as "interrupted" (not a crash, never a best score)
        finally:
            self._stop_supervisor()
            self._kill_marked()
            drain()
            self.output.settle()
            log_tail = _tail(self.output.tail.text())
            self.reader.close()
            self._cleanup()
        after = integrity.snapshot(self.spec.tests_dir)
        touched = sorted(set(touched) | set(integrity.changed(self.hashes_before, after))
                         | set(integrity.changed(self.stats_before, integrity.stat_snapshot(self.stats_before))))
        run = _assemble(self.spec, self.workspace, self.device, self.selected, events,
                        0 if finished_at is not None and not timed_out else proc.returncode,
                        timed_out, self.timeout, log_tail)
        voids = [ev.get("reason", "") for ev in events if ev.get("event") == "void"]
        if self.reader.forged:
            voids.append(f"{self.reader.forged} forged or unauthenticated line(s) appeared on the results channel")
        if touched:
            voids.append(f"grader file(s) changed during the grade: {', '.join(touched[:5])}")
        if voids:
            void(run, voids)
        run.started_at, run.grader_sha256 = self.started_at, self.sha
        run.duration_s = round(time.monotonic() - self.t0, 3)
        if interrupted:
            _mark_interrupted(run)
        elif self.focus.narrows or self.focus.first_failure:
            _mark_focused(run, self.focus)
        return run

    def cancel(self) -> None:
        """Stop the run from another thread (`roadmap watch`: a file was saved)."""
        self.cancel_event.set()

    def _stop_supervisor(self) -> None:
        """SIGTERM: the supervisor kills and reaps every descendant; SIGKILL
        (its group) if it does not finish in time."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            # The supervisor is stuck (stopped by the learner?): kill its
            # tree ourselves; orphans are still re-parented to it while it lives.
            from roadmap_cli.labs._supervisor import descendants

            for pid in descendants(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait()

    def _kill_marked(self) -> None:
        """Second net: processes carrying this grade's token that the
        supervisor could not reach (the learner's code killed it, so its
        orphans went to init)."""
        from roadmap_cli.labs._supervisor import marked

        for _ in range(3):
            pids = marked(f"ROADMAP_GRADE_TOKEN={self.grade_token}")
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def abort(self) -> None:
        """Kill the grader (the caller failed before `finish`)."""
        if self.proc is not None:
            self._stop_supervisor()
            self._kill_marked()
            self.reader.close()
            self._cleanup()

    def _cleanup(self) -> None:
        self.tmp.cleanup()


def _assemble(spec, workspace, device, selected, events, returncode, timed_out, timeout, log_tail) -> GradeRun:
    """Turn the plugin's events and the child's fate into test, part and attempt results."""
    collected: dict[str, Optional[str]] = {}
    results: dict[str, TestResult] = {}
    running: Optional[str] = None
    finish, device_event, unassigned = None, {}, []
    for ev in events:
        kind = ev.get("event")
        if kind == "collected":
            collected.update({nodeid: part for nodeid, part in ev.get("tests", [])})
            unassigned += ev.get("unassigned", [])
        elif kind == "collect_error":
            results[ev["nodeid"]] = TestResult(ev["nodeid"], ev.get("part"), "error", 0.0, ev.get("message"))
        elif kind == "start":
            running = ev["nodeid"]
        elif kind == "result":
            results[ev["nodeid"]] = TestResult(ev["nodeid"], ev.get("part"), ev["outcome"], ev.get("duration_s", 0.0),
                                               ev.get("message"), ev.get("fraction"), ev.get("perf") or [])
            running = None
        elif kind == "device":
            device_event = ev
        elif kind == "finish":
            finish = ev

    message = None
    if timed_out:
        outcome = "timeout"
        message = f"the grader ran past its time limit of {timeout:g} s and was killed"
        if running:
            results[running] = TestResult(running, collected.get(running), "timeout", message=f"killed after {timeout:g} s (time limit)")
    elif finish is None and not running and (returncode or 0) >= 0:
        # pytest gave up before any test ran (e.g. the grader's conftest.py failed to import).
        outcome = "error"
        message = f"the grader did not run: pytest exited with status {returncode}"
    elif finish is None or (returncode is not None and returncode < 0):
        outcome = "crash"
        how = f"killed by signal {signal.Signals(-returncode).name}" if returncode and returncode < 0 else f"exited with status {returncode}"
        message = f"the test process crashed ({how})"
        if running:
            results[running] = TestResult(running, collected.get(running), "crashed", message=f"{message}\n{log_tail}")
    else:
        status = finish.get("exitstatus")
        collect_errors = [r for r in results.values() if r.outcome == "error" and r.nodeid not in collected]
        if status in (0, 1) or (status == 2 and collect_errors and all(r.part for r in collect_errors)):
            outcome = "passed"  # refined below from the parts
        else:
            outcome = "error"
            reason = {2: "interrupted (a grader file failed to import?)", 3: "internal error", 4: "usage error",
                      5: "no tests were collected"}.get(status, f"exit status {status}")
            message = f"the grader failed: pytest {reason}"

    for nodeid, part in collected.items():
        results.setdefault(nodeid, TestResult(nodeid, part, "not-run"))
    tests = list(results.values())
    parts = [_part_result(p, selected, device, tests, outcome) for p in spec.parts]
    if outcome == "passed" and any(p.status not in ("passed", "not-graded-here", "not-run") for p in parts):
        outcome = "failed"
    if outcome == "passed" and not any(p.status == "passed" for p in parts):
        outcome, message = "error", "the grader ran no test"
    return GradeRun(
        lab_id=spec.id, workspace=str(workspace), started_at="", outcome=outcome,
        score=round(sum(p.points for p in parts), 3), max_score=round(sum(p.max_points for p in parts), 3),
        parts=parts, tests=tests, perf=[f for t in tests for f in t.perf],
        device=device_event.get("device") or device.name,
        device_capability=device_event.get("device_capability") or device.capability,
        torch_version=device_event.get("torch_version") or device.torch_version,
        triton_version=device_event.get("triton_version") or device.triton_version,
        interpret_mode=not device.cuda, grader_sha256="", duration_s=0.0, message=message,
        unassigned=unassigned, log_tail=log_tail if outcome in ("error", "crash", "timeout") else "",
    )


def _mark_interrupted(run: GradeRun) -> None:
    """A run stopped by the learner: what finished stays visible, nothing counts."""
    run.outcome, run.log_tail = "interrupted", ""
    run.message = "interrupted before the end: not counted"
    for t in run.tests:
        if t.outcome in ("crashed", "timeout"):
            t.outcome, t.message = "not-run", None
    for p in run.parts:
        if p.status not in ("not-graded-here", "not-run"):
            p.points = 0.0
            if p.status == "failed" and not any(t.part == p.id and t.outcome in BAD_TEST_OUTCOMES for t in run.tests):
                p.status, p.message = "not-run", "interrupted before its tests finished"
    run.score = 0.0


def _mark_focused(run: GradeRun, focus: Focus) -> None:
    """-k/--test ran some tests of a part: passing those is not passing the
    part (no points, no checkpoint). -x: parts after the stop did not run."""
    for p in run.parts:
        mine = [t for t in run.tests if t.part == p.id]
        if p.status == "failed" and mine and all(t.outcome == "not-run" for t in mine):
            p.status, p.max_points = "not-run", 0.0
            p.message = "not run (stopped at the first failure, -x)"
        elif p.status == "failed" and not mine and focus.narrows:
            p.status, p.max_points, p.message = "not-run", 0.0, "no test matched the filter"
        elif p.status == "passed" and focus.narrows:
            p.status, p.points, p.max_points = "focused", 0.0, 0.0
            p.message = (f"{p.tests_passed}/{p.tests_total} selected tests passed "
                         "(a filtered run never completes a part: grade it without -k/--test)")
    run.score = round(sum(p.points for p in run.parts), 3)
    run.max_score = round(sum(p.max_points for p in run.parts), 3)
    # The outcome is about what ran: parts the filter left out no longer fail it.
    if run.outcome == "failed" and not any(p.status in ("failed", "skipped") for p in run.parts) \
            and any(p.status in ("passed", "focused") for p in run.parts):
        run.outcome = "passed"


def _part_result(part, selected, device, tests, outcome) -> PartResult:
    title = part.title.model_dump()
    if part.needs_cuda and not device.cuda:
        return PartResult(part.id, title, 0.0, 0.0, "not-graded-here", True, message="not graded here (needs a CUDA GPU)")
    if part.id not in selected:
        return PartResult(part.id, title, 0.0, 0.0, "not-run", part.needs_cuda, message="not run (another part was selected)")
    mine = [t for t in tests if t.part == part.id]
    result = PartResult(part.id, title, float(part.points), 0.0, "failed", part.needs_cuda,
                        tests_passed=sum(t.outcome == "passed" for t in mine), tests_total=len(mine))
    bad = [t for t in mine if t.outcome in BAD_TEST_OUTCOMES]
    ran = [t for t in mine if t.outcome == "passed"]
    if bad:
        first = bad[0]
        result.message = f"{first.nodeid}: {first.message or first.outcome}"
    elif any(t.outcome == "not-run" for t in mine) or not mine:
        result.message = "the grader stopped before these tests ran" if outcome in ("timeout", "crash") else "no test ran"
    elif not ran:
        result.status, result.message = "skipped", "every test was skipped"
    else:
        result.status = "passed"
        credit = sum(1.0 if t.fraction is None else t.fraction for t in ran) / len(ran)
        result.points = round(part.points * credit, 3)
    return result
