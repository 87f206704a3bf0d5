"""The pre-check that runs before pytest: is every learner file valid Python,
and can its imports be found?

One missing `)` used to cost a full pytest start-up (seconds: torch, triton)
and then showed up as a dozen identical collection errors. Here it is one
report, at `file:line:col` with the offending line and a caret, in a few
milliseconds, and no test runs.

What is checked, and why it is safe (no learner code runs):
- every `.py` file of the workspace is compiled (`compile()` only parses);
- every top-level `import x` / `from x import y` of those files is resolved
  statically: the module must be findable (the workspace first, then the
  grader's own sys.path; `PathFinder.find_spec` locates a file, it does not
  execute it), and a name imported from another workspace module must be
  defined at that module's top level. Imports inside `try:` blocks or
  functions are left to Python: they may be optional on purpose.

`.cu` files are compiled with `nvcc` when it is installed (`compile_cuda`):
on a machine without a GPU that is all that can be said of them, and it is
reported as exactly that: "compiled, not run". Files that include torch's
headers (load_inline extensions, like cuda-matmul's) are "not checked": those
headers take minutes to compile on a small CPU machine.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Optional

# Folders that hold no learner code (or code that is not the learner's).
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "env", "out", "data", "node_modules", "site-packages"}


@dataclass
class Problem:
    """One pre-check failure: where, what, and the line with a caret."""

    file: str  # relative to the workspace
    line: int
    col: int  # 1-based
    kind: str  # SyntaxError, IndentationError, ImportError, ...
    message: str
    source_line: str = ""

    def report(self) -> str:
        """`model.py:120:5: SyntaxError: '(' was never closed`, then the line and a caret."""
        text = f"{self.file}:{self.line}:{self.col}: {self.kind}: {self.message}"
        if self.source_line.strip():
            stripped = self.source_line.rstrip("\n").expandtabs(4)
            indent = len(stripped) - len(stripped.lstrip())
            caret_at = max(self.col - 1 - indent, 0)
            text += f"\n    {stripped.strip()}\n    {' ' * caret_at}^"
        return text


# The pre-check reads learner files in the engine's own process: a file it reads must be a regular file inside
# the workspace, of a size a source file has. Learner code can leave a FIFO named `x.cu` (a read never returns),
# a link to /dev/zero (a read never ends) or to a file of the user's (red team route N1b).
MAX_SOURCE_BYTES = 4 * 1024 * 1024


def read_learner_file(workspace: Path, path: Path, limit: int = MAX_SOURCE_BYTES) -> bytes:
    """The bytes of a learner's source file, or OSError when it is not a regular file inside the workspace or is
    over `limit` bytes. Never blocks on a FIFO or device, never follows a link out of the workspace."""
    real = Path(os.path.realpath(path))
    root = os.path.join(os.path.realpath(workspace), "")
    if not str(real).startswith(root):
        raise OSError(f"{path.name} links outside the workspace")
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        if info.st_size > limit:
            raise OSError(f"{path.name} is {info.st_size} bytes, over the {limit}-byte limit for a source file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1)[:limit]
    finally:
        os.close(fd)


def learner_files(workspace: Path) -> list[Path]:
    """Every .py file of the workspace (sorted), outside hidden and tool folders."""
    found = []
    for root, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and not d.endswith(".old"))
        found += [Path(root) / f for f in sorted(files) if f.endswith(".py")]
    return found


def check_workspace(workspace: Path) -> Optional[Problem]:
    """The first problem found (syntax first, in every file; then imports), or None."""
    workspace = Path(workspace)
    trees: dict[Path, ast.Module] = {}
    for path in learner_files(workspace):
        problem, tree = _parse(workspace, path)
        if problem:
            return problem
        trees[path] = tree
    for path, tree in trees.items():
        problem = _check_imports(workspace, path, tree, trees)
        if problem:
            return problem
    return None


def _parse(workspace: Path, path: Path) -> tuple[Optional[Problem], Optional[ast.Module]]:
    rel = path.relative_to(workspace).as_posix()
    try:
        source = read_learner_file(workspace, path)
    except OSError as exc:
        return Problem(rel, 1, 1, "OSError", exc.strerror or str(exc)), None
    try:
        # compile(), not just ast.parse: it also catches what only the compiler
        # sees (`return` outside a function, a misplaced `nonlocal`).
        tree = ast.parse(source, filename=rel)
        compile(tree, rel, "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno or 1
        text = exc.text
        if text is None:
            lines = source.decode("utf-8", "replace").splitlines()
            text = lines[line - 1] if 0 < line <= len(lines) else ""
        return Problem(rel, line, exc.offset or 1, type(exc).__name__, exc.msg, text), None
    except ValueError as exc:  # e.g. "source code string cannot contain null bytes"
        return Problem(rel, 1, 1, "SyntaxError", str(exc)), None
    except (RecursionError, MemoryError):
        # `x = a+a+a+...` 300 000 terms long: the parser or compiler gives up. Python itself would fail the same
        # way on import, so this is the learner's one line, never a traceback (red team R1).
        return Problem(
            rel,
            1,
            1,
            "RecursionError",
            "nested too deeply for Python to compile (an expression or block thousands of levels deep)",
        ), None
    return None, tree


def _top_level_imports(tree: ast.Module):
    """Import statements that run when the module is imported, outside try: blocks."""
    # Only statements directly in the module body: imports under `if`/`try`
    # (TYPE_CHECKING, optional dependencies) and in functions are Python's to judge.
    return [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]


def _defined_names(tree: ast.Module) -> Optional[set[str]]:
    """Names a module defines at top level; None when it cannot be known
    statically (`from x import *`, a module-level `__getattr__`, globals() tricks)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Name) and node.id == "globals":
            return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if node.name == "__getattr__":
                return None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            # Assignments (also inside if/try/for/with at top level): collect every stored name.
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
                elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(sub.name)
                elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return names


