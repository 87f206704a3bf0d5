"""`roadmap dev check`: prove every lab's grader can tell right from wrong.

For each lab, in temporary workspaces:
  starter   must fail every part that has tests runnable here;
  solution  (starter + solution/ + solution_files) must pass every gradable part;
  wrong/<id>.patch applied to the solution must fail at least one test in
            each part of its `fails` list (only those parts run, stopping at
            the first failure of each part: that is all the check needs).
Plus static checks: every test file belongs to a part, every prefix names an
existing file, starter/ is the one `dev build-starter` makes from the single
source, and `proves` agrees with the curriculum's `proved_by`
(disagreement is a warning: the curriculum is owned elsewhere).
Then each lab's `rules:` (authoring/rules.py) against what those runs saw, and
their quotes against the handout (authoring/handout.py, a `handout` row):
a variant that lists rules in `breaks:` runs exactly the tests of those
rules (every one of them, so each rule's verdict is known), plus the whole
of any `fails` part no such test belongs to. A rule test that fails fails its
part, so that proves `fails` too, at a fraction of the cost of the parts.
"""

from __future__ import annotations

import re

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.errors import RoadmapError, ValidationError
from roadmap_cli.labs import workspace as ws
from roadmap_cli.labs.device import DeviceInfo, detect_device
from roadmap_cli.labs.nodeids import file_of
from roadmap_cli.grading.focus import Focus
from roadmap_cli.grading.results import BAD_TEST_OUTCOMES
from roadmap_cli.grading.launch import warm_graders, warm_learners
from roadmap_cli.grading.runner import GradeRun, grade_workspace
from roadmap_cli.grading.selection import gradable_parts
from roadmap_cli.grading.warm import WarmGraders, WarmLearners
from roadmap_cli.grading_kit.cpp_pch import PCH_VAR
from roadmap_cli.labs.spec import LabSpec
from roadmap_cli.authoring.handout import check_handout
from roadmap_cli.authoring.rules import NO_RULES_WARNING, check_rules
from roadmap_cli.labs.starter_build import stale_files


@dataclass
class CheckRow:
    lab: str
    check: str  # static | starter | solution | wrong:<id>
    expected: str
    got: str
    ok: Optional[bool]  # None: not checked here (needs CUDA)
    seconds: float = 0.0
    detail: str = ""
    failed_tests: list[str] = field(default_factory=list)  # node ids relative to tests/


@dataclass
class DevCheckReport:
    device: str
    rows: list[CheckRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok is not False for r in self.rows)


def static_problems(spec: LabSpec) -> list[str]:
    problems = []
    prefixes = [p for part in spec.parts for p in part.tests]
    for prefix in prefixes:
        if not (spec.tests_dir / file_of(prefix)).exists():
            problems.append(f"part test prefix {prefix!r}: tests/{file_of(prefix)} does not exist")
    for path in sorted(spec.tests_dir.rglob("test_*.py")):
        rel = path.relative_to(spec.tests_dir).as_posix()
        if not any(
            rel == file_of(p)
            or rel.startswith(file_of(p).rstrip("/") + "/")
            or (file_of(p).endswith("/") and rel.startswith(file_of(p)))
            for p in prefixes
        ):
            problems.append(f"tests/{rel} belongs to no part (add it to a part's tests)")
    problems.extend(triton_declaration_problems(spec))
    try:
        stale = stale_files(spec)
    except ValidationError as exc:
        problems.extend([exc.message, *exc.details])
    else:
        problems.extend(f"{p} (run `roadmap dev build-starter {spec.id}`)" for p in stale)
    return problems


_TRITON_KERNEL = re.compile(r"^\s*@triton\.(jit|autotune|heuristics)\b", re.M)


