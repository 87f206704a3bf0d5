"""`roadmap dev check LAB --walk`: any subset of a lab's parts grades (issue 26).

A learner solves parts one at a time, in any order, and grades after each
step. The walk replays that from the starter: the solution's files that the
learner writes (those whose solution differs from the starter) are added one
at a time, in lab.yaml part order (a file belongs to the first part with a test
file named after it, e.g. quantize.py -> test_quantize.py) and in reverse
order, with a whole-lab grade after every step (no stop at the first failure:
a learner's grade runs every test). The states with no file and with every
file are `dev check`'s starter and solution rows, so they are not graded again.

What every state must show (`judge`):
  * the grade ran: outcome passed or failed, never error/timeout/crash, and
    every gradable part is passed or failed (never not-run: a session that
    died part-way, like issue 26's INTERNALERROR, leaves parts without tests);
  * adding solved code never breaks a part (monotone within each walk);
  * the two walks agree. A part first passes in the forward walk when file F
    is added and in the reverse walk when file G is; it needs both, so in
    every state of either walk it passes exactly when F and G are present.
    (For a part whose code lives in one file F == G: it passes exactly when
    that file is solved, and fails, as a failed part, whenever it is not.)
    In a whole walk, a part that passes in no walked state needs the walk's
    last file; in a partial walk (`steps`) it needs one past the walk, which
    one is unknown, and only the direction that saw it pass constrains it.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from roadmap_cli.labs import workspace as ws
from roadmap_cli.labs.device import DeviceInfo
from roadmap_cli.labs.nodeids import file_of
from roadmap_cli.labs.spec import LabSpec
from roadmap_cli.labs.starter_build import comment_prefix, solution_text


@dataclass
class WalkState:
    direction: str  # forward | reverse
    files: tuple[str, ...]  # solution files present (the first k of the direction's order)
    outcome: str = ""
    statuses: dict[str, str] = field(default_factory=dict)  # part id -> passed|failed|...
    seconds: float = 0.0
    detail: str = ""

    @property
    def name(self) -> str:
        return f"{self.direction} +{self.files[-1]}"


def solution_files(spec: LabSpec) -> dict[str, str]:
    """Workspace path -> the solution's text, for each file whose solution
    differs from the starter (the files a learner writes)."""
    out: dict[str, str] = {}
    for rel, source in sorted(spec.solution_sources().items()):
        if comment_prefix(rel) is None:
            continue  # a given file (no markers possible): the same in starter and solution
        text = solution_text(source.read_text(encoding="utf-8"), rel)
        starter = spec.starter_dir / rel
        if not starter.is_file() or starter.read_text(encoding="utf-8") != text:
            out[rel] = text
    return out


def file_order(spec: LabSpec, files: list[str]) -> list[str]:
    """lab.yaml part order: a file goes with the first part that has a test
    file named after it; files no test file names go last, by name."""

    def owner(rel: str) -> int:
        stem = Path(rel).stem
        for i, part in enumerate(spec.parts):
            if any(stem in Path(file_of(prefix)).stem for prefix in part.tests):
                return i
        return len(spec.parts)

    return sorted(files, key=lambda rel: (owner(rel), rel))


def walk_states(order: list[str], steps: Optional[int] = None) -> list[WalkState]:
    """Forward and reverse: 1 .. n-1 files present (0 and n are dev check's
    rows); `steps` keeps only the first steps of each direction (CI's budget:
    steps=1 is "only the first part's file solved" and "only the last's")."""
    last = len(order) if steps is None else min(len(order), steps + 1)
    states = [WalkState("forward", tuple(order[:k])) for k in range(1, last)]
    back = order[::-1]
    states += [WalkState("reverse", tuple(back[:k])) for k in range(1, last)]
    return states


def build_state(spec: LabSpec, texts: dict[str, str], files: tuple[str, ...], dest: Path) -> None:
    """The starter with `files` solved; anything else of the workspace is the starter's."""
    ws.write_starter(spec, dest)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(texts[rel], encoding="utf-8")


def judge(states: list[WalkState], order: list[str], parts: list[str]) -> list[str]:
    """The problems the walk shows (empty: every subset graded as it should)."""
    problems: list[str] = []
    for st in states:
        if st.outcome not in ("passed", "failed"):
            problems.append(f"{st.name}: the grade ended {st.outcome}, not passed/failed: {st.detail}")
        for p in parts:
            if st.statuses.get(p) not in ("passed", "failed"):
                problems.append(f"{st.name}: part {p} is {st.statuses.get(p)!r}, not passed/failed")
    needs: dict[str, set[str]] = {p: set() for p in parts}
    for direction, seq in (("forward", order), ("reverse", order[::-1])):
        walk = [s for s in states if s.direction == direction]
        whole = len(walk) == len(seq) - 1
        for p in parts:
            first = next((i for i, s in enumerate(walk) if s.statuses.get(p) == "passed"), len(walk))
            if first < len(walk) or whole:  # else: it needs a file past a partial walk, no telling which
                needs[p].add(seq[first])  # walk[i] holds seq[:i + 1]; past the walk: the full solution
            broken = [s.name for s in walk[first:] if s.statuses.get(p) != "passed"]
            if broken:
                problems.append(f"{direction}: part {p} passed, then failed again after more solved code: {broken}")
    for st in states:
        for p in parts:
            got, missing = st.statuses.get(p), sorted(needs[p] - set(st.files))
            # Its failing the other way (all it needs solved, yet failed) is a
            # break of monotony within that state's own walk, reported above.
            if got == "passed" and missing:
                problems.append(
                    f"{st.name}: part {p} passed without {missing} solved (the other walk showed it "
                    f"needs them; solved: {list(st.files)})"
                )
    return problems


@dataclass
class WalkReport:
    lab: str
    order: list[str]
    states: list[WalkState]
    problems: list[str]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems


def run_walk(
    spec: LabSpec,
    device: DeviceInfo,
    *,
    jobs: int = 1,
    steps: Optional[int] = None,
    on_state: Optional[Callable[[WalkState], None]] = None,
) -> WalkReport:
    """Grade every walk state of one lab in its own temporary workspace
    (`steps`: see walk_states; a partial walk judges fewer states, and a part
    that never passes in them is taken to need the last file of each walk)."""
    from roadmap_cli.grading.launch import warm_graders
    from roadmap_cli.grading.runner import grade_workspace
    from roadmap_cli.grading.selection import gradable_parts
    from roadmap_cli.grading.warm import WarmGraders

    t0 = time.monotonic()
    texts = solution_files(spec)
    order = file_order(spec, list(texts))
    states = walk_states(order, steps)
    parts = gradable_parts(spec, device)

    def grade(st: WalkState, warm: WarmGraders) -> WalkState:
        s0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"roadmap-walk-{spec.id}-") as tmp:
            path = Path(tmp) / "ws"
            path.mkdir()
            build_state(spec, texts, st.files, path)
            run = grade_workspace(spec, path, device=device, warm=warm)
        st.outcome = run.outcome
        st.statuses = {p: run.part(p).status for p in parts}
        st.detail = (run.message or "") + ("\n" + run.log_tail[-600:] if run.outcome in ("error", "timeout") else "")
        st.seconds = round(time.monotonic() - s0, 2)
        if on_state:
            on_state(st)
        return st

    # Every state is a grade: each forks a warm grader instead of importing torch and pytest again.
    with warm_graders(device) as warm:
        if jobs <= 1:
            for st in states:
                grade(st, warm)
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                list(pool.map(lambda st: grade(st, warm), states))
    return WalkReport(spec.id, order, states, judge(states, order, parts), round(time.monotonic() - t0, 2))
