"""Fast structural checks of the paged-kv-cache lab (the slow proof that its
grader can fail is `roadmap dev check paged-kv-cache`, tests/test_labs_dev_check.py):

- the starter keeps the solution's public API (names and signatures), so the
  grader can drive whichever the learner hands in;
- every NotImplementedError in the starter points at a README section that exists;
- every wrong/ patch applies to the solution and changes only learner files;
- lab.yaml loads, maps the Triton part to the reference kernel, and every
  part's test file exists.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from roadmap_cli.labs.starter_build import solution_text

LAB = Path(__file__).resolve().parents[1] / "labs" / "paged-kv-cache"
KERNEL = LAB.parents[1] / "kernels" / "triton" / "paged_attention.py"


def public_api(path: Path) -> dict[str, str]:
    """name -> signature for module-level functions, classes and their public methods."""
    tree = ast.parse(path.read_text())
    api: dict[str, str] = {}

    def sig(fn: ast.FunctionDef) -> str:
        return ast.unparse(fn.args)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            api[node.name] = sig(node)
        elif isinstance(node, ast.ClassDef):
            api[node.name] = "class"
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and (not item.name.startswith("_") or item.name == "__init__"):
                    api[f"{node.name}.{item.name}"] = sig(item)
    return api


SOLVED = {p.name: p for p in (LAB / "solution").glob("*.py")}
SOLVED["triton_paged_attention.py"] = KERNEL


@pytest.mark.parametrize("name", sorted(SOLVED))
def test_starter_keeps_the_solution_api(name):
    starter = LAB / "starter" / name
    assert starter.exists(), f"starter/{name} is missing"
    assert public_api(starter) == public_api(SOLVED[name])


def test_todos_point_at_existing_readme_sections():
    headings = set(re.findall(r"^## (.+)$", (LAB / "README.md").read_text(), flags=re.M))
    cited = set()
    for path in (LAB / "starter").glob("*.py"):
        cited |= set(re.findall(r'see README\.md, section \\"([^"\\]+)\\"', path.read_text()))
    assert cited, "the starter cites no README sections"
    assert cited <= headings, f"README has no section(s) {sorted(cited - headings)}"


def test_starter_functions_raise_not_implemented():
    todo = 0
    for path in (LAB / "starter").glob("*.py"):
        todo += path.read_text().count("raise NotImplementedError(")
    assert todo >= 15


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("patch", sorted(p.name for p in (LAB / "wrong").glob("*.patch")))
def test_wrong_patches_apply_to_the_solution(patch, tmp_path):
    for path in (LAB / "starter").glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    for name, path in SOLVED.items():  # the solution view: markers and starter lines stripped
        (tmp_path / name).write_text(solution_text(path.read_text(), name))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    proc = subprocess.run(
        ["git", "apply", "--check", str(LAB / "wrong" / patch)], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    touched = re.findall(r"^\+\+\+ b/(\S+)", (LAB / "wrong" / patch).read_text(), flags=re.M)
    assert touched and all(t in SOLVED for t in touched)


def test_lab_spec_loads():
    from roadmap_cli.labs.spec import load_lab

    spec = load_lab(LAB)
    assert spec.id == "paged-kv-cache"
    parts = {p.id: p for p in spec.parts}
    assert list(parts) == [
        "block-manager",
        "paged-attention",
        "triton-paged-attention",
        "scheduler",
        "engine",
        "performance",
    ]
    assert parts["performance"].needs_cuda and not parts["engine"].needs_cuda
    assert spec.solution_files == {"triton_paged_attention.py": "kernels/triton/paged_attention.py"}
    assert 3 <= len(spec.hints) <= 5
    assert {w.id for w in spec.wrong} == {p.stem for p in (LAB / "wrong").glob("*.patch")}
    for part in spec.parts:
        for prefix in part.tests:
            assert (LAB / "tests" / prefix.split("::")[0]).exists()


def test_grader_model_is_the_workspace_model():
    """The engine part runs the learner's engine on the grader's copy of the read-only
    model (tests/grader_model.py) and decodes the reference with it: the two must stay equal."""
    grader = (LAB / "tests" / "grader_model.py").read_text()
    assert grader == solution_text((LAB / "solution" / "model.py").read_text(), "model.py")
    assert grader == (LAB / "starter" / "model.py").read_text()


def test_every_adapter_entry_point_runs_learner_side():
    """Sandbox contract: every adapter function a test calls runs in the learner process
    and returns plain data (the grader process never imports the workspace)."""
    tree = ast.parse((LAB / "tests" / "adapter.py").read_text())
    public = [n for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    assert public
    for fn in public:
        decorators = [ast.unparse(d) for d in fn.decorator_list]
        assert "learner_side" in decorators, f"adapter.{fn.name} is not @learner_side"
