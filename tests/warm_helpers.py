"""What the warm-grader and warm-learner tests share (with the `cpu` and
`adder` fixtures in conftest.py): a workspace of a given kind, and a grade's
verdict in a form two grades can be compared by."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from roadmap_cli.labs import workspace as ws_ops

FIXTURES = Path(__file__).parent / "fixtures_labs"
LOOP = FIXTURES / "variants" / "loop_adder.py"  # an adder.py that never returns: keeps a grade alive


def make_workspace(spec, parent: Path, kind: str) -> Path:
    """A new workspace under `parent`: the starter, the solution, the solution
    with a looping adder.py ("loop"), or the solution with a wrong variant."""
    ws = Path(tempfile.mkdtemp(prefix=f"ws-{kind}-", dir=parent))
    if kind == "starter":
        ws_ops.write_starter(spec, ws)
    else:
        ws_ops.write_solution(spec, ws)
        if kind == "loop":
            shutil.copy(LOOP, ws / "adder.py")
        elif kind != "solution":
            ws_ops.apply_patch(spec.patch_file(kind), ws)
    return ws


def verdict(run) -> tuple:
    """Outcome, each test's outcome and each part's score: what must not depend on how the grade was started."""
    return (
        run.outcome,
        sorted((t.nodeid, t.outcome) for t in run.tests),
        sorted((p.id, p.status, p.points, p.tests_passed, p.tests_total) for p in run.parts),
    )