def _find(name: str, workspace: Path):
    """Where top-level module `name` would come from: the workspace first
    (it is first on the grader's PYTHONPATH), then this interpreter's path."""
    if name in sys.builtin_module_names:
        return "builtin"
    try:
        return PathFinder.find_spec(name, [str(workspace), *sys.path])
    except (ImportError, ValueError):
        return None


def _check_imports(workspace: Path, path: Path, tree: ast.Module, trees: dict[Path, ast.Module]) -> Optional[Problem]:
    rel = path.relative_to(workspace).as_posix()
    lines = None

    def problem(node, col: int, kind: str, message: str) -> Problem:
        nonlocal lines
        if lines is None:
            try:
                lines = read_learner_file(workspace, path).decode("utf-8", errors="replace").splitlines()
            except OSError:
                lines = []
        text = lines[node.lineno - 1] if 0 < node.lineno <= len(lines) else ""
        return Problem(rel, node.lineno, col + 1, kind, message, text)

    for node in _top_level_imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if _find(top, workspace) is None:
                    return problem(alias, alias.col_offset, "ModuleNotFoundError", f"No module named {top!r}")
            continue
        if node.level or not node.module:
            continue  # relative imports: packages inside a workspace are rare; Python will say
        top = node.module.split(".")[0]
        spec = _find(top, workspace)
        if spec is None:
            return problem(node, node.col_offset, "ModuleNotFoundError", f"No module named {top!r}")
        origin = getattr(spec, "origin", None)
        if "." in node.module or not origin:
            continue
        target = Path(origin)
        if target.parent != workspace.resolve() and target.parent != workspace:
            continue  # only the learner's own modules are read
        other = next((t for p, t in trees.items() if p.resolve() == target.resolve()), None)
        defined = _defined_names(other) if other is not None else None
        if defined is None:
            continue
        for alias in node.names:
            if alias.name not in defined and not (workspace / top / f"{alias.name}.py").exists():
                return problem(
                    alias,
                    alias.col_offset,
                    "ImportError",
                    f"cannot import name {alias.name!r} from {top!r} ({target.name})",
                )
    return None


# ------------------------------------------------------------------ CUDA C


@dataclass
class CudaCheck:
    """nvcc on one .cu file: `compiled, not run` or `compile error` (with file:line)."""

    file: str
    status: str  # "compiled, not run" | "compile error" | "not checked"
    message: Optional[str] = None


NVCC_ERROR = re.compile(r"^(?P<file>[^\s(]+\.cu)\((?P<line>\d+)\): (?P<what>(error|warning)[^\n]*)", re.M)
PTXAS_ERROR = re.compile(r"^ptxas[^\n]*error[^\n]*", re.M | re.I)


def cuda_sources(workspace: Path) -> list[Path]:
    return [p for p in sorted(Path(workspace).rglob("*.cu")) if not (set(p.relative_to(workspace).parts) & SKIP_DIRS)]


# A .cu file that includes torch's headers (a load_inline extension) cannot
# be compiled quickly: torch/types.h pulls in all of ATen (minutes on a small
# CPU machine, and a CPU build of torch lacks some CUDA headers). Such files
# are reported as "not checked" rather than slowing every grade.
TORCH_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](torch|ATen|c10)/', re.M)


