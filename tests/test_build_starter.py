"""One source for starter and solution: the marker format, `dev build-starter`
(writing and --check), and that every shipped lab's starter/ is the one its
single source builds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from roadmap_cli.errors import ValidationError
from roadmap_cli.labs.starter_build import has_markers, parse_regions, solution_text, starter_text
from roadmap_cli.authoring.starter_mark import mark

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures_labs"

REFERENCE = '''\
# BEGIN SOLUTION
"""Solved module: the docstring a learner sees after passing."""
# STARTER
# """Starter module: implement add() (README.md, section Add)."""
# END SOLUTION

import os


def add(a, b):
    # BEGIN SOLUTION
    # the sum, in one line
    return a + b
    # STARTER
    # # TODO: return the sum
    #
    # raise NotImplementedError("add: see README.md")
    # END SOLUTION


# BEGIN SOLUTION
def _helper():
    return 1
# END SOLUTION
def sub(a, b):
    # BEGIN SOLUTION
    # STARTER
    # pass
    # END SOLUTION
    return a - b
'''


def test_three_views_of_one_source():
    starter = starter_text(REFERENCE, "m.py")
    solution = solution_text(REFERENCE, "m.py")
    assert starter.startswith('"""Starter module: implement add() (README.md, section Add)."""\n\nimport os\n')
    assert '    # TODO: return the sum\n\n    raise NotImplementedError("add: see README.md")\n' in starter
    assert "_helper" not in starter and "    pass\n    return a - b\n" in starter
    assert solution.startswith('"""Solved module: the docstring a learner sees after passing."""\n\nimport os\n')
    assert "    # the sum, in one line\n    return a + b\n" in solution and "_helper" in solution
    assert "SOLUTION" not in solution + starter and "STARTER" not in solution + starter and "TODO" not in solution
    assert [(r.begin, r.starter, r.end) for r in parse_regions(REFERENCE, "m.py")] == [
        (0, 2, 4),
        (10, 13, 17),
        (20, None, 23),
        (25, 26, 28),
    ]
    compile(REFERENCE, "m.py", "exec")  # the reference itself is valid, runnable code
    namespace: dict = {}
    exec(compile(REFERENCE, "m.py", "exec"), namespace)
    assert namespace["__doc__"].startswith("Solved module") and namespace["add"](2, 3) == 5


def test_cuda_files_use_the_double_slash_prefix():
    source = "int f() {\n    // BEGIN SOLUTION\n    return 1;\n    // STARTER\n    // return 0;  // TODO\n    // END SOLUTION\n}\n"
    assert starter_text(source, "k.cu") == "int f() {\n    return 0;  // TODO\n}\n"
    assert solution_text(source, "k.cu") == "int f() {\n    return 1;\n}\n"
    assert starter_text(source, "notes.txt") == source  # files without a comment prefix are never marked


@pytest.mark.parametrize(
    "broken, problem",
    [
        ("# BEGIN SOLUTION\nx = 1\n", "m.py:1: BEGIN SOLUTION is never closed"),
        ("x = 1\n# END SOLUTION\n", "m.py:2: END SOLUTION without BEGIN SOLUTION"),
        (
            "# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION\n",
            "m.py:2: BEGIN SOLUTION inside the region opened at line 1",
        ),
        ("# BEGIN SOLUTION\n# STARTER\nraise X\n# END SOLUTION\n", "m.py:3: a starter line must be a comment"),
    ],
)
def test_misplaced_markers_name_file_and_line(broken, problem):
    with pytest.raises(ValidationError) as info:
        parse_regions(broken, "m.py")
    assert any(d.startswith(problem) for d in info.value.details), info.value.details


def test_the_converter_reproduces_both_files_byte_for_byte():
    starter = '"""Doc of the\nstarter."""\nimport a\n\ndef f(x):\n    \n    raise NotImplementedError\n\n\ndef g(y):\n    return y\n'
    solution = '"""Doc of the\nsolution."""\nimport a\n\ndef f(x):\n    y = x \\\n        + 1\n    return y\n\n\ndef g(y):\n    return y\n'
    marked = mark(starter, solution, "f.py")
    assert starter_text(marked, "f.py") == starter
    assert solution_text(marked, "f.py") == solution
    first = marked.splitlines()
    # The docstring is wrapped whole: no comment line inside the string.
    assert first[0] == "# BEGIN SOLUTION" and first[1] == '"""Doc of the' and first[2] == 'solution."""'
    compile(marked, "f.py", "exec")


def test_every_shipped_lab_starter_is_built_from_its_source(run_cli):
    result = run_cli("dev", "build-starter", "--check", "--json")
    assert result.exit_code == 0, result
    labs = result.json()["data"]["labs"]
    assert {"minigpt", "paged-kv-cache", "flash-attention", "cuda-matmul"} <= set(labs)
    assert all(stale == [] for stale in labs.values()), labs


def test_kernel_lab_sources_are_the_reference_kernels():
    """kernels/ files carry the markers and still are the project's reference kernels."""
    from roadmap_cli.labs.spec import find_lab

    spec = find_lab("cuda-matmul")
    sources = spec.solution_sources()
    assert sources["matmul.py"] == ROOT / "kernels" / "triton" / "matmul.py"
    assert has_markers(sources["matmul.py"].read_text(), "matmul.py")
    compile(sources["matmul.py"].read_text(), "matmul.py", "exec")


