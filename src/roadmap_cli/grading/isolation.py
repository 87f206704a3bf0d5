"""Engine-side helpers of the learner sandbox (docs/architecture.md,
"Grading"): what no learner process may open, keeping the engine's memory
out of reach, handing the config over a pipe, voiding an attempt."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from roadmap_cli.labs.spec import LabSpec


def forbidden_sources(spec: "LabSpec") -> list[str]:
    """What no learner process may open: every lab's solution/ folder and
    solution_files, every lab's tests/ folder (reference models and expected
    values: the learner side imports its adapter shim instead, see
    `learner_shim`), and the project's kernels/ folder (kernel-lab references).

    Every lab is read as a plan (labs/plan.py: no pydantic, and read again
    only when its lab.yaml changed), so a process that grades many times
    (dev check, watch) pays for it once; a lab.yaml that does not read
    still has its solution/ folder forbidden (the glob below)."""
    from roadmap_cli.labs.plan import all_plans, labs_root, project_root

    paths = {str(project_root() / "kernels")}
    for other in [spec, *all_plans()]:
        paths.update((str(other.solution_dir), str(other.tests_dir)))
        paths.update(str(p) for p in other.solution_sources().values())
    paths.update(str(p / sub) for p in labs_root().glob("*") if p.is_dir() for sub in ("solution", "tests"))
    return sorted(paths)


SHIM_PREFIX = "learner-shim-"


def learner_files(spec: "LabSpec") -> list[str]:
    """The files of the lab's tests/ folder the learner process may import:
    adapter.py and what lab.yaml's `learner_side` lists (a given model the
    learner's code runs, input generators: nothing that holds an expected
    value)."""
    names = ["adapter.py"] if (Path(spec.tests_dir) / "adapter.py").is_file() else []
    return names + [name for name in getattr(spec, "learner_side", ()) if name not in names]


def learner_shim(spec: "LabSpec", parent: str) -> str:
    """The lab's learner side, copied out of tests/ into a folder of its own
    under `parent`: what the learner process sees, read-only, instead of the
    lab's tests/ (sys.path, the adapter's import; docs/architecture.md,
    "Grading"). Named by its contents' hash, so a warm learner's run makes
    one per lab and version, and made whole or not at all (a rename), so two
    graders making the same one at once both find it complete."""
    import hashlib
    import shutil
    import tempfile

    tests = Path(spec.tests_dir)
    files = [(name, (tests / name).read_bytes()) for name in learner_files(spec)]
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    target = Path(parent) / f"{SHIM_PREFIX}{spec.id}-{digest.hexdigest()[:16]}"
    if target.is_dir():
        return str(target)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=parent))
    try:
        for name, data in files:
            (building / name).write_bytes(data)
        try:
            building.rename(target)
        except OSError:  # another grader made it first: the same contents
            if not target.is_dir():
                raise
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return str(target)


def learner_view(spec: "LabSpec", workspace: str, scratch: str, shim: str) -> dict:
    """What the learner's file system looks like behind the OS wall
    (grading_kit/oswall.py): hidden, shown read-only, writable.

    Hidden: every labs folder (the shipped one and a $ROADMAP_LABS_DIR one),
    tests/ and all, kernels/, the project's .git (whose objects hold every
    reference solution), each `roadmap_cli/_data` copy on sys.path (an
    editable install leaves one in site-packages), and the data home
    (progress, attempts). Shown read-only: the lab's adapter shim (`shim`,
    made by learner_shim: the learner side imports its adapter from there),
    the lab's data/ (inputs such as a corpus) and the C++ build cache (the
    grader compiles, the learner loads). Writable: the workspace, the grade's
    scratch folder (pytest's tmp_path) and the GPU build folders of
    grading_kit/learner_extras.py (torch extensions, the workspace's Triton
    cache, CUDA MPS's pipes)."""
    from roadmap_cli.grading_kit import learner_extras

    writable = [str(workspace), str(scratch), *learner_extras.extra_rw_dirs(str(workspace))]
    return {**_view([spec], writable, [shim]), "cwd": str(workspace)}


def warm_learner_view(specs: list["LabSpec"], root: str, shims: str) -> dict:
    """The view of dev check's warm learner (grading_kit/warm_learner.py):
    learner_view's hidden and read-only paths for every lab of the run, with
    `shims` (where the run's grades make their labs' shims) read-only, and
    one writable folder, `root`, under which every workspace and every
    grade's scratch folder are made, and the GPU build folders
    (grading_kit/learner_extras.py: every workspace's Triton cache lives there)."""
    from roadmap_cli.grading_kit import learner_extras

    writable = [root, *learner_extras.shared_rw_dirs()]
    return {**_view(specs, writable, [shims]), "cwd": root}


def _view(specs: list["LabSpec"], writable: list[str], shims: list[str]) -> dict:
    import sys

    from roadmap_cli import paths
    from roadmap_cli.grading_kit import cpp_build
    from roadmap_cli.labs.plan import labs_root

    hide: set[str] = set()
    for labs in {labs_root(), paths.labs_root()}:
        hide.update({str(labs), str(labs.parent / "kernels"), str(labs.parent / ".git")})
    for entry in sys.path:
        if entry:
            hide.add(os.path.join(entry, "roadmap_cli", "_data"))
    hide.update(_data_homes())
    # The Python the learner process runs, shown again on top of the private /tmp: a project or virtual
    # environment that lives under /tmp (a CI checkout, say) would otherwise vanish with it.
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
              *(entry for entry in sys.path if entry)}
    # The lab's data/ (a corpus, say) is input the learner's code is handed paths into; its tests/ stays hidden.
    labs = [str(Path(spec.root).resolve() / "data") for spec in specs]
    return {"hide": sorted(hide),
            "read_only": [*sorted(p for p in python if os.path.isdir(p)), *labs, *shims, str(cpp_build.cache_root())],
            "read_write": writable}


def _data_homes() -> list[str]:
    """Every place this grade's data home may be: $ROADMAP_HOME, `--home`
    (when the command line set it) and the platform default."""
    import sys

    homes = [os.environ.get("ROADMAP_HOME")]
    context = sys.modules.get("roadmap_cli.context")  # only if the CLI loaded it: never imported for this
    if context is not None:
        try:
            homes.append(context.current().home_option)
        except Exception:  # noqa: BLE001 - no context yet: nothing to add
            pass
    try:
        from platformdirs import user_data_dir

        homes.append(user_data_dir("roadmap", appauthor=False))
    except ImportError:
        pass
    return [os.path.realpath(os.path.expanduser(h)) for h in homes if h]


def not_dumpable() -> None:
    """The engine holds the results key: no other process of this user (the
    learner process, without capabilities) may read its memory or descriptors."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    except (OSError, AttributeError):
        pass


def write_and_close(fd: int, blob: bytes):
    """Write `blob` to the pipe `fd` and close it: here if it fits the pipe
    buffer, else on a thread (the reader may start later than we write)."""
    import threading

    def write() -> None:
        try:
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
        finally:
            os.close(fd)

    if len(blob) < 60_000:
        write()
        return None
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def void(run, reasons: list[str]) -> None:
    """The attempt does not count: no points, no passed part, outcome error."""
    text = "attempt void: " + "; ".join(dict.fromkeys(reasons))  # each reason once, in order
    run.outcome, run.score, run.message = "error", 0.0, text
    for part in run.parts:
        if part.status in ("passed", "failed", "skipped"):
            part.status, part.points = "failed", 0.0
            part.message = text if not part.message else f"{text}\n{part.message}"
