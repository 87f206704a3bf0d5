"""Run a lab's grader on a workspace: pytest in a child process under a
supervisor (grading/_supervisor.py: a child subreaper that kills every
descendant at the end), under a hard timeout; results come back through the
plugin over an authenticated descriptor (grading/channel.py).

Three processes per grade (docs/architecture.md, "Grading"):
  engine (this module)  ->  supervisor  ->  grader (pytest, `python -I`, cwd = a
  private temp dir, never the workspace)  ->  learner process (sandbox.py,
  started by the grader; the only one that imports workspace code).

This module knows nothing of the database or git: it turns (lab spec,
workspace) into a `GradeRun`. `grading.grade` records it; `devcheck` uses it
on temporary workspaces. What the events mean (tests, parts, the outcome) is
results.py's business: this module runs processes and reads the channel.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Union

from roadmap_cli.errors import GraderError, UserError
from roadmap_cli.grading_kit.boundedlog import crash_tail
from roadmap_cli.labs.device import DeviceInfo, detect_device
from roadmap_cli.grading.focus import Focus, focus_pytest_args  # noqa: F401 - re-exported
from roadmap_cli.grading.isolation import not_dumpable, void, write_and_close
from roadmap_cli.grading_kit.oswall import STRONG
from roadmap_cli.grading.grade_config import grade_config
from roadmap_cli.grading.launch import (
    GRADE_NETWORK_VAR,
    PYTEST_INI,
    PYTEST_MAIN,
    SUPERVISOR,
    child_env,
    grader_python,
)
from roadmap_cli.grading.results import GradeRun, assemble, mark_focused, mark_interrupted
from roadmap_cli.grading.selection import gradable_parts, parts_of_tests

if TYPE_CHECKING:  # pragma: no cover - the spec's pydantic models are not needed to start pytest (labs/plan.py)
    from roadmap_cli.grading.warm import WarmGraders, WarmLearners, WarmProc
    from roadmap_cli.labs.spec import LabSpec

POLL_S = 0.05


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


FINISH_GRACE_S = 0.05  # after the plugin's "finish" event, how long the grader may take to exit by itself


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
    focus: Optional[Focus] = None,
    warm: Optional["WarmGraders"] = None,
    learners: Optional["WarmLearners"] = None,
) -> GradeRun:
    """Grade `workspace` against the lab's installed tests; never raises for
    learner failures (those are outcomes), only for unusable requests.
    For `roadmap dev mutate`: `secret_seed` fixes the grader's secret seed
    (a fresh random one otherwise), so a mutant and the reference see the
    same inputs; `extra_env` is set in the grader's environment last (e.g.
    ROADMAP_OUTPUT_DIGESTS); `focus` runs only some tests (`dev check`: a
    wrong variant's rule tests); `warm` forks the grader from a warm
    interpreter (grading/warm.py) instead of starting Python again;
    `learners` forks the learner process from dev check's warm learner
    (its root must hold `workspace`, or the learner starts cold)."""
    # The authoring tools' entry: authors change a lab's tests while they write them (no manifest check).
    job = GradeJob(
        spec,
        workspace,
        parts=parts,
        timeout=timeout,
        device=device,
        stop_part_on_fail=stop_part_on_fail,
        extra_env=extra_env,
        secret_seed=secret_seed,
        focus=focus,
        verify_install=False,
        warm=warm,
        learners=learners,
    )
    job.start()
    return job.finish(on_event)


class GradeJob:
    """One grader run, split in two so the caller can do its own slow work
    (opening the database, asking git) while pytest starts up:

        job = GradeJob(spec, workspace); job.start(); ...; run = job.finish(on_event)
    """

    def __init__(
        self,
        spec: LabSpec,
        workspace: Path,
        *,
        parts: Optional[list[str]] = None,
        timeout: Optional[float] = None,
        device: Optional[DeviceInfo] = None,
        stop_part_on_fail: bool = False,
        extra_env: Optional[dict[str, str]] = None,
        secret_seed: Optional[int] = None,
        focus: Optional[Focus] = None,
        cancel: Optional[threading.Event] = None,
        verify_install: bool = True,
        warm: Optional["WarmGraders"] = None,
        learners: Optional["WarmLearners"] = None,
        scratch_parent: Optional[str] = None,
    ) -> None:
        self.spec = spec
        self.warm = warm
        self.learners = learners
        # The grade's scratch folder (pytest's basetemp, the learner's Triton cache) goes here: under a warm
        # learner's root, the one folder its learners can write.
        self.scratch_parent = scratch_parent or (learners.root if learners is not None else None)
        self.verify_install = verify_install  # False only for the authoring tools (grade_workspace)
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
            raise UserError(
                f"nothing of {spec.id} can be graded here: the selected part(s) need a CUDA GPU ({self.device.reason})"
            )
        self.timeout = float(timeout or spec.time_limit_s)
        self.stop_part_on_fail = stop_part_on_fail
        self.cancel_event = cancel or threading.Event()  # set() from any thread: the run stops, "interrupted"
        self.proc: Optional[Union[subprocess.Popen, "WarmProc"]] = None
        from roadmap_cli.grading_kit import oswall

        try:
            # "strong": learner code runs behind bubblewrap; "weak": the in-process sandbox only (and why).
            self.sandbox, self.sandbox_why = oswall.status()
        except oswall.WallUnavailable as exc:
            raise GraderError(str(exc)) from None

    def start(self) -> "GradeJob":
        from roadmap_cli.grading import channel, integrity, manifest, weak_content, weak_runtime, weak_taint, weak_watch
        from roadmap_cli.grading_kit.boundedlog import PipeDrain

        spec, tests_dir = self.spec, self.spec.tests_dir
        if self.verify_install:
            verdict = manifest.verify(spec.root)  # what judges must be what was installed (grading/manifest.py)
            if not verdict.ok:
                raise GraderError(verdict.line())
        taint = weak_taint.taint_line()  # an earlier weak grade left something a judge would run
        if taint is not None:
            raise GraderError(taint)
        # Once a weak grade has run here, every grade first checks the runtime (and the shared C++ cache)
        # against what that grade left: a process it left behind may have edited a file since.
        runtime_now, changed_since = weak_taint.verify_runtime()
        if changed_since is not None:
            raise GraderError(changed_since)
        # Around a weak grade the engine watches what a later grade's judge runs (grading/weak_watch.py); the
        # margin covers the kernel's coarse file-time clock.
        self.weak_watch = weak_watch.weak_watch() if self.sandbox != STRONG else None
        self.weak_t0 = time.time_ns() - 50_000_000
        self.runtime_before = None
        self.reaper = None
        self.reaper_was_active = False
        self.judge_before: dict[str, str] = {}
        if self.sandbox != STRONG:
            self.runtime_before = runtime_now or weak_runtime.tree_snapshot(weak_runtime.judge_roots())
            # What judges beyond the runtime: the lab folder (tests/, data/) and the checkout's git state, by
            # content, held here where the grade cannot rewrite it (git HEAD is no baseline: learner code can
            # commit).
            self.judge_before = weak_content.judge_hashes(spec.root)
            from roadmap_cli.grading.orphans import Reaper

            self.reaper = Reaper()  # the engine adopts the grade's orphans, and kills them when it ends
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
        self.tmp = tempfile.TemporaryDirectory(prefix="roadmap-grade-", dir=self.scratch_parent)
        self.shim_parent = tempfile.TemporaryDirectory(prefix="roadmap-shim-")
        # This grade's C++ builds, for its walled processes (never the whole cache). dev check's warm learner
        # was given the cache itself when it started (it runs the project's own code): its grades use that.
        self.artefacts = None
        if self.learners is None:
            self.artefacts = os.path.join(self.shim_parent.name, "artefacts")
            os.mkdir(self.artefacts)
        tmpdir = Path(self.tmp.name)
        ini = tmpdir / "pytest.ini"
        ini.write_text(PYTEST_INI)
        self.key = channel.new_key()
        self.grade_token = secrets.token_hex(16)
        config_r, config_w = os.pipe()
        results_r, results_w = os.pipe()
        out_r, out_w = os.pipe()
        pytest_args = [
            "-p",
            "roadmap_cli.grading.plugin",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ini),
            "--rootdir",
            str(tests_dir),
            "--confcutdir",
            str(tests_dir),
            # tmp_path inside the grade's scratch folder: the one folder both sides of the OS wall can write.
            "--basetemp",
            str(tmpdir / "pytest-tmp"),
            "-q",
            "--continue-on-collection-errors",
            *focus_pytest_args(self.focus),
            *targets,
        ]
        # A private bytecode cache: a .pyc planted in a __pycache__ beside a grader module is never read.
        grader = [*grader_python(PYTEST_MAIN), *pytest_args]
        cmd = [sys.executable, "-I", "-S", "-B", str(SUPERVISOR), "--", *grader]
        env = child_env(self.workspace, self.device, config_r)
        env.update(self.extra_env)  # e.g. ROADMAP_OUTPUT_DIGESTS for dev mutate (the grader process reads it)
        # The GPU build cache, named once: the wall's read-write folders (learner_view, here) and the learner's
        # TORCH_EXTENSIONS_DIR/TRITON_CACHE_DIR (the grader, from its own environment) must be the same folders,
        # though a worker gives each submission's grade a HOME of its own (red team X1/P3).
        from roadmap_cli.grading_kit import learner_extras

        self.gpu_cache = self.extra_env.get(learner_extras.CACHE_VAR) or str(learner_extras.cache_root())
        env[learner_extras.CACHE_VAR] = self.gpu_cache
        pass_fds: tuple[int, ...] = (config_r, results_w)
        if self.learners is not None and self.sandbox == STRONG:
            # The warm learner's socket, at the same number in the grader (grading_kit/warm_learner.py).
            env.update(self.learners.grade_env())
            pass_fds += (self.learners.fd,)
        elif self.sandbox == STRONG:
            # The grader makes the grade's network as it starts, while it has one thread (grading/plugin.py).
            env[GRADE_NETWORK_VAR] = "1"
        try:
            self.proc = self._spawn_warm(pytest_args, env, tmpdir, out_w, pass_fds)
            if self.proc is None:
                self.proc = subprocess.Popen(
                    cmd,
                    cwd=tmpdir,
                    env=env,
                    stdout=out_w,
                    stderr=out_w,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    pass_fds=pass_fds,
                )
        except OSError as exc:
            for fd in (config_r, config_w, results_r, results_w, out_r, out_w):
                os.close(fd)
            self._kill_orphans()
            self._cleanup()
            raise GraderError(f"cannot start the grader: {exc}") from None
        from roadmap_cli.grading import orphans

        orphans.supervisor_started(self.proc.pid)  # a concurrent weak grade's sweep leaves this tree alone
        for fd in (config_r, results_w, out_w):
            os.close(fd)  # only the grader holds these now: its exit is our EOF
        self.reader = channel.Reader(results_r, self.key)
        self.output = PipeDrain(out_r)
        try:
            blob = grade_config(self, results_w)
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

    def _spawn_warm(
        self, pytest_args: list[str], env: dict, cwd: Path, out_w: int, pass_fds: tuple[int, ...]
    ) -> Optional["WarmProc"]:
        """The grader forked from the warm interpreter, when there is one that
        works; None: start it cold (a zygote that died costs speed, never a grade)."""
        if self.warm is None:
            return None
        from roadmap_cli.grading.warm import WarmUnavailable

        try:
            return self.warm.spawn(pytest_args, env=env, cwd=str(cwd), output_fd=out_w, pass_fds=pass_fds)
        except WarmUnavailable:
            self.warm = None
            return None

    def finish(self, on_event: Optional[Callable[[dict], None]] = None) -> GradeRun:
        from roadmap_cli.grading import integrity, weak_content, weak_runtime, weak_taint, weak_watch

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
                if finished_at is None and any(
                    ev.get("event") == "finish" and ev.get("exitstatus") in (0, 1) for ev in events[-3:]
                ):
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
                wait_s = POLL_S if finished_at is None else finished_at + FINISH_GRACE_S - time.monotonic() + 0.001
                if self._wait_for_news(min(POLL_S, max(wait_s, 0.001))):
                    interrupted = True
                    break
        except KeyboardInterrupt:
            interrupted = True  # recorded as "interrupted" (not a crash, never a best score)
        finally:
            self._stop_supervisor()
            self._kill_marked()
            self._kill_orphans()
            drain()
            self.output.settle()
            log_tail = crash_tail(self.output.tail.text())
            self.reader.close()
            self._cleanup()
        after = integrity.snapshot(self.spec.tests_dir)
        touched = sorted(
            set(touched)
            | set(integrity.changed(self.hashes_before, after))
            | set(integrity.changed(self.stats_before, integrity.stat_snapshot(self.stats_before)))
        )
        run = assemble(
            self.spec,
            self.workspace,
            self.device,
            self.selected,
            events,
            0 if finished_at is not None and not timed_out else proc.returncode,
            timed_out,
            self.timeout,
            log_tail,
        )
        voids = [ev.get("reason", "") for ev in events if ev.get("event") == "void"]
        if self.reader.forged:
            voids.append(f"{self.reader.forged} forged or unauthenticated line(s) appeared on the results channel")
        if touched:
            voids.append(f"grader file(s) changed during the grade: {', '.join(touched[:5])}")
        if self.weak_watch is not None:
            # Every process of the grade is dead by now (orphans included, where the engine is a subreaper):
            # what changed in this window is this grade's doing, and only that is attributed to it.
            left = weak_watch.written_since(self.weak_t0, self.weak_watch)
            runtime_after = weak_runtime.tree_snapshot(weak_runtime.judge_roots())
            judged = weak_content.judge_changes(self.judge_before, weak_content.judge_hashes(self.spec.root))
            left = sorted(
                set(left)
                | set(
                    weak_runtime.tree_changes(self.runtime_before or {}, runtime_after, weak_runtime.cpp_cache_root())
                )
                | set(judged)
            )
            if self.reaper_was_active:
                weak_runtime.drop_runtime_record()  # nothing of the grade is left to write later
            else:
                weak_runtime.save_runtime_record(runtime_after)  # no subreaper: later grades check against it
            if left:
                # A judged file is repaired when its content is what it was before this grade.
                weak_taint.record_taint(
                    left,
                    {p: self.judge_before.get(p, weak_content.ABSENT) for p in judged},
                    weak_content.judge_repos(self.judge_before),
                )
                voids.append(weak_taint.taint_line() or f"learner code wrote {left[0]}")
        elif weak_runtime.has_runtime_record():
            weak_runtime.refresh_cache_record()  # this strong grade's own C++ builds, made behind the wall
        if voids:
            void(run, voids)
        run.started_at, run.grader_sha256 = self.started_at, self.sha
        run.sandbox = self.sandbox
        run.duration_s = round(time.monotonic() - self.t0, 3)
        if interrupted:
            mark_interrupted(run)
        elif self.focus.narrows or self.focus.first_failure:
            mark_focused(run, self.focus)
        return run

    def _wait_for_news(self, seconds: float) -> bool:
        """Sleep until the grader writes to the results channel, or `seconds`
        pass: an event (the "finish" above all) is handled at once, not at the
        next poll tick. True when the run was cancelled meanwhile."""
        if self.reader.eof:  # nothing more can come: a readable fd would not block
            return self.cancel_event.wait(seconds)
        select.select([self.reader.fd], [], [], seconds)
        return self.cancel_event.is_set()

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
            from roadmap_cli.grading._supervisor import descendants

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

    def _kill_orphans(self) -> None:
        """Third net, the one a weak grade cannot dodge on Linux: whatever the grade left below the engine
        (re-parented to it, the engine being a subreaper) is killed before the post-grade checks."""
        from roadmap_cli.grading import orphans

        if self.proc is not None:
            orphans.supervisor_ended(self.proc.pid)
        reaper, self.reaper = getattr(self, "reaper", None), None
        self.reaper_was_active = bool(reaper is not None and reaper.active)
        if reaper is not None:
            try:
                reaper.kill_new()
            finally:
                reaper.close()

    def _kill_marked(self) -> None:
        """Second net: processes carrying this grade's token that the
        supervisor could not reach (the learner's code killed it, so its
        orphans went to init)."""
        from roadmap_cli.grading._supervisor import marked

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
            self._kill_orphans()
            self.reader.close()
            self._cleanup()

    def _cleanup(self) -> None:
        self.tmp.cleanup()
        self.shim_parent.cleanup()
