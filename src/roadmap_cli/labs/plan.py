"""What starting a grade needs from `lab.yaml`, read without pydantic.

`roadmap grade` starts its grader before the command line is parsed
(grading/prestart.py). Loading the full lab spec (labs/spec.py) costs ~0.2 s of
pydantic import and model building before pytest could start; the grader's
command and config need only the parts' ids, test files and `needs_cuda`, the
time and memory limits, and where the lab's tests and solutions live. This
module reads exactly those, with the same bounded YAML loader (yamlsafe), and
nothing else.

It is never the authority: the normal path still loads and validates the
spec, and prestart.validated() keeps a job started from a plan only when the
plan's `fingerprint` equals the validated spec's (anything else is killed and
started again). A spec that does not read cleanly here gives None: nothing is
started early. The same defaults as LabSpec apply (time_limit_s 300, no
memory limit); the fingerprint comparison is what keeps the two honest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

SPEC_FILE = "lab.yaml"
DEFAULT_TIME_LIMIT_S = 300.0  # LabSpec.time_limit_s's default


@dataclass(frozen=True)
class PartPlan:
    id: str
    tests: tuple[str, ...]
    needs_cuda: bool = False


@dataclass(frozen=True)
class LabPlan:
    """The subset of LabSpec that runner.GradeJob.start uses (same names)."""

    id: str
    root: Path
    parts: tuple[PartPlan, ...]
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    memory_limit_mb: Optional[int] = None
    solution_files: tuple[tuple[str, str], ...] = ()
    learner_side: tuple[str, ...] = ()  # files of tests/ the learner process sees (grading/isolation.py)
    lab_code: Optional[dict] = field(default=None, compare=False, hash=False)  # grading_kit/labcode.py

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    def solution_sources(self) -> dict[str, Path]:
        return solution_sources(self.solution_dir, dict(self.solution_files))

    def part(self, part_id: str) -> PartPlan:
        for part in self.parts:
            if part.id == part_id:
                return part
        raise KeyError(part_id)  # prestart then starts nothing; the normal path says it with a did-you-mean

    def part_prefixes(self) -> list[tuple[str, list[str]]]:
        return [(p.id, list(p.tests)) for p in self.parts]


def labs_root() -> Path:
    """$ROADMAP_LABS_DIR (tests point it at fake labs), else the installed project's labs/."""
    import os

    override = os.environ.get("ROADMAP_LABS_DIR")
    if override:
        return Path(override).expanduser().resolve()
    from roadmap_cli.paths import labs_root as shipped

    return shipped()


def project_root() -> Path:
    """What `solution_files` targets are relative to: the project root in a
    checkout, the package's `_data` folder in a wheel."""
    return labs_root().parent


def fingerprint(spec) -> tuple:
    """Everything of a LabSpec or LabPlan that shapes the grader's command and config."""
    return (
        spec.id,
        str(Path(spec.root).resolve()),
        tuple((p.id, tuple(p.tests), bool(p.needs_cuda)) for p in spec.parts),
        float(spec.time_limit_s),
        spec.memory_limit_mb,
        tuple(sorted((str(k), str(v)) for k, v in dict(spec.solution_files).items())),
        tuple(spec.learner_side),
        repr(getattr(spec, "lab_code", None)),
    )


def solution_sources(solution_dir: Path, solution_files: dict[str, str]) -> dict[str, Path]:
    """Workspace-relative path -> source file of the reference solution
    (solution/ overlaid with solution_files, relative to the project root)."""
    sources: dict[str, Path] = {}
    if solution_dir.is_dir():
        for path in sorted(solution_dir.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                sources[path.relative_to(solution_dir).as_posix()] = path
    for target, source in solution_files.items():
        sources[target] = project_root() / source
    return sources


# lab.yaml path -> (its stat signature, the plan read from it). Every grade lists every lab's
# solutions (grading/isolation.py); with rules and wrong variants a lab.yaml is ~50 KB, and
# reading nine of them is ~0.1-0.5 s, paid again by each of dev check's ~500 grades.
_PLANS: dict[Path, tuple[tuple[int, int, int], Optional["LabPlan"]]] = {}


def read_plan(lab_dir: Path) -> Optional[LabPlan]:
    """The plan of `lab_dir/lab.yaml`, or None when it does not read cleanly.
    Read again only when the file changed (its inode, size or mtime)."""
    path = Path(lab_dir) / SPEC_FILE
    try:
        st = path.stat()
    except OSError:
        return None
    signature = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _PLANS.get(path)
    if cached is not None and cached[0] == signature:
        return cached[1]
    plan = _read_plan(lab_dir, path)
    _PLANS[path] = (signature, plan)
    return plan


def _read_plan(lab_dir: Path, path: Path) -> Optional[LabPlan]:
    from roadmap_cli.formats.yamlsafe import YamlProblem, check_file_size, load_yaml

    try:
        check_file_size(path)
        data = load_yaml(path.read_bytes())
        parts = tuple(
            PartPlan(
                id=_text(p["id"]),
                tests=tuple(_text(t) for t in p["tests"]),
                needs_cuda=_flag(p.get("needs_cuda", False)),
            )
            for p in data["parts"]
        )
        time_limit = data.get("time_limit_s", DEFAULT_TIME_LIMIT_S)
        memory = data.get("memory_limit_mb")
        files = data.get("solution_files") or {}
        learner_side = tuple(_text(name) for name in data.get("learner_side") or ())
        if (
            not parts
            or isinstance(time_limit, bool)
            or not isinstance(time_limit, (int, float))
            or not (memory is None or (isinstance(memory, int) and not isinstance(memory, bool)))
            or not isinstance(files, dict)
        ):
            return None
        return LabPlan(
            id=_text(data["id"]),
            root=Path(lab_dir).resolve(),
            parts=parts,
            time_limit_s=float(time_limit),
            memory_limit_mb=memory,
            solution_files=tuple((_text(k), _text(v)) for k, v in files.items()),
            learner_side=learner_side,
            lab_code=data.get("lab_code") if isinstance(data.get("lab_code"), dict) else None,
        )
    except (OSError, YamlProblem, KeyError, TypeError, AttributeError, ValueError):
        return None


def all_plans() -> list[LabPlan]:
    """The plan of every lab folder under labs_root() that reads cleanly."""
    root = labs_root()
    if not root.is_dir():
        return []
    plans = (read_plan(p) for p in sorted(root.iterdir()) if (p / SPEC_FILE).is_file())
    return [p for p in plans if p is not None]


def _text(value) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value
