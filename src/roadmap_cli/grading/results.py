"""What a grade produced: per-test, per-part and whole-run results, and how
the plugin's events (read from the authenticated channel, nothing else) and the
grader process's fate turn into them.

runner.py runs the grader and hands its events here (`assemble`); the marks
for an interrupted or a filtered (-k/--test/-x) run are applied afterwards.
Nothing here starts a process, reads a file or touches the database.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from roadmap_cli.store.values import ATTEMPT_OUTCOMES, PART_STATUSES, TEST_OUTCOMES  # noqa: F401 - the values written here

if TYPE_CHECKING:
    from roadmap_cli.grading.focus import Focus

# A test's outcome is one of store/values.TEST_OUTCOMES, a part's status one of PART_STATUSES and
# the run's outcome one of ATTEMPT_OUTCOMES (tests/test_store_values.py checks this module against them).
BAD_TEST_OUTCOMES = {"failed", "error", "crashed", "timeout"}
# "interrupted": Ctrl-C, or `roadmap watch` cancelled the run because a file was saved.
EXIT_CODES = {"passed": 0, "failed": 1, "crash": 1, "error": 4, "timeout": 4, "interrupted": 130}


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
    status: str  # store/values.PART_STATUSES
    needs_cuda: bool
    tests_passed: int = 0
    tests_total: int = 0
    message: Optional[str] = None  # first failure, or why it was not graded


@dataclass
class GradeRun:
    lab_id: str
    workspace: str
    started_at: str
    outcome: str  # store/values.ATTEMPT_OUTCOMES
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
    sandbox: Optional[str] = None  # "strong" (behind bubblewrap) or "weak" (in-process only): grading_kit/oswall.py
    nothing_selected: bool = False  # pytest collected no test (exit status 5): a -k/--test that matches nothing

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.outcome, 4)

    def part(self, part_id: str) -> PartResult:
        return next(p for p in self.parts if p.id == part_id)


def assemble(spec, workspace, device, selected, events, returncode, timed_out, timeout, log_tail) -> GradeRun:
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
            outcome, message = ev["outcome"], ev.get("message")
            if outcome == "skipped" and ev.get("after_learner"):
                # The rule (red team P4): a test may skip for what the grader knows (no GPU, a case covered
                # elsewhere), never for what the learner's code answered, which the learner controls; a skip
                # after the learner's code ran counts as not passed, so the part can neither pass on fewer
                # tests nor keep its points.
                outcome = "failed"
                message = (
                    f"skipped after your code answered ({message or 'no reason given'}): a skip that "
                    "can follow from what your code returned counts as not passed"
                )
            results[ev["nodeid"]] = TestResult(
                ev["nodeid"],
                ev.get("part"),
                outcome,
                ev.get("duration_s", 0.0),
                message,
                ev.get("fraction"),
                ev.get("perf") or [],
            )
            running = None
        elif kind == "device":
            device_event = ev
        elif kind == "finish":
            finish = ev

    message = None
    nothing_selected = False
    if timed_out:
        outcome = "timeout"
        message = f"the grader ran past its time limit of {timeout:g} s and was killed"
        if running:
            results[running] = TestResult(
                running, collected.get(running), "timeout", message=f"killed after {timeout:g} s (time limit)"
            )
    elif finish is None and not running and (returncode or 0) >= 0:
        # pytest gave up before any test ran (e.g. the grader's conftest.py failed to import).
        outcome = "error"
        message = f"the grader did not run: pytest exited with status {returncode}"
    elif finish is None or (returncode is not None and returncode < 0):
        outcome = "crash"
        how = (
            f"killed by signal {signal.Signals(-returncode).name}"
            if returncode and returncode < 0
            else f"exited with status {returncode}"
        )
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
            reason = {
                2: "interrupted (a grader file failed to import?)",
                3: "internal error",
                4: "usage error",
                5: "no tests were collected",
            }.get(status, f"exit status {status}")
            message = f"the grader failed: pytest {reason}"
            nothing_selected = status == 5

    for nodeid, part in collected.items():
        results.setdefault(nodeid, TestResult(nodeid, part, "not-run"))
    tests = list(results.values())
    parts = [part_result(p, selected, device, tests, outcome) for p in spec.parts]
    if outcome == "passed" and any(p.status not in ("passed", "not-graded-here", "not-run") for p in parts):
        outcome = "failed"
    if outcome == "passed" and not any(p.status == "passed" for p in parts):
        outcome, message = "error", "the grader ran no test"
    return GradeRun(
        lab_id=spec.id,
        workspace=str(workspace),
        started_at="",
        outcome=outcome,
        score=round(sum(p.points for p in parts), 3),
        max_score=round(sum(p.max_points for p in parts), 3),
        parts=parts,
        tests=tests,
        perf=[f for t in tests for f in t.perf],
        device=device_event.get("device") or device.name,
        device_capability=device_event.get("device_capability") or device.capability,
        torch_version=device_event.get("torch_version") or device.torch_version,
        triton_version=device_event.get("triton_version") or device.triton_version,
        interpret_mode=not device.cuda,
        grader_sha256="",
        duration_s=0.0,
        message=message,
        unassigned=unassigned,
        log_tail=log_tail if outcome in ("error", "crash", "timeout") else "",
        nothing_selected=nothing_selected,
    )


def mark_interrupted(run: GradeRun) -> None:
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


def mark_focused(run: GradeRun, focus: Focus) -> None:
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
            p.message = (
                f"{p.tests_passed}/{p.tests_total} selected tests passed "
                "(a filtered run never completes a part: grade it without -k/--test)"
            )
    run.score = round(sum(p.points for p in run.parts), 3)
    run.max_score = round(sum(p.max_points for p in run.parts), 3)
    # The outcome is about what ran: parts the filter left out no longer fail it.
    if (
        run.outcome == "failed"
        and not any(p.status in ("failed", "skipped") for p in run.parts)
        and any(p.status in ("passed", "focused") for p in run.parts)
    ):
        run.outcome = "passed"


def part_result(part, selected, device, tests, outcome) -> PartResult:
    title = part.title.model_dump()
    if part.needs_cuda and not device.cuda:
        return PartResult(
            part.id, title, 0.0, 0.0, "not-graded-here", True, message="not graded here (needs a CUDA GPU)"
        )
    if part.id not in selected:
        return PartResult(
            part.id, title, 0.0, 0.0, "not-run", part.needs_cuda, message="not run (another part was selected)"
        )
    mine = [t for t in tests if t.part == part.id]
    result = PartResult(
        part.id,
        title,
        float(part.points),
        0.0,
        "failed",
        part.needs_cuda,
        tests_passed=sum(t.outcome == "passed" for t in mine),
        tests_total=len(mine),
    )
    bad = [t for t in mine if t.outcome in BAD_TEST_OUTCOMES]
    ran = [t for t in mine if t.outcome == "passed"]
    if bad:
        first = bad[0]
        result.message = f"{first.nodeid}: {first.message or first.outcome}"
    elif any(t.outcome == "not-run" for t in mine) or not mine:
        result.message = (
            "the grader stopped before these tests ran" if outcome in ("timeout", "crash") else "no test ran"
        )
    elif not ran:
        result.status, result.message = "skipped", "every test was skipped"
    else:
        result.status = "passed"
        credit = sum(1.0 if t.fraction is None else t.fraction for t in ran) / len(ran)
        result.points = round(part.points * credit, 3)
    return result