def triton_declaration_problems(spec: LabSpec) -> list[str]:
    """lab.yaml's `triton: true` held to the reference solution: `dev check --gpu` runs exactly the declared
    `triton` and `needs_cuda` parts, so a lab whose learner writes a @triton.jit kernel (a solution file with
    one that differs from its starter) declares the parts that grade it, and a lab without one declares none.
    Given Triton code (the same in starter and solution, e.g. gpu-architecture's probes) needs no declaration."""
    written, any_kernel = [], False
    for rel, path in sorted(spec.solution_sources().items()):
        if path.suffix != ".py" or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if not _TRITON_KERNEL.search(text):
            continue
        any_kernel = True
        starter = spec.starter_dir / rel
        if not starter.is_file() or starter.read_text(encoding="utf-8", errors="replace") != text:
            written.append(rel)
    declared = [p.id for p in spec.parts if p.triton]
    if declared and not any_kernel:
        return [
            f"parts {', '.join(declared)} declare `triton: true`, but the reference solution has no @triton.jit kernel"
        ]
    if written and not declared:
        return [
            f"the learner writes @triton.jit kernels ({', '.join(written)}) but no part declares "
            "`triton: true`: `dev check --gpu` would never run them compiled on a GPU"
        ]
    return []


def curriculum_warnings(specs: list[LabSpec]) -> list[str]:
    """Where lab.yaml `proves` and the curriculum's `proved_by` disagree."""
    try:
        from roadmap_cli import context

        curriculum = context.current().curriculum()
    except (RoadmapError, ImportError, AttributeError) as exc:
        return [f"curriculum not checked: {getattr(exc, 'message', exc)}"]
    claimed: set[tuple[str, str, str]] = set()  # (lab, part, checkpoint) from the curriculum
    known: set[str] = set()
    # The stages' checkpoints and the plan phases' own ones: a lab may prove either.
    every = [*curriculum.all_checkpoints(), *(cp for _, _, cp in curriculum.phase_checkpoints())]
    for cp in every:
        known.add(cp.id)
        for ref in cp.proved_by:
            claimed.add((ref.lab, ref.part, cp.id))
    ours = {(s.id, p.id, cp) for s in specs for p in s.parts for cp in p.proves}
    lab_ids = {s.id for s in specs}
    warnings = []
    for lab, part, cp in sorted(ours - claimed):
        where = "is not in the curriculum" if cp not in known else f"has no proved_by {lab}/{part} in the curriculum"
        warnings.append(f"{lab}/{part} proves {cp}, which {where}")
    for lab, part, cp in sorted(claimed - ours):
        if lab in lab_ids:
            warnings.append(f"curriculum: {cp} is proved_by {lab}/{part}, but that part's `proves` does not list it")
    return warnings


def _grade_in(
    spec: LabSpec, build: Callable[[Path], None], *, learners: Optional[WarmLearners] = None, **kwargs
) -> GradeRun:
    # Every C++ variant compiles a torch extension: a precompiled header of its includes
    # (grading_kit/cpp_pch.py) makes each compile ~2.6x faster once it is built.
    kwargs.setdefault("extra_env", {PCH_VAR: "1"})
    # Under the warm learner's root when there is one: the one folder its learners can write.
    with tempfile.TemporaryDirectory(
        prefix=f"roadmap-check-{spec.id}-", dir=learners.root if learners is not None else None
    ) as tmp:
        path = Path(tmp) / "ws"
        path.mkdir()
        build(path)
        return grade_workspace(spec, path, learners=learners, **kwargs)


LAB_CODE_REFUSAL = "is not allowed in lab code:"


def _statuses(run: GradeRun, parts: list[str]) -> str:
    return ", ".join(f"{p}:{run.part(p).status}" for p in parts)


def _first_problem(run: GradeRun, parts: list[str], bad_status: str) -> str:
    if run.outcome in ("error", "timeout", "crash"):
        return f"{run.outcome}: {run.message or ''} {run.log_tail[-600:]}".strip()
    for p in parts:
        part = run.part(p)
        if part.status == bad_status or (bad_status == "!passed" and part.status != "passed"):
            return f"{p}: {part.message or part.status}"
    return ""