@pytest.fixture
def labs_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(FIXTURES / "labs", tmp_path / "labs")
    shutil.copytree(FIXTURES / "kernels", tmp_path / "kernels")
    monkeypatch.setenv("ROADMAP_LABS_DIR", str(tmp_path / "labs"))
    return tmp_path / "labs"


def test_build_and_check_round_trip(labs_copy: Path, run_cli):
    adder = labs_copy / "adder"
    assert run_cli("dev", "build-starter", "--check", "adder").exit_code == 0
    source = adder / "solution" / "adder.py"
    source.write_text(
        source.read_text().replace(
            '# raise NotImplementedError("implement add', '# raise NotImplementedError("write add'
        )
    )
    (adder / "starter" / "extra.py").write_text("x = 1\n")
    result = run_cli("dev", "build-starter", "--check", "adder")
    assert result.exit_code == 1
    assert "starter/adder.py differs from the one built from" in result.stdout
    assert "starter/extra.py has no source" in result.stdout
    result = run_cli("dev", "build-starter", "adder")
    assert result.exit_code == 0 and "2 file(s) written" in result.stdout, result
    assert 'raise NotImplementedError("write add' in (adder / "starter" / "adder.py").read_text()
    assert not (adder / "starter" / "extra.py").exists()
    assert run_cli("dev", "build-starter", "--check", "adder").exit_code == 0
    assert "already up to date" in run_cli("dev", "build-starter", "adder").stdout


def test_the_solution_written_to_a_workspace_has_no_markers(labs_copy: Path, tmp_path: Path):
    from roadmap_cli.labs import workspace as ws
    from roadmap_cli.labs.spec import find_lab

    ws.write_solution(find_lab("adder"), tmp_path / "ws")
    assert (tmp_path / "ws" / "adder.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (tmp_path / "ws" / "mul.py").read_text() == "def mul(a, b):\n    return a * b\n"


def test_dev_check_flags_a_stale_starter(labs_copy: Path):
    from roadmap_cli.authoring.devcheck import static_problems
    from roadmap_cli.labs.spec import find_lab

    (labs_copy / "adder" / "starter" / "adder.py").write_text("def add(a, b):\n    pass\n")
    problems = static_problems(find_lab("adder"))
    assert any("starter/adder.py differs" in p and "roadmap dev build-starter adder" in p for p in problems)
