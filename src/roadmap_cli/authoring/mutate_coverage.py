"""Which parts run which function of the reference: `dev mutate` grades a
mutant only on the parts that execute the code it changed.

A whole-lab grade takes 30-90 s on this project's 2-core CI machine, and a
mutant of the tokenizer cannot change what the training part sees unless
training runs the tokenizer. So, once per (grader, solution):

1. every Python function of the single source gets a probe as its first
   statement; the first call in a process appends "<file>::<function>" to a
   hits file (a dict lookup per call after that, cheap in hot loops);
2. the instrumented reference is graded one part at a time; the hits of a
   part are the functions it executes (in whatever process runs learner
   code: the probe writes a file, it needs no channel back).

`@triton.jit` functions cannot hold a Python probe: a kernel counts as run
by the parts that run a function of its file that names it (the launcher),
transitively through helper kernels. Module-level code, and functions no
probe saw (a part whose instrumented grade failed, a process that could not
write the file), fall back to every part: never fewer parts than needed.

C/C++ sources are compiled, not imported: no probe can go inside them. A
C/C++ file is run by the parts that FAIL when it cannot compile: the
reference is graded once more per such file with a missing `#include` put
in front of it (the compiler stops at once; every other build is cached).
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path
from typing import Optional

from roadmap_cli.authoring import mutants_cpp
from roadmap_cli.labs import workspace as ws
from roadmap_cli.grading.runner import grade_workspace
from roadmap_cli.labs.starter_build import solution_text

# Once per process per function: a module-level set (SEEN, made after the module's leading imports) rather than
# globals(), which the lab-code check (grading_kit/labcode.py) refuses in lab code, probes included.
SEEN = "_roadmap_probes_seen"
PROBE = "if {key!r} not in " + SEEN + ": " + SEEN + ".add({key!r}) or open({path!r}, 'a').write({hit!r})\n"


def _functions(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    out: list[tuple[str, ast.AST]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    out.append((name, child))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _is_jit(node: ast.AST) -> bool:
    for deco in getattr(node, "decorator_list", []):
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and target.attr in ("jit", "autotune", "heuristics"):
            return True
        if isinstance(target, ast.Name) and target.id in ("jit", "autotune", "heuristics"):
            return True
    return False


def instrument(text: str, rel: str, hits: Path) -> str:
    """`text` (a solution view) with a probe as the first statement of every non-jit function."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    inserts: list[tuple[int, str]] = []
    for n, (name, node) in enumerate(_functions(tree)):
        if _is_jit(node):
            continue
        body = node.body
        first = (
            body[1]
            if (
                isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
                and isinstance(body[0].value.value, str)
                and len(body) > 1
            )
            else body[0]
        )
        line = lines[first.lineno - 1]
        if line[: first.col_offset].strip() or first.lineno == node.lineno:
            continue  # `def f(): return 1`: no line of its own to put a probe before
        probe = PROBE.format(key=f"_roadmap_probe_{n}", path=str(hits), hit=f"{rel}::{name}\n")
        inserts.append((first.lineno - 1, line[: first.col_offset] + probe))
    if not inserts:
        return text
    for index, probe in sorted(inserts, reverse=True):
        lines.insert(index, probe)
    # The set goes after the docstring, `from __future__` and the other leading imports (a __future__ import
    # must come first), before any code that could call a probed function.
    lead = next(
        (
            min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
            for node in tree.body
            if not isinstance(node, (ast.Import, ast.ImportFrom))
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        ),
        len(text.splitlines()),
    )
    lines.insert(lead, f"{SEEN} = set()\n")
    return "".join(lines)


def _kernel_callers(text: str) -> dict[str, set[str]]:
    """jit function -> the non-jit functions of the file that (transitively) name it."""
    tree = ast.parse(text)
    functions = _functions(tree)
    jit = {name for name, node in functions if _is_jit(node)}
    names_in = {name: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} for name, node in functions}
    callers: dict[str, set[str]] = {}
    for kernel in jit:
        seen, frontier, found = {kernel}, [kernel], set()
        while frontier:
            current = frontier.pop()
            short = current.rsplit(".", 1)[-1]
            for name, used in names_in.items():
                if short in used and name not in seen:
                    seen.add(name)
                    (frontier.append(name) if name in jit else found.add(name))
        callers[kernel] = found
    return callers