def check_starter(
    spec: LabSpec, device: DeviceInfo, warm: Optional[WarmGraders] = None, learners: Optional[WarmLearners] = None
) -> CheckRow:
    parts = gradable_parts(spec, device)
    t0 = time.monotonic()
    run = _grade_in(
        spec, lambda d: ws.write_starter(spec, d), device=device, stop_part_on_fail=True, warm=warm, learners=learners
    )
    ok = run.outcome in ("failed", "crash") and all(run.part(p).status != "passed" for p in parts)
    if run.unassigned:
        ok = False
    detail = "" if ok else (_first_problem(run, parts, "passed") or f"unassigned tests: {run.unassigned[:3]}")
    return CheckRow(
        spec.id,
        "starter",
        "fails every gradable part",
        _statuses(run, parts),
        ok,
        round(time.monotonic() - t0, 2),
        detail,
    )


def check_solution(
    spec: LabSpec,
    device: DeviceInfo,
    collected: Optional[dict[str, list[str]]] = None,
    warm: Optional[WarmGraders] = None,
    learners: Optional[WarmLearners] = None,
) -> CheckRow:
    """`collected`, when given, receives spec.id -> the node ids the run collected (for the rules check)."""
    parts = gradable_parts(spec, device)
    t0 = time.monotonic()
    run = _grade_in(spec, lambda d: ws.write_solution(spec, d), device=device, warm=warm, learners=learners)
    if collected is not None:
        collected[spec.id] = [t.nodeid for t in run.tests]
    ok = run.outcome == "passed" and not run.unassigned
    detail = "" if ok else (_first_problem(run, parts, "!passed") or f"unassigned tests: {run.unassigned[:3]}")
    return CheckRow(
        spec.id,
        "solution",
        "passes every gradable part",
        _statuses(run, parts),
        ok,
        round(time.monotonic() - t0, 2),
        detail,
    )


def check_wrong(
    spec: LabSpec,
    wrong_id: str,
    device: DeviceInfo,
    warm: Optional[WarmGraders] = None,
    learners: Optional[WarmLearners] = None,
) -> CheckRow:
    wrong = next(w for w in spec.wrong if w.id == wrong_id)
    parts = [p for p in wrong.fails if p in gradable_parts(spec, device)]
    expected = f"fails {', '.join(wrong.fails)}"
    if not parts:
        return CheckRow(spec.id, f"wrong:{wrong.id}", expected, "not checked here (needs a CUDA GPU)", None)
    if wrong.interpreter_only and device.cuda:
        return CheckRow(
            spec.id,
            f"wrong:{wrong.id}",
            expected,
            "not checked on a GPU (interpreter-only: only the Triton interpreter's checks catch it)",
            None,
        )

    def build(d: Path) -> None:
        ws.write_solution(spec, d)
        ws.apply_patch(spec.patch_file(wrong.id), d)

    t0 = time.monotonic()
    focus = _rule_focus(spec, wrong.breaks, parts) if wrong.breaks else None
    try:
        # A variant that claims to break rules must show which of their tests it fails: all of them run.
        run = _grade_in(
            spec,
            build,
            parts=parts,
            device=device,
            stop_part_on_fail=not wrong.breaks,
            focus=focus,
            warm=warm,
            learners=learners,
        )
        if focus is not None and run.outcome == "error":
            # A rule names a test the grader does not have (pytest refuses the whole selection): grade the
            # parts in full instead, and let the rules row name the missing test.
            run = _grade_in(
                spec, build, parts=parts, device=device, stop_part_on_fail=False, warm=warm, learners=learners
            )
    except RoadmapError as exc:
        return CheckRow(
            spec.id, f"wrong:{wrong.id}", expected, "patch failed", False, round(time.monotonic() - t0, 2), exc.message
        )
    failed_tests = [t.nodeid for t in run.tests if t.outcome in BAD_TEST_OUTCOMES]
    # The lab-code check refusing the variant's source (grading_kit/labcode.py) voids the attempt: outcome
    # error, no points. That is a wrong variant failing, for that reason only (a grader error is not).
    refused = run.outcome == "error" and LAB_CODE_REFUSAL in (run.message or "")
    ok = (run.outcome in ("failed", "crash", "timeout") or refused) and all(
        run.part(p).status == "failed" for p in parts
    )
    if refused and not failed_tests and focus is not None:
        # Void: no test ran, and every one it was to run counts as failed (the rules check reads node ids).
        failed_tests = list(focus.tests)
    detail = (
        ""
        if ok
        else (
            f"{wrong.description}: "
            + (
                _first_problem(run, parts, "passed")
                or "; ".join(f"{p} {run.part(p).status}" for p in parts if run.part(p).status != "failed")
            )
        )
    )
    return CheckRow(
        spec.id,
        f"wrong:{wrong.id}",
        expected,
        _statuses(run, parts),
        ok,
        round(time.monotonic() - t0, 2),
        detail,
        failed_tests,
    )


