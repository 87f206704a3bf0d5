"""Engine-side helpers of the learner sandbox (docs/architecture.md,
"Grading"): what no learner process may open, keeping the engine's memory
out of reach, handing the config over a pipe, voiding an attempt."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

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
    # Every packaged copy of the labs the install left (a wheel's, or site-packages' beside an editable install):
    # its references and tests, never its labs' data/ (a wheel's labs root is such a copy, and a lab hands the
    # learner's code paths into its data/: minigpt's corpus).
    from roadmap_cli.grading_kit.oswall import runtime_hides

    for copy in (Path(p) for p in runtime_hides() if os.path.isdir(p)):
        paths.add(str(copy / "kernels"))
        paths.update(
            str(lab / sub) for lab in (copy / "labs").glob("*") if lab.is_dir() for sub in ("solution", "tests")
        )
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


def learner_view(
    spec: "LabSpec",
    workspace: str,
    scratch: str,
    shim: str,
    artefacts: Optional[str] = None,
    gpu_cache: Optional[str] = None,
) -> dict:
    """The per-grade part of what learner code sees behind the OS wall
    (grading_kit/oswall.py adds the system's part, `oswall.SYSTEM`; nothing
    else exists in there). Built up from nothing:

    read-write  the workspace, the grade's scratch folder (pytest's
                tmp_path) and the workspace's own GPU build folders (torch
                extensions, Triton cache, CUDA MPS pipes: learner_extras);
    read-only   the Python runtime and site-packages, the lab's data/ (inputs
                such as a corpus), the lab's adapter shim (`shim`, made by
                learner_shim outside every writable folder: the learner side
                imports its adapter from there) and the C++ build cache (the
                grader compiles, the learner loads);
    absent      the workspace's .git (the engine's git reads it: learner code
                must not plant config or hooks there) and, inside what is
                granted, every `roadmap_cli/_data` copy, labs folder, kernels/,
                project .git and data home.

    To grant one more folder to every grade, add one line to `grants` below."""
    from roadmap_cli.grading_kit import cpp_cache, learner_extras

    # Without a folder of its own (a grade of dev check, whose warm learner sees the cache): the cache.
    artefacts = artefacts or str(cpp_cache.cache_root())
    grants = learner_grants(spec, workspace, scratch, shim, artefacts)
    grants += [
        (
            "read_write",
            path,
            "the workspace's own GPU build folders: torch extensions, Triton cache, "
            "CUDA MPS pipes (grading_kit/learner_extras.py)",
        )
        for path in learner_extras.extra_rw_dirs(str(workspace), Path(gpu_cache) if gpu_cache else None)
    ]
    return {**_view([spec], grants), "cwd": str(workspace)}


def learner_grants(
    spec: "LabSpec", workspace: str, scratch: str, shim: str, artefacts: str = "<this grade's C++ builds>"
) -> list[tuple[str, str, str]]:
    """learner_view's per-grade grants: (kind, path, why)."""
    return [
        ("read_write", str(workspace), "the workspace: the learner's own files"),
        ("read_write", str(scratch), "the grade's scratch folder: pytest's tmp_path"),
        ("read_only", shim, "the lab's adapter shim (adapter.py and its declared learner-side files)"),
        ("read_only", str(Path(spec.root).resolve() / "data"), "the lab's input data"),
        ("read_only", artefacts, "this grade's C++ builds (the grader builds, the learner loads; never the cache)"),
        (
            "hide",
            os.path.join(str(workspace), ".git"),
            "the workspace's git repository: the engine's, not the learner's",
        ),
    ]


def warm_learner_view(specs: list["LabSpec"], root: str, shims: str) -> dict:
    """The view of dev check's warm learner (grading_kit/warm_learner.py):
    learner_view's system, runtime and hidden paths for every lab of the run,
    with `shims` (where the run's grades make their labs' shims) read-only,
    and one writable folder, `root`, under which every workspace and every
    grade's scratch folder are made, and the GPU build folders
    (grading_kit/learner_extras.py: every workspace's Triton cache and torch extensions)."""
    from roadmap_cli.grading_kit import cpp_cache, learner_extras

    grants = [
        ("read_write", root, "dev check's root: every workspace and scratch folder of the run"),
        *(
            ("read_write", path, "the GPU build folders of every workspace of the run")
            for path in learner_extras.shared_rw_dirs()
        ),
        ("read_only", shims, "the labs' adapter shims"),
        ("read_only", str(cpp_cache.cache_root()), "the C++ build cache: the grader builds, the learner loads"),
        *(("read_only", str(Path(spec.root).resolve() / "data"), "a lab's input data") for spec in specs),
    ]
    # On the host's network (no namespace of its own): the graders of dev check, which run on the host's, talk
    # to its learners' servers. It runs the project's own code (references, starters, wrong variants), never
    # a learner's; `dev check --cold-learners` checks behind the whole wall.
    return {**_view(specs, grants), "cwd": root, "shared_net": True}


def _view(specs: list["LabSpec"], grants: list[tuple[str, str, str]]) -> dict:
    from roadmap_cli import paths
    from roadmap_cli.labs.plan import labs_root

    from roadmap_cli.grading_kit.oswall import python_runtime, runtime_hides

    view: dict = {"hide": [], "read_only": [], "read_write": [], "why": {}}

    def grant(kind: str, path: str, why: str) -> None:
        view[kind].append(path)
        view["why"].setdefault(os.path.realpath(path), why)

    for path in python_runtime():
        grant("read_only", path, "the Python runtime and site-packages")
    for kind, path, why in grants:
        grant(kind, path, why)
    # Inside what is granted, roadmap's own data and labs stay absent (a flat checkout, an editable install).
    for labs in {labs_root(), paths.labs_root()}:
        for hidden in (labs, labs.parent / "kernels", labs.parent / ".git"):
            grant("hide", str(hidden), "roadmap's labs, kernels and history: references and expected values")
    for path in runtime_hides():
        grant("hide", path, "roadmap's packaged copy of the labs")
    for home in _data_homes():
        grant("hide", home, "the data home: progress and attempts")
    return view


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
                view = view[os.write(fd, view) :]
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