class Coverage:
    """(file, function) -> the parts that execute it, from one probed reference grade per part."""

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts
        self.hits: dict[tuple[str, str], set[str]] = {}
        self.kernels: dict[str, dict[str, set[str]]] = {}
        self.files: dict[str, set[str]] = {}  # C/C++ file -> the parts that fail when it does not compile
        self.blind: set[str] = set()  # parts whose probed grade did not pass: they may run anything
        self.measured = False
        # Output digests of the probed runs (same secret seed as the reference
        # run): where they differ from the reference's, the output is not a
        # function of the inputs (timings, say) and says nothing about equivalence.
        self.digests: list = []
        self.unstable: set[tuple] = set()

    def parts_for(self, file: str, function: str) -> list[str]:
        if self.measured and file in self.files:
            return [p for p in self.parts if p in self.files[file] | self.blind] or list(self.parts)
        if not self.measured or not function:
            return list(self.parts)
        found = set(self.blind)
        top = function
        while top and (file, top) not in self.hits and top not in self.kernels.get(file, {}):
            top = top.rsplit(".", 1)[0] if "." in top else ""  # a nested function: its parent's parts
        if not top:
            return list(self.parts)
        if top in self.kernels.get(file, {}):
            for caller in self.kernels[file][top]:
                found |= self.hits.get((file, caller), set())
            if not self.kernels[file][top]:
                return list(self.parts)
        else:
            found |= self.hits[(file, top)]
        return [p for p in self.parts if p in found] or list(self.parts)

    def to_json(self) -> dict:
        return {
            "parts": self.parts,
            "blind": sorted(self.blind),
            "unstable": sorted(map(list, self.unstable)),
            "hits": [[f, fn, sorted(ps)] for (f, fn), ps in sorted(self.hits.items())],
            "kernels": {f: {k: sorted(v) for k, v in ks.items()} for f, ks in self.kernels.items()},
            "files": {f: sorted(ps) for f, ps in self.files.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> "Coverage":
        cov = cls(data["parts"])
        cov.blind = set(data["blind"])
        cov.unstable = {tuple(k) for k in data.get("unstable", [])}
        cov.hits = {(f, fn): set(ps) for f, fn, ps in data["hits"]}
        cov.kernels = {f: {k: set(v) for k, v in ks.items()} for f, ks in data["kernels"].items()}
        cov.files = {f: set(ps) for f, ps in data.get("files", {}).items()}
        cov.measured = True
        return cov


def measure(
    spec, device, parts: list[str], seed: int, timeout: Optional[float], run_parallel, read_digests, warm=None
) -> Coverage:
    """Grade the probed reference once per part (through `run_parallel`, a map over jobs;
    `warm`: the run's warm graders, grading/warm.py)."""
    cov = Coverage(parts)
    sources = {
        rel: solution_text(src.read_text(encoding="utf-8"), rel)
        for rel, src in spec.solution_sources().items()
        if rel.endswith(".py")
    }
    for rel, text in sources.items():
        try:
            cov.kernels[rel] = _kernel_callers(text)
        except SyntaxError:
            continue

    def one(part: str) -> tuple[str, Optional[set[tuple[str, str]]]]:
        with tempfile.TemporaryDirectory(prefix=f"roadmap-coverage-{spec.id}-") as tmp:
            path = Path(tmp) / "ws"
            path.mkdir()
            # Inside the workspace: behind the OS wall it is the one folder the learner process may write.
            hits = path / ".roadmap-coverage-hits.txt"
            hits.touch()
            overrides = {}
            for rel, text in sources.items():
                try:
                    overrides[rel] = instrument(text, rel, hits)
                except SyntaxError:
                    continue
            ws.write_solution(spec, path, overrides)
            digests = Path(tmp) / "digests.jsonl"
            run = grade_workspace(
                spec,
                path,
                parts=[part],
                timeout=timeout,
                device=device,
                secret_seed=seed,
                extra_env={"ROADMAP_OUTPUT_DIGESTS": str(digests)},
                warm=warm,
            )
            if run.outcome != "passed":
                return part, None
            cov.digests.extend(read_digests(digests))
            found = set()
            for line in hits.read_text(encoding="utf-8").splitlines():
                file, _, function = line.partition("::")
                found.add((file, function))
            return part, found

    def unbuildable(rel: str) -> tuple[str, Optional[set[str]]]:
        """The parts that fail when `rel` does not compile."""
        with tempfile.TemporaryDirectory(prefix=f"roadmap-coverage-{spec.id}-") as tmp:
            path = Path(tmp) / "ws"
            path.mkdir()
            broken = '#include "roadmap_coverage_probe_missing.h"\n' + cpp_sources[rel]
            ws.write_solution(spec, path, {rel: broken})
            run = grade_workspace(spec, path, parts=parts, timeout=timeout, device=device, secret_seed=seed, warm=warm)
            if run.outcome == "error":
                return rel, None
            return rel, {p for p in parts if run.part(p).status != "passed"}

    cpp_sources = {
        rel: src.read_text(encoding="utf-8")
        for rel, src in spec.solution_sources().items()
        if mutants_cpp.is_cpp(rel) and (device.cuda or not mutants_cpp.gpu_only(rel))
    }
    if len(parts) > 1:
        for rel, failing in run_parallel(unbuildable, sorted(cpp_sources)):
            if failing:  # None (the grader broke) or no part failed: every part, to be safe
                cov.files[rel] = failing
    for part, found in run_parallel(one, parts):
        if found is None:
            cov.blind.add(part)
            continue
        for key in found:
            cov.hits.setdefault(key, set()).add(part)
    cov.measured = True
    return cov