def _rule_focus(spec: LabSpec, breaks: list[str], parts: list[str]) -> Focus:
    """The tests a rule-breaking variant runs: its rules' tests in the parts
    graded here, and every test of a `fails` part that none of them is in."""
    from roadmap_cli.labs.nodeids import part_for

    prefixes = spec.part_prefixes()
    rules = {r.id: r for r in spec.rules or []}
    tests: list[str] = []
    for rule_id in breaks:
        for test in rules[rule_id].tests if rule_id in rules else []:
            if part_for(test, prefixes) in parts and test not in tests:
                tests.append(test)
    covered = {part_for(t, prefixes) for t in tests}
    for part in spec.parts:
        if part.id in parts and part.id not in covered:
            tests += [t for t in part.tests if t not in tests]
    return Focus(tests=tests)


def check_rules_row(
    spec: LabSpec, device: DeviceInfo, rows: list[CheckRow], collected: Optional[list[str]]
) -> CheckRow:
    """One row for the lab's `rules:`, from the rows of its grader runs."""

    failed_by: dict[str, Optional[list[str]]] = {}
    for row in rows:
        if row.lab == spec.id and row.check.startswith("wrong:"):
            failed_by[row.check[len("wrong:") :]] = None if row.ok is None else row.failed_tests
    verdict = check_rules(
        spec,
        collected=collected or None,
        failed_by=failed_by,
        gradable=set(gradable_parts(spec, device)),
        interpreted=not device.cuda,
    )
    got = f"{verdict.rules} rules, {len(verdict.problems)} problem(s)"
    if verdict.unchecked:
        got += (
            f", {len(verdict.unchecked)} not checked here ({'interpreter-only' if device.cuda else 'needs a CUDA GPU'})"
        )
    return CheckRow(
        spec.id,
        "rules",
        "every rule tested and broken by a variant",
        got,
        not verdict.problems,
        0.0,
        "\n".join(verdict.problems),
    )


def check_handout_row(spec: LabSpec) -> tuple[CheckRow, Optional[str]]:
    """One row for the lab's quotes (authoring/handout.py), and a warning while they are pending."""
    verdict = check_handout(spec)
    gaps = len(verdict.unquoted_rules) + len(verdict.uncovered)
    got = (
        f"{verdict.normative} normative sentences, {len(verdict.uncovered)} uncovered; "
        f"{len(verdict.unquoted_rules)} rules without a quote; {len(verdict.bad_quotes)} bad quote(s)"
    )
    warning = None
    if not verdict.enforced and gaps:
        got += " (quotes: pending)"
        warning = (
            f"{spec.id}: quotes pending: {len(verdict.unquoted_rules)} rule(s) without a quote, "
            f"{len(verdict.uncovered)} normative sentence(s) uncovered (`roadmap dev rules {spec.id}`)"
        )
    elif not verdict.enforced:
        # Nothing is missing any more: keep it that way by requiring it.
        warning = f"{spec.id}: lab.yaml says `quotes: pending` but nothing is missing: delete that line"
    row = CheckRow(
        spec.id,
        "handout",
        "every rule quotes README.md; every normative sentence covered",
        got,
        not verdict.problems,
        0.0,
        "\n".join(verdict.problems),
    )
    return row, warning