def compile_cuda(workspace: Path, *, arch: str = "sm_80", timeout: float = 60.0) -> list[CudaCheck]:
    """Compile every .cu file with nvcc (`-arch=sm_80 -c`, ptxas errors
    included). Nothing runs: a GPU is what proves a kernel correct."""
    workspace = Path(workspace)
    sources = cuda_sources(workspace)
    nvcc = shutil.which("nvcc")
    if not sources:
        return []
    if nvcc is None:
        return [CudaCheck(p.relative_to(workspace).as_posix(), "not checked", "nvcc is not installed") for p in sources]
    checks = []
    with tempfile.TemporaryDirectory(prefix="roadmap-nvcc-") as tmp:
        for src in sources:
            rel = src.relative_to(workspace).as_posix()
            try:
                text = read_learner_file(workspace, src).decode("utf-8", errors="replace")
            except OSError as exc:
                checks.append(CudaCheck(rel, "not checked", str(exc)))
                continue
            if TORCH_INCLUDE.search(text):
                checks.append(
                    CudaCheck(
                        rel,
                        "not checked",
                        "it includes torch's headers: compiled (and run) only when graded on a CUDA GPU",
                    )
                )
                continue
            cmd = [
                nvcc,
                f"-arch={arch}",
                "--ptxas-options=-v",
                "-std=c++17",
                "-c",
                rel,
                "-o",
                str(Path(tmp) / (src.stem + ".o")),
            ]
            try:
                proc = _run_nvcc_walled(cmd, workspace, Path(tmp), timeout)
            except subprocess.TimeoutExpired:
                checks.append(CudaCheck(rel, "compile error", f"nvcc took longer than {timeout:g} s"))
                continue
            if proc.returncode == 0:
                checks.append(CudaCheck(rel, "compiled, not run"))
            else:
                checks.append(CudaCheck(rel, "compile error", _nvcc_message(proc.stdout + proc.stderr)))
    return checks


def _run_nvcc_walled(cmd: list[str], workspace: Path, build: Path, timeout: float) -> subprocess.CompletedProcess:
    """nvcc reads learner-controlled input (an `#include` or `.incbin` can name any path), so it runs behind
    the same OS wall as every other compiler (grading_kit/oswall.py): the system, the Python runtime, the
    workspace read-only and `build` read-write; never the data home, the references, the user's home or the
    network. It runs while the grade's learner code may still rewrite the workspace: what it can show is
    only what the wall shows. Unwalled only where the whole grade is (the weak sandbox)."""
    from roadmap_cli.grading_kit import oswall

    try:
        walled = oswall.status()[0] == oswall.STRONG
    except oswall.WallUnavailable:
        walled = False
    view = oswall.compile_view([str(workspace)], [str(build)], str(workspace)) if walled else None
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C",
        "HOME": oswall.LEARNER_HOME if walled else os.environ.get("HOME", "/"),
    }
    return oswall.run(
        cmd, view, cwd=workspace, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def _nvcc_message(output: str) -> str:
    """The errors as `file:line: error: ...` (nvcc writes `file(line): error`)."""
    found = [
        f"{m['file']}:{m['line']}: {m['what']}" for m in NVCC_ERROR.finditer(output) if m["what"].startswith("error")
    ]
    found += PTXAS_ERROR.findall(output)
    if not found:
        found = [ln for ln in output.strip().splitlines() if ln.strip()][-5:]
    return "\n".join(found[:8])


# ------------------------------------------------------------------ as a grade


def failed_run(job, problem: Problem):
    """The grade a pre-check failure is: every selected part failed with the
    one report, no test run (so it is recorded like any other attempt)."""
    from datetime import datetime, timezone

    from roadmap_cli.grading.results import GradeRun, PartResult

    parts = []
    for part in job.spec.parts:
        title = part.title.model_dump()
        if part.needs_cuda and not job.device.cuda:
            parts.append(
                PartResult(
                    part.id, title, 0.0, 0.0, "not-graded-here", True, message="not graded here (needs a CUDA GPU)"
                )
            )
        elif part.id not in job.selected:
            parts.append(PartResult(part.id, title, 0.0, 0.0, "not-run", part.needs_cuda, message="not run"))
        else:
            parts.append(
                PartResult(part.id, title, float(part.points), 0.0, "failed", part.needs_cuda, message=problem.report())
            )
    device = job.device
    return GradeRun(
        lab_id=job.spec.id,
        workspace=str(job.workspace),
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        outcome="failed",
        score=0.0,
        max_score=round(sum(p.max_points for p in parts), 3),
        parts=parts,
        tests=[],
        perf=[],
        device=device.name,
        device_capability=device.capability,
        torch_version=device.torch_version,
        triton_version=device.triton_version,
        interpret_mode=not device.cuda,
        grader_sha256="",
        duration_s=0.0,
        message=f"pre-check: {problem.kind} in {problem.file}:{problem.line}:{problem.col}; no test ran",
    )
