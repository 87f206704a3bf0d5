"""A lab's mutants as result rows for `roadmap dev mutate`: each mutant's id
(the hash of its diff against the solution view, stable while the code
around it is unchanged), its line in the solution view, validity, and the
lab.yaml `known_survivors` that explain it."""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from typing import Optional

from roadmap_cli.authoring.mutants import Mutant, generate
from roadmap_cli.labs.spec import LabSpec
from roadmap_cli.labs.starter_build import solution_text


@dataclass
class MutantResult:
    id: str
    file: str
    line: int  # in the solution view (what a learner sees)
    function: str
    operator: str
    description: str
    diff: str
    status: str  # killed|survived|equivalent-suspect|explained|invalid|not-gradable-here|error
    parts_failed: list[str] = field(default_factory=list)
    graded_parts: list[str] = field(default_factory=list)  # the parts that run the mutated code
    covered_by: list[str] = field(default_factory=list)  # survivors: parts that test this code
    tests_failed: list[str] = field(default_factory=list)  # killed: node ids it failed (the first of each part)
    message: str = ""
    reason: str = ""  # explained: lab.yaml's reason
    seconds: float = 0.0
    cached: bool = False

    @property
    def label(self) -> str:
        return f"{self.file}:{self.function or '<module>'}: {self.operator} {self.description}"


def _unified(rel: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{rel}", f"b/{rel}", n=2
        )
    )


def _first_changed_line(diff: str) -> int:
    match = re.search(r"^@@ -(\d+)(?:,(\d+))? ", diff, re.M)
    if not match:
        return 0
    start, length = int(match.group(1)), int(match.group(2) or 1)
    context = 0
    for line in diff.split("\n@@", 1)[0].splitlines()[3:]:
        if line.startswith(" "):
            context += 1
        else:
            break
    return start + context if length else start


def all_mutants(spec: LabSpec) -> list[tuple[Mutant, MutantResult]]:
    """Every mutant of the lab's single source with its (ungraded) result row, sorted by id."""
    out = []
    for rel, source in spec.solution_sources().items():
        text = source.read_text(encoding="utf-8")
        original = solution_text(text, rel)
        for mutant in generate(text, rel):
            view = solution_text(mutant.text, rel)
            diff = _unified(rel, original, view)
            if not diff:
                continue
            mutant_id = hashlib.sha256(diff.encode()).hexdigest()[:12]
            status, message = "", ""
            if rel.endswith(".py"):
                try:
                    compile(view, rel, "exec")
                except SyntaxError as exc:
                    status = "invalid"
                    message = f"does not compile: {exc.msg}"
            row = MutantResult(
                mutant_id,
                rel,
                _first_changed_line(diff),
                mutant.function,
                mutant.operator,
                mutant.description,
                diff,
                status,
                message=message,
            )
            out.append((mutant, row))
    unique = {row.id: (m, row) for m, row in out}
    return [unique[k] for k in sorted(unique)]


def explain(spec: LabSpec, row: MutantResult) -> Optional[str]:
    for known in spec.known_survivors:
        if known.id and row.id.startswith(known.id):
            return known.reason
        if known.match and (re.search(known.match, row.label) or re.search(known.match, row.diff)):
            return known.reason
    return None


def solution_sha256(spec: LabSpec) -> str:
    digest = hashlib.sha256()
    for rel, source in sorted(spec.solution_sources().items()):
        digest.update(rel.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()