def run_dev_check(
    specs: list[LabSpec],
    *,
    jobs: int = 1,
    on_row: Optional[Callable[[CheckRow], None]] = None,
    device: Optional[DeviceInfo] = None,
    invalid: Optional[dict] = None,
    cold_graders: bool = False,
    cold_learners: Optional[bool] = None,
) -> DevCheckReport:
    """Run every check; `invalid` (lab id -> ValidationError) become failed rows.
    `cold_graders`: start every grader as a new Python, not forked from a warm
    one (grading/warm.py; to compare the two); `cold_learners` (default: as
    `cold_graders`): start every learner process cold too, not forked from the
    run's warm learner."""
    cold_learners = cold_graders if cold_learners is None else cold_learners
    device = device or detect_device()
    report = DevCheckReport(device=f"{device.kind} ({device.name})")
    for lab_id, exc in (invalid or {}).items():
        row = CheckRow(
            lab_id, "spec", "a valid lab.yaml", "invalid", False, 0.0, "\n".join([exc.message, *exc.details])
        )
        report.rows.append(row)
        if on_row:
            on_row(row)
    report.warnings = curriculum_warnings(specs)
    report.warnings += [f"{s.id}: {NO_RULES_WARNING}" for s in specs if s.rules is None]
    collected: dict[str, list[str]] = {}  # lab id -> node ids its solution run collected
    tasks: list[Callable[[Optional[WarmGraders], Optional[WarmLearners]], CheckRow]] = []
    for spec in specs:
        for problem in static_problems(spec):
            row = CheckRow(spec.id, "static", "a consistent lab", "problem", False, 0.0, problem)
            report.rows.append(row)
            if on_row:
                on_row(row)
    # Longest first, so the last minutes are not one long grade on one core while the others idle:
    # every lab's solution (all its parts, to the end), then its starter, then the wrong variants
    # (each a few focused tests). The report lists them lab by lab again.
    for spec in specs:
        tasks.append(lambda warm, learners, s=spec: check_solution(s, device, collected, warm, learners))
    for spec in specs:
        tasks.append(lambda warm, learners, s=spec: check_starter(s, device, warm, learners))
    for spec in specs:
        tasks.extend(
            lambda warm, learners, s=spec, w=w.id: check_wrong(s, w, device, warm, learners) for w in spec.wrong
        )

    def run(task: Callable[[Optional[WarmGraders], Optional[WarmLearners]], CheckRow]) -> CheckRow:
        row = task(warm, learners)
        if on_row:
            on_row(row)
        return row

    # ~500 grades in a run: each forks a warm grader instead of importing torch and pytest again.
    # Started here, in the calling thread: its parent-death signal follows the thread that starts it.
    warm = None if cold_graders else warm_graders(device)
    # And each grade's learner process forks a warm learner (behind the OS wall) instead of bwrap + Python.
    learners = None if cold_learners else warm_learners(specs, device)
    try:
        if jobs <= 1:
            report.rows.extend(run(t) for t in tasks)
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                report.rows.extend(pool.map(run, tasks))
    finally:
        if warm is not None:
            warm.close()
        if learners is not None:
            learners.close()
    lab_order = {spec.id: i for i, spec in enumerate(specs)}
    kind_order = {"spec": 0, "static": 1, "starter": 2, "solution": 3}
    report.rows.sort(
        key=lambda r: (lab_order.get(r.lab, -1), kind_order.get(r.check, 4))
    )  # stable: variants keep their order
    for spec in specs:
        if spec.rules is not None:
            row = check_rules_row(spec, device, report.rows, collected.get(spec.id))
            handout, warning = check_handout_row(spec)
            report.rows += [row, handout]
            if warning:
                report.warnings.append(warning)
            if on_row:
                on_row(row)
                on_row(handout)
    return report
