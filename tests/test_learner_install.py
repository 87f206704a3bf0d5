"""A learner's install (`pip install -e .`, no `[dev]` extras) has everything the learner's
commands import; the dev extras (playwright, build tools, pexpect, bibtexparser) serve the
test suite and the authoring commands only.

Two checks, neither installing anything:

- statically, every import in the code a learner runs (src/roadmap_cli, and the labs'
  graders, starters and reference kernels, which `roadmap grade` imports) resolves to the
  standard library, to the project's own files, or to a distribution that pyproject's base
  dependencies pull in (their requirements followed transitively). A dev-only module is never
  imported by src/roadmap_cli, except lazily (inside a function) by the dev commands' modules;
- at run time, the learner commands run with every dev-only module made unimportable.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11 (the CI's)
from packaging.markers import default_environment  # noqa: E402 - after the skip
from packaging.requirements import Requirement  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "roadmap_cli"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# Modules of src/roadmap_cli allowed to import a dev-only module, and only inside a function.
DEV_COMMAND_MODULES = ("authoring/",)


def _name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def _closure(requirements: list[str]) -> set[str]:
    """Distribution names the requirements install, followed through their own requirements
    (markers evaluated for this machine; an extra only where it was asked for)."""
    seen: set[str] = set()
    todo = [(Requirement(r), set()) for r in requirements]
    while todo:
        req, _ = todo.pop()
        env = default_environment()
        if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e}) for e in ({""} | req.extras)):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            needs = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for spec in needs:
            sub = Requirement(spec)
            if sub.marker is not None and "extra" in str(sub.marker):
                if not any(sub.marker.evaluate({**env, "extra": e}) for e in req.extras):
                    continue
                sub.marker = None
            todo.append((sub, set()))
    return seen


BASE = _closure(PYPROJECT["project"]["dependencies"])
DEV_ONLY = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["dev"]} - BASE


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level module, imported inside a function) for every absolute import of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name.split(".")[0], in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.module.split(".")[0], in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def _learner_files() -> list[Path]:
    return sorted([*SRC.rglob("*.py"), *(ROOT / "labs").rglob("*.py"), *(ROOT / "kernels").rglob("*.py")])


def _local_modules() -> set[str]:
    """Module names the labs and kernels import from their own folders (adapter, refs, the learner's files)."""
    names = {"roadmap_cli"}
    for folder in (ROOT / "labs", ROOT / "kernels"):
        names |= {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.rglob("*") if p.is_dir()}
    return names


def distribution_problems(files: list[Path]) -> list[str]:
    dists = {
        module: {d.lower().replace("_", "-") for d in names}
        for module, names in metadata.packages_distributions().items()
    }
    local, problems = _local_modules(), []
    for path in files:
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        in_src = path.is_relative_to(SRC)
        dev_module = in_src and path.relative_to(SRC).as_posix().startswith(DEV_COMMAND_MODULES)
        for module, in_function in _imports(path):
            if module in sys.stdlib_module_names or module in local or module == "__future__":
                continue
            owners = dists.get(module, set())
            if owners & DEV_ONLY:
                if not in_src:
                    continue  # tests of the project itself are not learner code
                if not (dev_module and in_function):
                    problems.append(
                        f"{rel}: imports dev-only {module} ({sorted(owners)})"
                        + ("" if dev_module else " outside the dev commands")
                        + ("" if in_function else " at module level")
                    )
            elif not owners & BASE:
                problems.append(f"{rel}: imports {module}, which no base dependency installs ({sorted(owners) or '?'})")
    return problems


def test_every_import_of_learner_code_is_a_base_dependency() -> None:
    assert {"playwright", "build", "pexpect"} <= DEV_ONLY  # the premise: these are dev extras only
    assert {"torch", "sqlmodel", "sqlalchemy", "typer"} <= BASE
    assert not distribution_problems(_learner_files())


def test_the_import_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = SRC / "cli" / "__probe_dev_import__.py"
    try:
        bad.write_text("import pexpect\n\ndef f():\n    import bibtexparser\n", encoding="utf-8")
        problems = distribution_problems([bad])
    finally:
        bad.unlink()
    assert len(problems) == 2 and "at module level" in problems[0] and "outside the dev commands" in problems[1]


# The commands a learner runs; the grade of the fixture lab covers the grader's own process.
PROBE = r"""
import importlib.abc, json, sys
BLOCKED = set(json.loads(sys.argv[1]))

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"dev-only module {name} imported by a learner command")

sys.meta_path.insert(0, Block())
from roadmap_cli.cli import main
codes = {}
for args in json.loads(sys.argv[2]):
    try:
        main(args)
        codes[" ".join(args)] = 0
    except SystemExit as exc:
        codes[" ".join(args)] = exc.code
print("CODES" + json.dumps(codes))
"""
COMMANDS = [
    ["--help"],
    ["status"],
    ["next"],
    ["stage", "show", "1"],
    ["lab", "list"],
    ["doctor"],
    ["paper", "log", "FlashAttention-2", "--arxiv", "2307.08691"],
    ["paper", "suggest"],
    ["log", "hours", "1"],
    ["cadence"],
    ["stats"],
    ["report", "--month", date.today().strftime("%Y-%m"), "--format", "html", "-o", "report.html"],
    ["lab", "start", "adder"],
    ["grade", "adder"],
    ["lab", "history", "adder"],
    ["export", "-o", "out.json"],
]


def test_learner_commands_run_without_the_dev_extras(tmp_path: Path) -> None:
    modules = {
        m
        for m, owners in metadata.packages_distributions().items()
        if {o.lower().replace("_", "-") for o in owners} & DEV_ONLY
    }
    assert {"playwright", "pexpect", "build"} <= modules
    env = dict(
        os.environ,
        ROADMAP_HOME=str(tmp_path / "home"),
        ROADMAP_DEVICE="cpu",
        OMP_NUM_THREADS="1",
        ROADMAP_LABS_DIR=str(Path(__file__).parent / "fixtures_labs" / "labs"),
        ROADMAP_DEV_UNLOCKED="1",
    )
    env.pop("DATABASE_URL", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(sorted(modules)), json.dumps(COMMANDS)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("CODES")]
    assert line and "dev-only module" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    codes = json.loads(line[-1][len("CODES") :])
    assert codes.pop("grade adder") == 1  # the starter fails, as it should
    assert {args: code for args, code in codes.items() if code != 0} == {}
